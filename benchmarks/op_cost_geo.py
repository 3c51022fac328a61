"""Per-operator cost cases of the geometry operators of issue 22 (run by ``benchmarks/op_cost.py``).

Boxes, labels and masks are fixed NumPy data fed per sample (the same in both libraries): 20 random
normalised ltrb boxes per sample, and 375x500 label masks with 12 random rectangles of labels 1 to 3.
``experimental.resize`` has no case: DALI runs it on the GPU only (here it is ``fn.resize``, whose
cost is measured by ``benchmarks/run.py``).
"""

import numpy as np

_rng = np.random.default_rng(0)
_lt = _rng.uniform(0, 0.6, (32, 20, 2))
BOXES = np.concatenate([_lt, _lt + _rng.uniform(0.05, 0.4, _lt.shape)], axis=2).astype(np.float32)
LABELS = np.arange(1, 21, dtype=np.int32)


def _mask() -> np.ndarray:
    mask = np.zeros((375, 500), np.int32)
    for _ in range(12):
        y, x = _rng.integers(0, 300), _rng.integers(0, 420)
        mask[y:y + _rng.integers(10, 75), x:x + _rng.integers(10, 80)] = _rng.integers(1, 4)
    return mask


MASKS = [_mask() for _ in range(4)]


def _per_sample(fn, samples, count: int | None = None):
    """An external source giving sample ``i % len(samples)`` (its first ``count`` rows when given)."""
    return fn.external_source(source=lambda info: samples[info.idx_in_batch % len(samples)][:count], batch=False)


CASES = {
    "resize_crop_mirror": lambda fn, images: fn.resize_crop_mirror(images, resize_shorter=256, crop=(224, 224),
                                                                    mirror=1),
    "fast_resize_crop_mirror": lambda fn, images: fn.fast_resize_crop_mirror(images, size=[240, 320],
                                                                              crop=(224, 224), crop_pos_x=0.2),
    "tensor_resize": lambda fn, images: fn.tensor_resize(images, scales=[0.6, 0.6], axes=[0, 1]),
    "bbox_rotate": lambda fn, images: fn.bbox_rotate(_per_sample(fn, BOXES), angle=25.0, input_shape=[375, 500],
                                                     keep_size=True),
    "segmentation.random_object_bbox": lambda fn, images: fn.segmentation.random_object_bbox(
        _per_sample(fn, MASKS), format="box", k_largest=3, output_class=True),
    "ssd_random_crop": lambda fn, images: fn.ssd_random_crop(images, _per_sample(fn, BOXES, 3),
                                                             _per_sample(fn, [LABELS], 3), num_attempts=10),
}
