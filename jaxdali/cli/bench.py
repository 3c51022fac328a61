"""``jaxdali bench DIR``: throughput of the standard ResNet-50 train and val pipelines on a folder, with
the time each operator took (``Pipeline.executor_statistics``) and the CPU the process used."""

from __future__ import annotations

import argparse
import os
import resource
import time

from jaxdali.cli.common import Progress, class_folder, standard_train, standard_val

__all__ = ["add_parser", "run", "measure"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("bench", help="throughput of the standard train/val pipelines on a folder",
                              description=__doc__)
    p.add_argument("folder", metavar="DIR", help="ImageNet-style folder: one sub-folder of images per class")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="worker threads (default: all cores)")
    p.add_argument("--crop", type=int, default=224)
    p.add_argument("--batches", type=int, default=None,
                   help="batches timed per pipeline (default: one epoch, at least 2)")
    p.add_argument("--pipelines", choices=["train", "val", "both"], default="both")
    p.set_defaults(run=run)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(pipe, batches: int, label: str) -> dict:
    """Runs ``batches`` batches after one warm-up batch: images/s and CPU use over those, and the
    seconds of each operator over all batches the pipeline produced (``operator_images`` images)."""
    pipe.build()
    pipe.run()  # warm-up: thread pool, decoder instances, first allocations

    progress = Progress(label, batches)
    wall, cpu = time.perf_counter(), _cpu_seconds()
    for done in range(1, batches + 1):
        pipe.run()
        elapsed = time.perf_counter() - wall
        progress.update(1, f"{done * pipe.max_batch_size / max(elapsed, 1e-9):.0f} images/s")
    wall, cpu = time.perf_counter() - wall, _cpu_seconds() - cpu
    progress.close()
    # One consistent snapshot over every batch the producer finished (it works ahead of run(), so
    # that is not the number taken); the warm-up batch is included.
    ops = pipe.executor_statistics()
    produced = pipe.queue_statistics()["batches"]
    return {"images": batches * pipe.max_batch_size, "seconds": wall, "images_per_s": batches * pipe.max_batch_size / wall,
            "cpu_cores": cpu / wall, "operators": ops, "operator_images": max(produced, 1) * pipe.max_batch_size,
            "fused": pipe.fused_operators()}


def run(args: argparse.Namespace) -> int:
    files, labels, classes = class_folder(args.folder)
    batches = args.batches or max(2, -(-len(files) // args.batch_size))
    print(f"{args.folder}: {len(files)} images, {len(classes)} classes; batch {args.batch_size}, "
          f"{args.threads} threads, crop {args.crop}, {batches} batches per pipeline after 1 warm-up batch")
    pipelines = {"train": standard_train, "val": standard_val}
    for name in (["train", "val"] if args.pipelines == "both" else [args.pipelines]):
        pipe = pipelines[name](files, labels, crop=args.crop, batch_size=args.batch_size, num_threads=args.threads,
                               device_id=None, seed=0)
        try:
            result = measure(pipe, batches, name)
        finally:
            pipe.close()
        print(f"\n{name}: {result['images']} images in {result['seconds']:.2f} s = {result['images_per_s']:.0f} "
              f"images/s; CPU {result['cpu_cores']:.2f} cores ({100 * result['cpu_cores'] / (os.cpu_count() or 1):.0f} "
              f"% of {os.cpu_count()})")
        total = sum(result["operators"].values()) or 1.0
        print(f"  {'operator':<36} {'seconds':>8} {'share':>6} {'ms/image':>9}   "
              f"(over the {result['operator_images']} images produced)")
        for op, seconds in sorted(result["operators"].items(), key=lambda kv: -kv[1]):
            print(f"  {op:<36} {seconds:8.3f} {100 * seconds / total:5.1f}% "
                  f"{1000 * seconds / result['operator_images']:9.3f}")
        for reader, producer in sorted(result["fused"].items()):
            print(f"  note: {reader} includes {producer}'s work (it computes those samples as it reads them)")
    return 0
