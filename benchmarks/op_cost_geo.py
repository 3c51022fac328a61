"""Per-operator cost cases of the geometry operators of issue 22 (run by ``benchmarks/op_cost.py``).

``experimental.resize`` has no case: DALI runs it on the GPU only (here it is ``fn.resize``, whose
cost is measured by ``benchmarks/run.py``).
"""

CASES = {
    "resize_crop_mirror": lambda fn, images: fn.resize_crop_mirror(images, resize_shorter=256, crop=(224, 224),
                                                                    mirror=1),
    "fast_resize_crop_mirror": lambda fn, images: fn.fast_resize_crop_mirror(images, size=[240, 320],
                                                                              crop=(224, 224), crop_pos_x=0.2),
    "tensor_resize": lambda fn, images: fn.tensor_resize(images, scales=[0.6, 0.6], axes=[0, 1]),
}


def _boxes(fn, count: int = 20):
    """``count`` random normalised xyXY boxes per sample (the same in both libraries)."""
    import numpy as np

    rng = np.random.default_rng(0)
    lt = rng.uniform(0, 0.6, (32, count, 2))
    boxes = np.concatenate([lt, lt + rng.uniform(0.05, 0.4, lt.shape)], axis=2).astype(np.float32)
    return fn.external_source(source=lambda: list(boxes), batch=True)


CASES["bbox_rotate"] = lambda fn, images: fn.bbox_rotate(_boxes(fn), angle=25.0, input_shape=[375, 500],
                                                         keep_size=True)


def _masks(fn):
    """Label masks of the photos' size, each with 12 random rectangles of labels 1 to 3 on background 0."""
    import numpy as np

    rng = np.random.default_rng(1)
    masks = []
    for _ in range(4):
        mask = np.zeros((375, 500), np.int32)
        for _ in range(12):
            y, x = rng.integers(0, 300), rng.integers(0, 420)
            mask[y:y + rng.integers(10, 75), x:x + rng.integers(10, 80)] = rng.integers(1, 4)
        masks.append(mask)
    return fn.external_source(source=lambda: masks * 8, batch=True)


CASES["segmentation.random_object_bbox"] = lambda fn, images: fn.segmentation.random_object_bbox(
    _masks(fn), format="box", k_largest=3, output_class=True)


def _labels(fn, count: int = 20):
    import numpy as np

    return fn.external_source(source=lambda: [np.arange(1, count + 1, dtype=np.int32)] * 32, batch=True)


CASES["ssd_random_crop"] = lambda fn, images: fn.ssd_random_crop(images, _boxes(fn, 3), _labels(fn, 3),
                                                                 num_attempts=10)
