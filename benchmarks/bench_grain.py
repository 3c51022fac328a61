"""Grain: ``MapDataset`` with OpenCV decode and augmentations on threads, batched by ``IterDataset``.

Per element (on Grain's read threads, ``ReadOptions(num_threads=--threads)``): read the file,
``cv2.imdecode`` to RGB; train: random-resized crop (area [0.08, 1], ratio [3/4, 4/3], ten tries,
then a centre crop, as torchvision draws it), resize to 224x224, horizontal flip with p=0.5;
val: resize the shorter side to 256, centre crop 224x224; then normalise to float32 CHW. OpenCV
resizes with INTER_AREA when shrinking and INTER_LINEAR when enlarging. The dataset is repeated
without end, so epochs never stall the threads. The read buffer holds two batches.

Run by ``run.py``: ``GRAIN_PYTHON benchmarks/bench_grain.py --pipeline train --data DIR``.
"""

from __future__ import annotations

import math
import time

import harness


def random_window(height: int, width: int, rng) -> tuple[int, int, int, int]:
    """(y, x, h, w) of a random crop with area in RANDOM_AREA and aspect ratio in RANDOM_ASPECT_RATIO."""
    area = height * width
    log_lo, log_hi = (math.log(r) for r in harness.RANDOM_ASPECT_RATIO)
    for _ in range(10):
        target = area * rng.uniform(*harness.RANDOM_AREA)
        ratio = math.exp(rng.uniform(log_lo, log_hi))
        w = round(math.sqrt(target * ratio))
        h = round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
    side = min(height, width)
    return (height - side) // 2, (width - side) // 2, side, side


def main(argv: list[str] | None = None) -> dict:
    args = harness.parse_args(argv)

    import cv2
    import grain
    import numpy as np

    imported_at = time.time()
    versions = {"grain": _version("grain"), "opencv": cv2.__version__, "numpy": np.__version__}
    cv2.setNumThreads(1)  # parallelism comes from Grain's threads, one image each
    size = harness.OUTPUT_SIZE

    def resize(img, w: int, h: int):
        shrink = w * h < img.shape[0] * img.shape[1]
        return cv2.resize(img, (w, h), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)

    def load(sample):
        path, label = sample
        with open(path, "rb") as f:
            data = np.frombuffer(f.read(), np.uint8)
        return cv2.imdecode(data, cv2.IMREAD_COLOR_RGB), label

    def train_augment(sample, rng):
        img, label = sample
        y, x, h, w = random_window(img.shape[0], img.shape[1], rng)
        img = resize(img[y:y + h, x:x + w], size, size)
        if rng.random() < 0.5:
            img = img[:, ::-1]
        return img, label

    def val_crop(sample):
        img, label = sample
        h, w = img.shape[:2]
        scale = harness.VAL_RESIZE_SHORTER / min(h, w)
        img = resize(img, max(size, round(w * scale)), max(size, round(h * scale)))
        y, x = (img.shape[0] - size) // 2, (img.shape[1] - size) // 2
        return img[y:y + size, x:x + size], label

    def normalize(sample):
        img, label = sample
        return harness.normalize_chw(img), np.int32(label)

    def make_loader():
        ds = grain.MapDataset.source(harness.list_images(args.data))
        if args.pipeline == "train":
            ds = ds.shuffle(seed=args.seed).repeat().map(load).random_map(train_augment, seed=args.seed)
        else:
            ds = ds.repeat().map(load).map(val_crop)
        ds = ds.map(normalize)
        read = grain.ReadOptions(num_threads=args.threads, prefetch_buffer_size=2 * args.batch_size)
        iterator = iter(ds.to_iter_dataset(read).batch(args.batch_size, drop_remainder=True))
        return lambda: next(iterator)[0]

    return harness.measure(args, imported_at, make_loader, system="grain", mode="threads + OpenCV",
                           versions=versions)


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    main()
