"""Two batches in flight (``executor.Prefetcher`` with two producers): order, state and end of data.

With ``num_threads >= 2`` and ``prefetch_queue_depth >= 2`` a pipeline begins batches (its sources)
one at a time, in order, and finishes them (the other operators) on two producer threads. These
tests check that nothing observable changes: batches arrive in order, the sources are called in
order and never after the end of the data, checkpoints describe exactly the consumed batches, and
errors arrive at the batch that raised them. They order the threads with events, not sleeps, so
that every check can fail and none depends on timing.
"""

from __future__ import annotations

import collections
import threading

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types


def test_batches_arrive_in_order_although_later_ones_finish_first(monkeypatch):
    from jaxdali.ops import geometry

    calls, finished = [], []
    done = collections.defaultdict(threading.Event)  # iteration -> its reshape has finished

    def source(info):
        calls.append(info.iteration)
        return [np.full((4,), info.iteration * 10 + i, np.int32) for i in range(2)]

    original = geometry.Reshape.run

    def even_waits_for_next(self, ctx, inputs, args):
        k = ctx.iteration
        # An even batch of the 8 read finishes only after the odd batch begun after it: that needs
        # two batches in flight, and it makes the later batch finish first on every run.
        if k % 2 == 0 and k < 8 and not done[k + 1].wait(timeout=30):
            raise RuntimeError(f"batch {k + 1} did not finish while batch {k} ran: not two batches in flight")
        out = original(self, ctx, inputs, args)
        finished.append(k)
        done[k].set()
        return out

    monkeypatch.setattr(geometry.Reshape, "run", even_waits_for_next)

    @pipeline_def(batch_size=2, num_threads=2, prefetch_queue_depth=3, device_id=None, seed=1)
    def pipe():
        x = fn.external_source(source=source, batch=True, batch_info=True)
        return fn.reshape(x, shape=[2, 2])

    p = pipe()
    p.build()
    assert p._prefetcher._producers == 2
    firsts = []
    for _ in range(8):
        (out,) = p.run()
        firsts.append(int(out.as_array()[0, 0, 0]))
    p.close()
    assert firsts == [i * 10 for i in range(8)]
    assert calls[:8] == list(range(8))  # the source was called in batch order
    for k in range(0, 8, 2):  # and each odd batch did finish before the even one begun before it
        assert finished.index(k + 1) < finished.index(k), finished


def test_sources_are_not_called_again_after_the_end_of_data():
    calls = []

    def source(info):
        calls.append((info.epoch_idx, info.iteration))
        if info.iteration >= 3:
            raise StopIteration
        return [np.array([info.iteration], np.int32)] * 2

    @pipeline_def(batch_size=2, num_threads=2, prefetch_queue_depth=2, device_id=None, seed=1)
    def pipe():
        return fn.cast(fn.external_source(source=source, batch=True, batch_info=True), dtype=types.FLOAT)

    p = pipe()
    p.build()
    got = []
    with pytest.raises(StopIteration):
        while True:
            got.append(float(p.run()[0].as_array()[0, 0]))
    assert got == [0.0, 1.0, 2.0]
    # Sources are called in order, so a call begun after the end of the data would come before the
    # first call of the next epoch, which has happened once the next epoch's first batch arrives.
    p.reset()
    assert float(p.run()[0].as_array()[0, 0]) == 0.0
    p.close()
    assert [c for c in calls if c[0] == 0] == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert calls[4] == (1, 0)


def test_checkpoint_with_two_batches_in_flight_resumes_exactly(tmp_path):
    files = []
    for i in range(11):
        path = tmp_path / f"{i:02d}.bin"
        path.write_bytes(bytes([i]) * 3)
        files.append(str(path))

    @pipeline_def(batch_size=2, num_threads=2, prefetch_queue_depth=2, device_id=None, seed=7,
                  enable_checkpointing=True)
    def pipe():
        data, _ = fn.readers.file(files=files, random_shuffle=True, name="Reader")
        return fn.cast(data, dtype=types.FLOAT)

    def first_bytes(out):
        return [int(s[0]) for s in out[0].as_cpu().samples()]

    p = pipe()
    p.build()
    taken = [first_bytes(p.run()) for _ in range(3)]
    checkpoint = p.checkpoint()
    rest = [first_bytes(p.run()) for _ in range(4)]
    p.close()
    q = pipe(checkpoint=checkpoint)
    q.build()
    assert [first_bytes(q.run()) for _ in range(4)] == rest
    q.close()
    assert len(taken) == 3


def test_an_error_arrives_at_its_batch():
    def source(info):
        return [np.array([info.iteration], np.int32)] * 2

    @pipeline_def(batch_size=2, num_threads=2, prefetch_queue_depth=3, device_id=None, seed=1)
    def pipe():
        x = fn.external_source(source=source, batch=True, batch_info=True)
        return fn.cast(x, dtype=types.FLOAT), fn.random.coin_flip()

    p = pipe()
    p.build()
    # Patch the cast to fail on batch 2 only.
    from jaxdali.ops import color

    original = color.Cast.run

    def run(self, ctx, inputs, args):
        if ctx.iteration == 2:
            raise ValueError("bad batch 2")
        return original(self, ctx, inputs, args)

    color.Cast.run = run
    try:
        assert float(p.run()[0].as_array()[0, 0]) == 0.0
        assert float(p.run()[0].as_array()[0, 0]) == 1.0
        with pytest.raises(ValueError, match="bad batch 2"):
            p.run()
    finally:
        color.Cast.run = original
        p.close()
