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


def random_ltrb(count: int) -> np.ndarray:
    lt = rng.uniform(0, 0.8, (count, 2))
    return np.clip(np.concatenate([lt, lt + rng.uniform(0.02, 0.5, (count, 2))], 1), 0, 1).astype(np.float32)


GT_BOXES = [random_ltrb(k) for k in (5, 0, 12)]
GT_LABELS = [rng.integers(1, 80, len(b)).astype(np.int32) for b in GT_BOXES]


@pytest.mark.parametrize("kwargs", [{}, {"criteria": 0.2}, {"scale": 300.0}, {"offset": True},
                                    {"offset": True, "scale": 300.0, "means": [0.1, 0.2, 0.3, 0.4],
                                     "stds": [0.1, 0.1, 0.2, 0.2]}], ids=str)
def test_box_encoder_equals_dali(kwargs):
    anchors = ssd_anchors().ravel().tolist()
    assert_same(*run_both(lambda fn, t, b, lab: tuple(fn.box_encoder(b, lab, anchors=anchors, **kwargs)),
                          [GT_BOXES, GT_LABELS]), atol=1e-6 if kwargs.get("offset") else 0.0)
