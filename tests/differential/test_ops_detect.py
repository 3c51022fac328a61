"""Differential tests of the geometry-transform and box operators against NVIDIA DALI (CPU).

Deterministic operators are compared bit for bit, except ``transforms.rotation`` about a 3D axis
(DALI's Rodrigues formula rounds differently in float32: within 1e-6, a few float32 ulps) and
``bbox_paste`` (DALI's float32 expression rounds the paste offset in an order that depends on the
values: within 1.2e-7, one ulp of coordinates in [0, 1]) and ``box_encoder``'s ``offset`` encoding
(DALI's float32 logarithm is not correctly rounded, ours is: log terms within 1 ulp, so within 1e-6).
"""

from __future__ import annotations

import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")
dali_fn = pytest.importorskip("nvidia.dali.fn")
dali_types = pytest.importorskip("nvidia.dali.types")

import jaxdali  # noqa: E402
from jaxdali import fn, types  # noqa: E402

COVERED_OPERATORS = (
    "transforms.translation", "transforms.scale", "transforms.rotation", "transforms.shear", "transforms.crop",
    "transforms.combine", "coord_transform", "coord_flip", "bb_flip", "bbox_paste", "warp_affine", "box_encoder",
    "random_bbox_crop", "roi_random_crop", "random_crop_generator", "segmentation.select_masks",
    "segmentation.random_mask_pixel",
)

BATCH = 3
rng = np.random.default_rng(22)


def _constant(batch):
    return lambda: batch  # no parameter: DALI would pass the iteration to a callable that takes one


def run_both(build, feeds=(), batch_size=BATCH, layouts=None):
    """Runs ``build(fn, types, *sources)`` once through DALI and once through jaxdali; ``feeds`` are
    lists of per-sample arrays fed by external sources. Returns (dali outputs, jaxdali outputs) as
    lists of per-sample NumPy arrays."""
    results = []
    for lib, module, tps in ((dali, dali_fn, dali_types), (jaxdali, fn, types)):
        @lib.pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=5)
        def pipe():
            sources = [module.external_source(source=_constant(f), layout=(layouts or {}).get(k, ""))
                       for k, f in enumerate(feeds)]
            out = build(module, tps, *sources)
            return tuple(out) if isinstance(out, (list, tuple)) else out

        p = pipe()
        if lib is dali:
            p.build()
        outs = p.run()
        results.append([[np.array(o.as_cpu()[i] if lib is dali else o.as_cpu().at(i)) for i in range(batch_size)]
                        for o in outs])
        if lib is jaxdali:
            p.close()
    return results


def assert_same(dali_out, ours, atol=0.0):
    for a_list, b_list in zip(dali_out, ours, strict=True):
        for a, b in zip(a_list, b_list, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            if atol:
                np.testing.assert_allclose(a, b, rtol=0, atol=atol)
            else:
                np.testing.assert_array_equal(a, b)


def per_sample(*shape, lo=-3.0, hi=3.0):
    return [rng.uniform(lo, hi, shape).astype(np.float32) for _ in range(BATCH)]


TRANSFORM_CASES = {
    "translation": lambda fn, t: fn.transforms.translation(offset=[1.5, -2.25]),
    "translation_3d": lambda fn, t: fn.transforms.translation(offset=[1.5, -2.25, 7.0]),
    "scale_center": lambda fn, t: fn.transforms.scale(scale=[2.1, 3.3], center=[1.7, 1.1]),
    "scale_ndim": lambda fn, t: fn.transforms.scale(scale=[2.0], ndim=3),
    "rotation": lambda fn, t: fn.transforms.rotation(angle=30.0, center=[1.0, 2.0]),
    "rotation_90": lambda fn, t: fn.transforms.rotation(angle=90.0, center=[10.0, 20.0]),
    "shear": lambda fn, t: fn.transforms.shear(shear=[0.5, 0.25], center=[1.0, 2.0]),
    "shear_angles": lambda fn, t: fn.transforms.shear(angles=[10.0, 20.0]),
    "shear_3d": lambda fn, t: fn.transforms.shear(shear=[1, 2, 3, 4, 5, 6.0], center=[0.5, 1, 2]),
    "crop": lambda fn, t: fn.transforms.crop(from_start=[1.0, 2.0], from_end=[5.0, 4.0], to_start=[0.3, 0.0],
                                             to_end=[1.0, 1.7]),
    "crop_absolute": lambda fn, t: fn.transforms.crop(from_start=[5.0, 2.0], from_end=[1.0, 4.0], absolute=True),
    "crop_defaults": lambda fn, t: fn.transforms.crop(),
    "chain": lambda fn, t: fn.transforms.shear(
        fn.transforms.rotation(fn.transforms.scale(fn.transforms.translation(offset=[1.3, 2.0]), scale=[2.0, 3.0]),
                               angle=33), shear=[0.1, 0.2], reverse_order=True),
    "combine": lambda fn, t: fn.transforms.combine(fn.transforms.translation(offset=[1.0, 2.0]),
                                                   fn.transforms.scale(scale=[2.0, 3.0]),
                                                   fn.transforms.rotation(angle=90.0)),
    "combine_reverse": lambda fn, t: fn.transforms.combine(fn.transforms.translation(offset=[1.0, 2.0]),
                                                           fn.transforms.rotation(angle=71.0), reverse_order=True),
}


@pytest.mark.parametrize("case", sorted(TRANSFORM_CASES))
def test_transforms_equal_dali(case):
    assert_same(*run_both(TRANSFORM_CASES[case]))


def test_rotation_about_a_3d_axis_is_within_float32_rounding():
    assert_same(*run_both(lambda fn, t: fn.transforms.rotation(angle=37.0, axis=[1.0, 2.0, 0.5], center=[1, 2, 3.0])),
                atol=1e-6)


def test_transforms_take_per_sample_arguments_like_dali():
    offsets, scales, angles, centers = per_sample(2), per_sample(2, lo=0.5), per_sample(lo=-180, hi=180), per_sample(2)

    def build(fn, t, off, sc, ang, ctr):
        m = fn.transforms.translation(offset=off)
        m = fn.transforms.scale(m, scale=sc, center=ctr)
        m = fn.transforms.rotation(m, angle=ang, center=ctr)
        return m, fn.transforms.crop(from_start=off, from_end=sc, to_start=ctr), fn.transforms.shear(angles=off * 10)

    assert_same(*run_both(build, [offsets, scales, angles, centers]))


BOXES = [rng.uniform(0, 1, (k, 4)).astype(np.float32) for k in (3, 0, 5)]
POINTS = [rng.uniform(-10, 10, (k, 2)).astype(np.float32) for k in (4, 1, 6)]
FLAGS = [np.array(v, np.int32) for v in (1, 0, 1)]

BOX_CASES = {
    "bb_flip": (lambda fn, t, b, f: fn.bb_flip(b), [BOXES, FLAGS]),
    "bb_flip_ltrb_both": (lambda fn, t, b, f: fn.bb_flip(b, ltrb=True, vertical=1), [BOXES, FLAGS]),
    "bb_flip_per_sample": (lambda fn, t, b, f: fn.bb_flip(b, horizontal=f, vertical=1 - f), [BOXES, FLAGS]),
    "bbox_paste": (lambda fn, t, b, f: fn.bbox_paste(b, ratio=2.5, paste_x=0.25, paste_y=0.8), [BOXES, FLAGS]),
    "bbox_paste_ltrb": (lambda fn, t, b, f: fn.bbox_paste(b, ratio=1.7, ltrb=True), [BOXES, FLAGS]),
    "bbox_paste_per_sample": (lambda fn, t, b, r: fn.bbox_paste(b, ratio=r, paste_x=r - 1.0, paste_y=0.1),
                              [BOXES, [np.float32(v) for v in (1.0, 1.5, 1.9)]]),
    "coord_flip": (lambda fn, t, p, f: fn.coord_flip(p), [POINTS, FLAGS]),
    "coord_flip_yx": (lambda fn, t, p, f: fn.coord_flip(p, layout="yx", flip_y=f, center_y=0.3, center_x=2.0),
                      [POINTS, FLAGS]),
    "coord_flip_3d": (lambda fn, t, p, f: fn.coord_flip(p, flip_x=0, flip_y=1, flip_z=f, center_z=-1.5),
                      [[rng.uniform(0, 1, (k, 3)).astype(np.float32) for k in (2, 2, 3)], FLAGS]),
    "coord_transform_M_T": (lambda fn, t, p, f: fn.coord_transform(p, M=[1.5, 2, 3, -4.25], T=[0.5, 1]),
                            [POINTS, FLAGS]),
    "coord_transform_MT": (lambda fn, t, p, f: fn.coord_transform(p, MT=[1.1, 2, 0.5, 3, 4, 1, -1, 0.3, 2]),
                           [POINTS, FLAGS]),
    "coord_transform_scalar": (lambda fn, t, p, f: fn.coord_transform(p, M=[2.5]), [POINTS, FLAGS]),
    "coord_transform_T_only": (lambda fn, t, p, f: fn.coord_transform(p, T=[2.0, 3.0]), [POINTS, FLAGS]),
    "coord_transform_int_input": (lambda fn, t, p, f: fn.coord_transform(t.Constant(0) + fn.cast(p, dtype=t.INT16),
                                                                         M=[1.5, 2, 3, 4]), [POINTS, FLAGS]),
    "coord_transform_from_transforms": (lambda fn, t, p, f: fn.coord_transform(
        p, MT=fn.transforms.rotation(fn.transforms.translation(offset=[1.0, -2.0]), angle=30.0, center=[2.0, 1.0])),
        [POINTS, FLAGS]),
}


@pytest.mark.parametrize("case", sorted(BOX_CASES))
def test_box_and_point_operators_equal_dali(case):
    build, feeds = BOX_CASES[case]
    assert_same(*run_both(build, feeds), atol=1.2e-7 if case.startswith("bbox_paste") else 0.0)


def test_warp_affine_with_a_rotation_transform_matches_dali(flowers_root):
    """The transforms feed warp_affine end to end on real photos (uint8 within +-1, see warp.py)."""
    import pathlib

    files = [str(p) for p in sorted(pathlib.Path(flowers_root).rglob("*.jpg"))[:BATCH]]

    def build(fn, t):
        jpegs, _ = fn.readers.file(files=files)
        images = fn.decoders.image(jpegs, device="cpu")
        images = fn.resize(images, size=[96, 128])
        m = fn.transforms.rotation(angle=25.0, center=[64.0, 48.0])
        m = fn.transforms.scale(m, scale=[1.2, 0.9], center=[64.0, 48.0])
        return fn.warp_affine(images, matrix=m, fill_value=0), m

    (d_images, d_m), (j_images, j_m) = run_both(build)
    assert_same([d_m], [j_m])
    for a, b in zip(d_images, j_images):
        assert a.shape == b.shape
        assert np.abs(a.astype(int) - b.astype(int)).max() <= 1


def ssd_anchors(grid: int = 6) -> np.ndarray:
    """SSD-style default boxes: a grid of centres, 3 sizes x 3 aspect ratios, clipped to [0, 1]."""
    c = (np.arange(grid) + 0.5) / grid
    cx, cy = np.meshgrid(c, c)
    out = []
    for size in (0.1, 0.2, 0.35):
        for ratio in (1.0, 2.0, 0.5):
            w, h = size * np.sqrt(ratio), size / np.sqrt(ratio)
            out.append(np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], -1).reshape(-1, 4))
    return np.clip(np.concatenate(out), 0, 1).astype(np.float32)


def random_ltrb(count: int, min_size: float = 0.02, max_corner: float = 0.8) -> np.ndarray:
    lt = rng.uniform(0, max_corner, (count, 2))
    return np.clip(np.concatenate([lt, lt + rng.uniform(min_size, 0.5, (count, 2))], 1), 0, 1).astype(np.float32)


GT_BOXES = [random_ltrb(k) for k in (5, 0, 12)]
GT_LABELS = [rng.integers(1, 80, len(b)).astype(np.int32) for b in GT_BOXES]


@pytest.mark.parametrize("kwargs", [{}, {"criteria": 0.2}, {"scale": 300.0}, {"offset": True},
                                    {"offset": True, "scale": 300.0, "means": [0.1, 0.2, 0.3, 0.4],
                                     "stds": [0.1, 0.1, 0.2, 0.2]}], ids=str)
def test_box_encoder_equals_dali(kwargs):
    anchors = ssd_anchors().ravel().tolist()
    assert_same(*run_both(lambda fn, t, b, lab: tuple(fn.box_encoder(b, lab, anchors=anchors, **kwargs)),
                          [GT_BOXES, GT_LABELS]), atol=1e-6 if kwargs.get("offset") else 0.0)


def check_crops(anchors, shapes, out_boxes, labels, indices, in_boxes, in_labels, *, scaling, aspect, threshold,
                threshold_type, allow_no_crop):
    """What every random_bbox_crop result must satisfy (DALI's and ours alike); returns the number of
    samples left uncropped."""
    uncropped = 0
    for a, s, b, lab, idx, src, src_lab in zip(anchors, shapes, out_boxes, labels, indices, in_boxes, in_labels):
        assert a.dtype == s.dtype == b.dtype == np.float32 and lab.dtype == idx.dtype == np.int32
        assert (a >= 0).all() and (a + s <= 1 + 1e-6).all()
        if np.array_equal(s, [1, 1]):
            uncropped += 1
            np.testing.assert_array_equal(b, src)
            continue
        assert scaling[0] - 1e-6 <= s.min() and s.max() <= scaling[1] + 1e-6
        assert aspect[0] - 1e-5 <= s[0] / s[1] <= aspect[1] + 1e-5
        window = np.concatenate([a, a + s])[None]
        kept = src[idx]
        centre = (kept[:, :2] + kept[:, 2:]) / 2
        assert len(idx) > 0 and ((centre >= a - 1e-6) & (centre <= a + s + 1e-6)).all()
        assert (iou(window, src, threshold_type) >= threshold - 1e-6).all()
        np.testing.assert_allclose(b, np.clip((kept - np.tile(a, 2)) / np.tile(s, 2), 0, 1), atol=2e-6)
        np.testing.assert_array_equal(lab, src_lab[idx])
    assert allow_no_crop or uncropped == 0
    return uncropped


def iou(a: np.ndarray, b: np.ndarray, kind: str = "iou") -> np.ndarray:
    """IoU of windows ``a`` with boxes ``b`` (or, for "overlap", the share of each box inside)."""
    w = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    h = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    area = lambda x: (x[:, 2] - x[:, 0]) * (x[:, 3] - x[:, 1])  # noqa: E731
    if kind == "overlap":
        return w * h / area(b)[None, :]
    return w * h / (area(a)[:, None] + area(b)[None, :] - w * h)


@pytest.mark.parametrize("threshold,threshold_type,max_boxes,allow_no_crop", [
    (0.3, "iou", 1, True), (0.2, "iou", 1, False), (0.7, "overlap", 4, False)])
def test_random_bbox_crop_obeys_the_same_rules_as_dali(threshold, threshold_type, max_boxes, allow_no_crop):
    """Random windows cannot be compared value by value: both libraries' outputs must pass the
    same checks, and the share of uncropped samples must agree (1 in 2 options is "no crop").
    The thresholds are reachable for every sample: DALI searches forever otherwise."""
    count = 64
    boxes = [random_ltrb(k, min_size=0.3, max_corner=0.5) for k in rng.integers(1, max_boxes + 1, count)]
    labels = [np.arange(len(b), dtype=np.int32) + 1 for b in boxes]
    kwargs = dict(thresholds=[threshold], threshold_type=threshold_type, scaling=[0.3, 1.0], aspect_ratio=[0.5, 2.0],
                  allow_no_crop=allow_no_crop, num_attempts=50, output_bbox_indices=True, bbox_layout="xyXY")
    dali_out, ours = run_both(lambda fn, t, b, lab: tuple(fn.random_bbox_crop(b, lab, **kwargs)), [boxes, labels],
                              batch_size=count)
    uncropped = [check_crops(*out, boxes, labels, scaling=(0.3, 1.0), aspect=(0.5, 2.0), threshold=threshold,
                             threshold_type=threshold_type, allow_no_crop=allow_no_crop) for out in (dali_out, ours)]
    if allow_no_crop:  # binomial(64, 1/2): both well inside [16, 48]
        assert all(16 <= u <= 48 for u in uncropped), uncropped


def test_box_encoder_breaks_ties_like_dali():
    """A box overlapping two anchors equally claims the later one."""
    anchors = [0.0, 0.0, 0.5, 0.5, 0.5, 0.0, 1.0, 0.5, 0.0, 0.5, 0.5, 1.0, 0.5, 0.5, 1.0, 1.0]
    boxes = [np.array([[0.25, 0.0, 0.75, 0.5]], np.float32), np.array([[0.25, 0.25, 0.75, 0.75]], np.float32),
             np.array([[0.0, 0.25, 0.5, 0.75], [0.5, 0.25, 1.0, 0.75]], np.float32)]
    labels = [np.arange(1, len(b) + 1, dtype=np.int32) for b in boxes]
    assert_same(*run_both(lambda fn, t, b, lab: tuple(fn.box_encoder(b, lab, anchors=anchors, criteria=0.9)),
                          [boxes, labels]))



def test_box_encoder_gives_an_anchor_the_last_of_equally_overlapping_boxes_like_dali():
    """Two equal boxes: the later claims their best anchor and also takes the next one (above criteria)."""
    anchors = [0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.5, 0.55, 0.5, 0.5, 1.0, 1.0]
    boxes = [np.array([[0.0, 0.0, 0.5, 0.5], [0.0, 0.0, 0.5, 0.5]], np.float32)]
    labels = [np.array([7, 9], np.int32)]
    dali_out, ours = run_both(lambda fn, t, b, lab: tuple(fn.box_encoder(b, lab, anchors=anchors)), [boxes, labels],
                              batch_size=1)
    assert_same(dali_out, ours)
    np.testing.assert_array_equal(ours[1][0], [9, 9, 0])


ROI_CASES = {  # crop_shape, roi_start, roi_end, in_shape (None: unbounded)
    "contains": ([20, 30], [10, 40], [25, 60], [50, 100]),
    "inside": ([10, 10], [10, 40], [25, 60], [50, 100]),
    "clamped": ([40, 90], [5, 5], [20, 30], [50, 100]),
    "unbounded": ([20, 30], [10, 40], [25, 60], None),
}


@pytest.mark.parametrize("case", sorted(ROI_CASES))
def test_roi_random_crop_draws_from_dalis_range(case):
    """Both libraries' anchors are int64, lie in the same range, and (64 draws) reach both of its ends."""
    crop, start, end, in_shape = ROI_CASES[case]
    extra = {} if in_shape is None else {"in_shape": in_shape}
    dali_out, ours = run_both(lambda fn, t: fn.roi_random_crop(crop_shape=crop, roi_start=start, roi_end=end,
                                                                **extra), batch_size=64)
    c, s0, e = (np.array(v) for v in (crop, start, end))
    lo = np.where(c >= e - s0, e - c, s0)
    hi = np.where(c >= e - s0, s0, e - c)
    if in_shape is not None:
        lo, hi = np.maximum(lo, 0), np.minimum(hi, np.array(in_shape) - c)
    for anchors in (np.stack(dali_out[0]), np.stack(ours[0])):
        assert anchors.dtype == np.int64
        assert (anchors >= lo).all() and (anchors <= hi).all()
        assert (anchors.min(0) == lo).all() and (anchors.max(0) == hi).all()


def test_random_bbox_crop_accepts_boxes_with_reversed_corners():
    """DALI checks only that the corners lie in [0, 1] (its checkpointing test feeds pixel rows as xyXY
    boxes, some with right < left); such boxes go through, unchanged by a whole-image window."""
    boxes = [rng.uniform(0, 1, (12, 4)).astype(np.float32) for _ in range(8)]
    assert any((b[:, 2] < b[:, 0]).any() for b in boxes)
    dali_out, ours = run_both(lambda fn, t, b: tuple(fn.random_bbox_crop(b, bbox_layout="xyXY",
                                                                          input_shape=(2000, 2000))),
                              [boxes], batch_size=8)
    for anchors, shapes, out_boxes in (dali_out, ours):
        for a, s, b_in, b_out in zip(anchors, shapes, boxes, out_boxes):
            assert (a >= 0).all() and (s > 0).all() and (a + s <= 1 + 1e-6).all()
            if (s == 1).all():
                np.testing.assert_array_equal(b_out, b_in)


def test_roi_random_crop_bounds_a_2d_crop_by_an_hwc_inputs_height_and_width():
    """A data input with more dimensions than crop_shape (an HWC image, a 2-D crop): its first ones bound
    the anchors, as in DALI's checkpointing test of the operator."""
    images = [np.zeros((35, 60, 3), np.uint8)] * 64
    dali_out, ours = run_both(lambda fn, t, x: fn.roi_random_crop(x, crop_shape=[30, 10], roi_start=[10, 20],
                                                                   roi_end=[30, 50]), [images], batch_size=64)
    for anchors in (np.stack(dali_out[0]), np.stack(ours[0])):  # rows: [0, 35 - 30], columns: [20, 50 - 10]
        assert anchors.shape == (64, 2)
        assert anchors.min(0).tolist() == [0, 20] and anchors.max(0).tolist() == [5, 40]


def test_random_crop_generator_windows_follow_dalis_rules():
    """int32 [y, x] and [h, w] inside the image, area and aspect ratio within the ranges, in both."""
    shapes = [np.array(s, np.int64) for s in ([375, 500, 3], [500, 333, 3], [240, 320, 1], [100, 100, 3])] * 16
    dali_out, ours = run_both(lambda fn, t, s: tuple(fn.random_crop_generator(s, random_area=[0.1, 0.9])), [shapes],
                              batch_size=len(shapes))
    for anchors, sizes in (dali_out, ours):
        for a, s, image in zip(anchors, sizes, shapes):
            assert a.dtype == s.dtype == np.int32 and a.shape == s.shape == (2,)
            h, w = image[:2]
            assert (a >= 0).all() and a[0] + s[0] <= h and a[1] + s[1] <= w
            assert 0.1 * h * w * 0.95 <= s[0] * s[1] <= 0.9 * h * w * 1.05
            assert 0.75 * 0.95 <= s[1] / s[0] <= 4 / 3 * 1.05


def test_random_crop_generator_gives_empty_images_the_empty_window():
    """A size <= 0 is not an error in DALI (its checkpointing test feeds random.uniform's {-1, 0, 1}):
    anchor and shape [0, 0]; a 1-pixel-wide image still gets a [1, 1] window."""
    shapes = [np.array(s, np.int64) for s in ([5, 0], [5, -3], [0, 0], [-1, 7], [100, 1], [1, 1])]
    dali_out, ours = run_both(lambda fn, t, s: tuple(fn.random_crop_generator(s)), [shapes], batch_size=len(shapes))
    for anchors, sizes in (dali_out, ours):
        assert [s.tolist() for s in sizes] == [[0, 0]] * 4 + [[1, 1]] * 2
        assert [a.tolist() for a in anchors[:4]] == [[0, 0]] * 4 and anchors[5].tolist() == [0, 0]
        assert 0 <= anchors[4][0] <= 99 and anchors[4][1] == 0


POLYGONS = [np.array([[0, 0, 3], [1, 3, 7], [2, 7, 10], [3, 10, 12]], np.int32),
            np.array([[5, 0, 4], [7, 4, 5]], np.int32),
            np.array([[1, 0, 6], [0, 6, 9]], np.int32)]
VERTICES = [np.arange(24, dtype=np.float32).reshape(12, 2), rng.uniform(0, 9, (5, 3)).astype(np.float32),
            rng.uniform(0, 99, (9, 2)).astype(np.float32)]
MASK_IDS = [np.array(ids, np.int32) for ids in ([2, 0], [7], [0, 1])]


@pytest.mark.parametrize("reindex", [False, True])
def test_select_masks_equals_dali(reindex):
    """Masks of one polygon each (DALI keeps only the last polygon of a mask; see select_masks.py)."""
    assert_same(*run_both(lambda fn, t, ids, p, v: tuple(fn.segmentation.select_masks(ids, p, v,
                                                                                         reindex_masks=reindex)),
                          [MASK_IDS, POLYGONS, VERTICES]))


def _mask() -> np.ndarray:
    m = np.zeros((6, 8), np.int32)
    m[1:3, 2:4] = 2
    m[4, 6] = 5
    return m


@pytest.mark.parametrize("kwargs,allowed", [
    ({}, None), ({"foreground": 1}, {2, 5}), ({"foreground": 1, "value": 5}, {5}),
    ({"foreground": 1, "threshold": 3.0}, {5}), ({"foreground": 1, "value": 7}, None)], ids=str)
def test_random_mask_pixel_draws_from_the_same_pixels_as_dali(kwargs, allowed):
    """int64 coordinates of a pixel of the allowed values (any pixel when None) in both libraries;
    over 64 draws every allowed pixel value turns up."""
    mask = _mask()
    dali_out, ours = run_both(lambda fn, t, m: fn.segmentation.random_mask_pixel(m, **kwargs), [[mask] * 64],
                              batch_size=64)
    for (coords,) in (dali_out, ours):
        assert all(c.dtype == np.int64 and c.shape == (2,) for c in coords)
        values = {int(mask[tuple(c)]) for c in coords}
        if allowed is None:  # any pixel: 37 of the 48 are background
            assert 0 in values
        else:
            assert values == allowed
