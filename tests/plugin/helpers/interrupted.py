"""A child process for tests/plugin/test_interrupts.py: runs a loader and prints "ready" once it is in
the state the parent interrupts (with SIGINT) at a chosen moment.

Modes: ``iterate`` (endless epochs through the JAX iterator on a JAX device), ``exit`` (the script ends
while producers are still busy), ``shutdown`` (endless create/iterate/close cycles), ``spin`` (issue
22's ``while done < n: for b in it`` loop over an external source that ends every epoch),
``exit-busy`` (the script ends while a producer is inside a slow source, which then writes the file
given as the third argument).
"""

import signal

# What an interactive terminal gives; a test run in the background may inherit SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)

import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from jaxdali import fn, pipeline_def  # noqa: E402
from jaxdali.plugin.jax import DALIGenericIterator  # noqa: E402

mode, flowers = sys.argv[1], sys.argv[2]


@pipeline_def(batch_size=32, num_threads=2, device_id=0, seed=1)
def photos():
    jpegs, labels = fn.readers.file(file_root=flowers, name="Reader", random_shuffle=True)
    images = fn.resize(fn.decoders.image(jpegs), size=(96, 96))
    return fn.crop_mirror_normalize(images, mean=[0.0] * 3, std=[255.0] * 3, output_layout="CHW"), labels


def ends_every_fourth_batch(info):
    if info.iteration >= 4:
        raise StopIteration
    return [np.full((2,), info.iteration, np.int32) for _ in range(2)]


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def counted():
    return fn.external_source(ends_every_fourth_batch, batch_info=True)


def slow_third_batch(info):
    if info.iteration == 2:
        time.sleep(1.5)
        with open(sys.argv[3], "w") as f:
            f.write("the producer finished its batch")
    return [np.zeros((2,), np.int32) for _ in range(2)]


@pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=2)
def slow():
    return fn.external_source(slow_third_batch, batch_info=True)


def photo_iterator():
    return DALIGenericIterator([photos()], ["images", "labels"], reader_name="Reader", auto_reset=True)


if mode == "iterate":
    it = photo_iterator()
    print("ready", flush=True)
    while True:
        for batch in it:
            pass
elif mode == "exit":
    it = photo_iterator()
    next(it)
    next(it)
    print("ready", flush=True)  # the producers are computing the next batches while the script ends
elif mode == "shutdown":
    first = True
    while True:
        with photo_iterator() as it:
            next(it)
        if first:
            print("ready", flush=True)
            first = False
elif mode == "spin":
    it = DALIGenericIterator([counted()], ["x"], size=8, auto_reset=True)
    print("ready", flush=True)
    done = 0
    while done < 10**9:
        for batch in it:
            done += 1
elif mode == "exit-busy":
    it = DALIGenericIterator([slow()], ["x"])
    next(it)
    print("ready", flush=True)  # batch 2 is being made: the exit hook waits for it
else:
    raise SystemExit(f"unknown mode {mode!r}")
