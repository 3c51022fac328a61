"""Images/s of a RandAugment (n=2, m=9) training pipeline, jaxdali against DALI in the same run.

Two pipelines, each built once per library on the CPU (``device_id=None``), same thread count:

* ``train``: readers.file over the shared flower photos -> decoders.image_random_crop -> resize to
  224x224 -> rand_augment(n=2, m=9) -> crop_mirror_normalize (random mirror), as in an ImageNet job.
* ``augment``: rand_augment(n=2, m=9) alone on an external_source of 32 decoded 224x224 photos,
  to isolate the cost of the augmentation from decoding.

Repetitions are interleaved (DALI, jaxdali, DALI, ...) so both see the same machine load; each
reports the median images/s.

    python benchmarks/auto_aug.py --reps 5 --batches 8
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time
from typing import Any, Callable

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
FLOWERS = REPO.parent / "shared" / "data" / "flowers"
BATCH = 32
SIZE = 224


def _libraries() -> dict[str, tuple[Any, Any, Any, Any]]:
    import nvidia.dali as dali
    import nvidia.dali.auto_aug.rand_augment as dali_ra

    import jaxdali
    import jaxdali.auto_aug.rand_augment as jax_ra
    return {"dali": (dali.pipeline_def, dali.fn, dali.types, dali_ra),
            "jaxdali": (jaxdali.pipeline_def, jaxdali.fn, jaxdali.types, jax_ra)}


def _photos() -> list[np.ndarray]:
    import cv2

    paths = sorted(FLOWERS.rglob("*.jpg"))[:BATCH]
    return [cv2.resize(cv2.cvtColor(cv2.imread(str(p)), cv2.COLOR_BGR2RGB), (SIZE, SIZE)) for p in paths]


def _build(lib: str, kind: str, threads: int, photos: list[np.ndarray]) -> Any:
    pipeline_def, fn, types, ra = _libraries()[lib]

    @pipeline_def(batch_size=BATCH, num_threads=threads, device_id=None, seed=1, enable_conditionals=True)
    def pipe():
        if kind == "augment":
            images = fn.external_source(source=lambda: photos, layout="HWC")
            return ra.rand_augment(images, n=2, m=9)
        jpegs, labels = fn.readers.file(file_root=str(FLOWERS), random_shuffle=True, seed=3)
        images = fn.resize(fn.decoders.image_random_crop(jpegs), size=[SIZE, SIZE])
        images = ra.rand_augment(images, n=2, m=9)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[124.0, 116.0, 104.0], std=[58.0, 57.0, 57.0],
                                          mirror=fn.random.coin_flip())
        return images, labels

    p = pipe()
    p.build()
    p.run()  # warm up
    return p


def _images_per_s(p: Any, batches: int) -> float:
    start = time.perf_counter()
    for _ in range(batches):
        p.run()
    return batches * BATCH / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    photos = _photos()
    print(f"batch {BATCH}, {args.threads} threads, {args.batches} batches x {args.reps} interleaved repetitions")
    print(f"{'pipeline':<10}{'DALI img/s':>12}{'jaxdali img/s':>15}{'jaxdali/DALI':>14}")
    for kind in ("augment", "train"):
        pipes = {lib: _build(lib, kind, args.threads, photos) for lib in ("dali", "jaxdali")}
        rates: dict[str, list[float]] = {lib: [] for lib in pipes}
        for _ in range(args.reps):
            for lib, p in pipes.items():
                rates[lib].append(_images_per_s(p, args.batches))
        median: Callable[[str], float] = lambda lib: statistics.median(rates[lib])  # noqa: E731
        print(f"{kind:<10}{median('dali'):>12.1f}{median('jaxdali'):>15.1f}{median('jaxdali') / median('dali'):>14.2f}")
        pipes["jaxdali"].close()


if __name__ == "__main__":
    main()
