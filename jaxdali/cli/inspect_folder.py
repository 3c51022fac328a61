"""``jaxdali inspect DIR``: what ``fn.readers.file`` would read from a folder: classes, image counts,
formats, sizes, and the files that do not decode, with the reason."""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import os

import numpy as np

from jaxdali.cli.common import Progress, class_folder
from jaxdali.ops.decoders import ImageDecodeError, decode_image, decode_path

__all__ = ["add_parser", "run", "examine"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("inspect", help="classes, counts, formats, sizes and undecodable files of a folder",
                              description=__doc__)
    p.add_argument("folder", metavar="DIR", help="ImageNet-style folder: one sub-folder of images per class")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.set_defaults(run=run)


def examine(path: str) -> tuple[str, tuple[int, int], str | None]:
    """(format, (height, width), None) of a decodable image file, or (format or "?", (0, 0), reason)."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        image = decode_image(data, source=path)
    except (ImageDecodeError, ValueError) as e:
        return ("?", (0, 0), str(e).split(f"({path!r}): ", 1)[-1])
    return decode_path(data).removesuffix("-opencv"), image.shape[:2], None  # the format, whichever decoder


def run(args: argparse.Namespace) -> int:
    files, labels, classes = class_folder(args.folder)
    progress = Progress("inspect", len(files))
    with concurrent.futures.ThreadPoolExecutor(args.threads) as pool:
        results = []
        for result in pool.map(examine, files, chunksize=16):
            results.append(result)
            progress.update()
    progress.close()
    counts = collections.Counter(labels)
    print(f"{args.folder}: {len(files)} files in {len(classes)} classes")
    width = max(map(len, classes))
    for label, name in enumerate(classes):
        print(f"  {name:<{width}}  {counts[label]:>7}")
    formats = collections.Counter(fmt for fmt, _, reason in results if reason is None)
    print("formats: " + ", ".join(f"{fmt} {n}" for fmt, n in formats.most_common()))
    sizes = np.array([size for _, size, reason in results if reason is None]).reshape(-1, 2)
    if len(sizes):
        lo, med, hi = (np.percentile(sizes, q, axis=0).astype(int) for q in (0, 50, 100))
        print(f"sizes (height x width): min {lo[0]} x {lo[1]}, median {med[0]} x {med[1]}, max {hi[0]} x {hi[1]}")
    bad = [(path, reason) for path, (_, _, reason) in zip(files, results) if reason is not None]
    print(f"undecodable: {len(bad)}")
    for path, reason in bad:
        print(f"  {path}: {reason}")
    return 1 if bad else 0
