"""How long a restore takes, by how far into a long epoch the checkpoint was taken.

Restore is meant to be O(1): a reader's state is one stream position, and which dataset index sits
at a position is computed, not replayed. This script takes one real checkpoint after one batch of a
decode pipeline over a long epoch (default 1,000,000 entries cycling over a photo folder), moves
its cursor to several points of the epoch (start, middle, last batch, a few epochs on), and times,
per point: building the pipeline from the checkpoint, and its first batch; and the same for a
pipeline built without a checkpoint, for comparison. Each restored batch is
checked against the sample order computed from the reader's layout, so a wrong jump fails loudly.

    python benchmarks/restore_cost.py [--data ../shared/data/flowers] [--samples 1000000] [--reps 5]

Prints a markdown table of medians (min-max) in milliseconds. Timings, not a test: nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from jaxdali import fn, pipeline_def, types  # noqa: E402
from jaxdali.ops import sampling  # noqa: E402

BATCH = 32
ORDERS = {"sequential": {}, "random_shuffle": {"random_shuffle": True},
          "shuffle_after_epoch": {"shuffle_after_epoch": True}}


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None, seed=11, prefetch_queue_depth=1,
              enable_checkpointing=True)
def train_pipe(files, order):
    jpegs, labels = fn.readers.file(files=files, name="Reader", **ORDERS[order])
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB)
    images = fn.resize(images, resize_x=64, resize_y=64)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, mean=[128.0] * 3, std=[64.0] * 3,
                                      mirror=fn.random.coin_flip())
    return images, labels


def at_batch(checkpoint: bytes, batches: int) -> bytes:
    """The checkpoint of the same run after ``batches`` batches (its counters moved there)."""
    doc = json.loads(checkpoint)
    runner = doc["pipeline"]["runner"]
    runner["iteration"] = runner["iteration_in_epoch"] = batches
    runner["ops"]["Reader"]["position"] = batches * BATCH
    return json.dumps(doc).encode()


def restore_once(files, order, checkpoint: bytes | None) -> tuple[float, float, np.ndarray, dict]:
    t0 = time.perf_counter()
    pipe = train_pipe(files, order, checkpoint=checkpoint)
    pipe.build()
    t1 = time.perf_counter()
    images, labels = pipe.run()
    t2 = time.perf_counter()
    layout = json.loads(pipe.checkpoint())["pipeline"]["runner"]["ops"]["Reader"]["layout"]
    pipe.close()
    assert images.as_array().shape == (BATCH, 3, 64, 64)
    return t1 - t0, t2 - t1, labels.as_array().ravel(), layout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(pathlib.Path(__file__).resolve().parents[2] / "shared/data/flowers"))
    parser.add_argument("--samples", type=int, default=1_000_000, help="entries in the epoch")
    parser.add_argument("--reps", type=int, default=5)
    opts = parser.parse_args()
    photos = sorted(str(p) for p in pathlib.Path(opts.data).glob("*/*") if p.suffix.lower() in (".jpg", ".jpeg"))
    files = [photos[i % len(photos)] for i in range(opts.samples)]  # labels default to the entry's index
    per_epoch = opts.samples // BATCH
    points = {"no checkpoint (fresh build)": None, "start (batch 0)": 0, "50 %": per_epoch // 2,
              "last batch": per_epoch - 1, "3.5 epochs on": per_epoch * 7 // 2}
    print(f"{opts.samples:,} entries, batch {BATCH}, {os.cpu_count()} cores, {opts.reps} repetitions; "
          f"restore = construct + build (from the checkpoint, if any), first batch = the first run() after it; "
          f"ms, median (min-max)\n")
    print("| order | checkpoint at | restore | first batch |")
    print("|---|---|---:|---:|")
    for order in ORDERS:
        original = train_pipe(files, order)
        original.run()
        base = original.checkpoint()
        original.close()
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in points}
        for _ in range(opts.reps):  # interleaved, so load changes spread over every point
            for name, batches in points.items():
                checkpoint = None if batches is None else at_batch(base, batches)
                build_s, first_s, labels, layout = restore_once(files, order, checkpoint)
                expected = sampling.stream_indices(sampling.ShardSpec(**layout), (batches or 0) * BATCH, BATCH)
                assert labels.tolist() == expected.tolist(), (order, name)
                times[name].append((build_s, first_s))
        for name, runs in times.items():
            cells = []
            for k in range(2):
                ms = [r[k] * 1e3 for r in runs]
                cells.append(f"{statistics.median(ms):.0f} ({min(ms):.0f}-{max(ms):.0f})")
            print(f"| {order} | {name} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
