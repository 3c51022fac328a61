"""Per-operator cost cases of the transform, box and detection operators (run by ``op_cost.py``).

Box inputs are made inside the pipeline from ``fn.random.uniform`` (50 boxes per sample, the same
cost in both libraries): [x, y, w, h] values in [0, 0.5) are valid boxes in either layout's sense,
and ``coord_transform`` turns them into [l, t, r, b] for the operators that need corners.
"""

from __future__ import annotations

from op_cost import types_of

BOXES_PER_SAMPLE = 50
XYWH_TO_LTRB = [1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0, 1]


def _xywh(fn):
    return fn.random.uniform(range=[0.0, 0.5], shape=[BOXES_PER_SAMPLE, 4])


def _ltrb(fn):
    return fn.coord_transform(_xywh(fn), M=XYWH_TO_LTRB)


def _points(fn):
    return fn.random.uniform(range=[0.0, 1.0], shape=[BOXES_PER_SAMPLE * 4, 2])


def _labels(fn):
    return fn.cast(fn.random.uniform(range=[1, 80], shape=[BOXES_PER_SAMPLE]), dtype=types_of(fn).INT32)


def _anchors() -> list[float]:
    """8732-like SSD anchor count at a smaller scale: a 19x19 grid, 6 boxes per cell (2166 anchors)."""
    out = []
    for i in range(19):
        for j in range(19):
            cx, cy = (j + 0.5) / 19, (i + 0.5) / 19
            for w, h in ((0.1, 0.1), (0.2, 0.2), (0.14, 0.07), (0.07, 0.14), (0.3, 0.15), (0.15, 0.3)):
                out += [max(cx - w / 2, 0), max(cy - h / 2, 0), min(cx + w / 2, 1), min(cy + h / 2, 1)]
    return out


ANCHORS = _anchors()

CASES = {
    "transforms_chain": lambda fn, images: fn.transforms.shear(fn.transforms.rotation(
        fn.transforms.scale(fn.transforms.translation(offset=[3.0, 4.0]), scale=[1.1, 0.9]), angle=12.0),
        shear=[0.1, 0.05]),
    "transforms_per_sample": lambda fn, images: fn.transforms.rotation(
        angle=fn.random.uniform(range=[-30.0, 30.0]), center=[250.0, 187.5]),
    "warp_affine_rotation": lambda fn, images: fn.warp_affine(
        images, matrix=fn.transforms.rotation(angle=15.0, center=[250.0, 187.5]), fill_value=0),
    "coord_transform": lambda fn, images: fn.coord_transform(_points(fn), MT=[1.5, 0.2, 3.0, -0.1, 0.9, 2.0]),
    "coord_flip": lambda fn, images: fn.coord_flip(_points(fn), flip_y=1),
    "bb_flip": lambda fn, images: fn.bb_flip(_xywh(fn), vertical=1),
    "bbox_paste": lambda fn, images: fn.bbox_paste(_xywh(fn), ratio=2.0, paste_x=0.3, paste_y=0.7),
    "box_encoder": lambda fn, images: fn.box_encoder(_ltrb(fn), _labels(fn), anchors=ANCHORS, offset=True),
    "random_bbox_crop": lambda fn, images: fn.random_bbox_crop(
        _xywh(fn), _labels(fn), bbox_layout="xyWH", thresholds=[0.0, 0.1, 0.3], all_boxes_above_threshold=False,
        scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0], num_attempts=10),
}
CASES["roi_random_crop"] = lambda fn, images: fn.roi_random_crop(images, crop_shape=[200, 200, 3],
                                                                 roi_start=[100, 150, 0], roi_end=[250, 300, 3])
CASES["random_crop_generator"] = lambda fn, images: fn.random_crop_generator(
    fn.cast(fn.random.uniform(range=[300, 500], shape=[3]), dtype=types_of(fn).INT64))
CASES["random_mask_pixel"] = lambda fn, images: fn.segmentation.random_mask_pixel(images, foreground=1,
                                                                                  threshold=200.0)
