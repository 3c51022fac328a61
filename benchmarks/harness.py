"""What every benchmark child process shares: the pipeline settings, the timed loop, /proc readings.

Standard library only, because rival systems run these modules under their own interpreters. A
child prints exactly one line starting with ``RESULT_PREFIX`` followed by a JSON object; anything
else it prints is ignored by the runner (and shown only when the child fails).

The timed loop (``measure``)::

    launch ── imports ── build + first batch ── warm-up batches ── timed batches ── readings
            import_s        ttfb_s                (drain prefetch)   images/s, CPU time     PSS

``import_s`` is measured from the moment the runner started the process, ``ttfb_s`` from the end of
the imports. The warm-up empties whatever the system prefetched while it started, so the timed
loop measures steady-state production, not a queue filled for free. PSS is also read at the end
of the imports (``pss_import_bytes``): what the libraries cost before the loader holds any data.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

RESULT_PREFIX = "JAXDALI_BENCH_RESULT "

# The pipelines every system implements (ImageNet-style training and validation preprocessing).
OUTPUT_SIZE = 224
VAL_RESIZE_SHORTER = 256
RANDOM_AREA = (0.08, 1.0)
RANDOM_ASPECT_RATIO = (3.0 / 4.0, 4.0 / 3.0)
MEAN_255 = (0.485 * 255, 0.456 * 255, 0.406 * 255)
STD_255 = (0.229 * 255, 0.224 * 255, 0.225 * 255)
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")

PIPELINES = ("train", "val")


@dataclasses.dataclass(frozen=True)
class ChildArgs:
    """What the runner tells a child process to measure."""

    pipeline: str
    data: str
    batch_size: int
    threads: int
    warmup: int
    batches: int
    seed: int
    launch_time: float

    def __post_init__(self):
        if self.pipeline not in PIPELINES:
            raise ValueError(f"pipeline must be one of {PIPELINES}, got {self.pipeline!r}")
        for name in ("batch_size", "threads", "batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")


def parse_args(argv: list[str] | None = None) -> ChildArgs:
    parser = argparse.ArgumentParser(description="One benchmark child: time one pipeline of one system.")
    parser.add_argument("--pipeline", choices=PIPELINES, required=True)
    parser.add_argument("--data", required=True, help="ImageNet-style folder: one sub-folder of images per class")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--warmup", type=int, default=8, help="batches taken before the timed loop")
    parser.add_argument("--batches", type=int, default=24, help="batches in the timed loop")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--launch-time", type=float, default=None,
                        help="time.time() when the runner started this process (default: now)")
    a = parser.parse_args(argv)
    return ChildArgs(pipeline=a.pipeline, data=a.data, batch_size=a.batch_size, threads=a.threads, warmup=a.warmup,
                     batches=a.batches, seed=a.seed,
                     launch_time=time.time() if a.launch_time is None else a.launch_time)


def list_images(root: str) -> list[tuple[str, int]]:
    """(path, label) for an ImageNet-style folder: classes are the sorted sub-folders, files sorted."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    samples = []
    for label, cls in enumerate(classes):
        folder = os.path.join(root, cls)
        for name in sorted(os.listdir(folder)):
            if name.lower().endswith(IMAGE_EXTENSIONS):
                samples.append((os.path.join(folder, name), label))
    if not samples:
        raise FileNotFoundError(f"no images found in class sub-folders of {root!r}")
    return samples


def normalize_chw(image):
    """A uint8 HWC RGB image as float32 CHW, ``(pixel - MEAN_255) / STD_255``, one channel at a time
    (about 9x faster with NumPy than converting and normalising the transposed image at once)."""
    import numpy as np

    height, width, channels = image.shape
    out = np.empty((channels, height, width), np.float32)
    for c in range(channels):
        plane = out[c]
        plane[...] = image[:, :, c]
        plane *= 1.0 / STD_255[c]
        plane -= MEAN_255[c] / STD_255[c]
    return out


# -- /proc readings over the process tree (this process and every descendant) ---------------------------

def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: the fields start after the last ')'.
    return text[text.rindex(")") + 2:].split()


def tree_pids(root: int | None = None) -> list[int]:
    """``root`` (default: this process) and all its descendants, from the parent links in /proc."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    pids, stack = [], [root]
    while stack:
        pid = stack.pop()
        pids.append(pid)
        stack.extend(children.get(pid, ()))
    return pids


def tree_cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds used so far by the given processes (all their threads)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            total += int(fields[11]) + int(fields[12])  # utime, stime (stat fields 14 and 15)
    return total / ticks


def tree_pss_bytes(pids: list[int]) -> int:
    """Proportional set size of the given processes, summed (shared pages are split between them)."""
    total_kb = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total_kb += int(line.split()[1])
                        break
        except OSError:
            continue
    return total_kb * 1024


# -- the timed loop -----------------------------------------------------------------------------------------

def describe(batch: Any) -> dict:
    """Shape and dtype of a batch of images (a NumPy, JAX or torch array; anything with both)."""
    return {"shape": [int(d) for d in batch.shape], "dtype": str(batch.dtype).replace("torch.", "")}


def measure(args: ChildArgs, imported_at: float, make_loader: Callable[[], Callable[[], Any]], *,
            system: str, mode: str, versions: dict[str, str],
            op_seconds: Callable[[], dict[str, float]] | None = None,
            describe_first: Callable[[Any], dict] = describe) -> dict:
    """Times one system's pipeline and returns the result record (also printed for the runner).

    Args:
      args: the child's settings.
      imported_at: ``time.time()`` right after the system's imports.
      make_loader: builds the loader and returns ``next_batch()``, which returns the next batch of
        images once its data is ready (for JAX arrays: after ``block_until_ready``) and never
        stops (it crosses epochs itself).
      system, mode: names for the report ("dali", "iterator").
      versions: library versions to report.
      op_seconds: optional; cumulative seconds per operator (jaxdali's executor statistics), read
        before and after the timed loop.
      describe_first: shape and dtype of the first batch, checked by the runner (default: its
        ``.shape`` and ``.dtype``).
    """
    pss_imported = tree_pss_bytes(tree_pids())
    next_batch = make_loader()
    first = next_batch()
    first_at = time.time()
    for _ in range(args.warmup):
        next_batch()
    pids = tree_pids()
    ops_before = dict(op_seconds()) if op_seconds else None
    cpu_before = tree_cpu_seconds(pids)
    start = time.perf_counter()
    for _ in range(args.batches):
        next_batch()
    wall = time.perf_counter() - start
    pids_after = tree_pids()
    cpu = tree_cpu_seconds(pids_after) - cpu_before
    pss = tree_pss_bytes(pids_after)
    result = {
        "system": system,
        "mode": mode,
        "pipeline": args.pipeline,
        "versions": versions,
        "images_per_s": args.batches * args.batch_size / wall,
        "cpu_percent": 100.0 * cpu / wall,
        "import_s": imported_at - args.launch_time,
        "ttfb_s": first_at - imported_at,
        "pss_bytes": pss,
        "pss_import_bytes": pss_imported,
        "processes": len(pids_after),
        "batch": describe_first(first),
        "timed_batches": args.batches,
        "batch_size": args.batch_size,
        "threads": args.threads,
    }
    if pids_after != pids:
        result["note"] = f"the process tree changed during the timed loop ({len(pids)} -> {len(pids_after)})"
    if ops_before is not None:
        after = op_seconds()
        result["op_ms_per_batch"] = {name: 1000.0 * (after[name] - ops_before.get(name, 0.0)) / args.batches
                                     for name in after}
    emit(result)
    return result


def emit(result: dict) -> None:
    """Prints the result line the runner looks for."""
    sys.stdout.flush()
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def jax_images(iterator: Any) -> Callable[[], Any]:
    """``next_batch()`` over an auto-resetting JAX iterator of ``{"images": ..., ...}`` batches: the images,
    once every array of the batch is ready (JAX is imported only by the children that use this)."""
    import jax

    next_raw = endless(lambda: iterator)

    def next_batch():
        batch = next_raw()
        jax.block_until_ready(batch)
        return batch["images"]

    return next_batch


def endless(make_iterator: Callable[[], Any]) -> Callable[[], Any]:
    """``next_batch()`` over an auto-resetting DALI-style iterator, which raises StopIteration once
    at each epoch end and continues with the next epoch on the following call."""
    it = make_iterator()

    def next_batch():
        try:
            return next(it)
        except StopIteration:
            return next(it)

    return next_batch
