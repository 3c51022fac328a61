"""Tests of fn.warp_affine and fn.rotate.

Expected values marked "DALI 2.4" were produced by NVIDIA DALI 2.4 (CPU pipelines) and are
hard-coded here; DALI is not needed to run the tests. ``reference_warp`` is an independent float64
bilinear / nearest-neighbour sampler in DALI's coordinates.
"""

from __future__ import annotations

import glob
import os

import cv2
import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.warp import rotated_size, rotation_matrices
from jaxdali.tensors import TensorListGPU

FLOWERS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "flowers")
PHOTO = "roses/319298955_0c72bd36bf.jpg"  # 333 x 500


def run(graph, *batches, layout="HWC", num_threads=2):
    """Runs ``graph(*nodes)`` once on external sources returning ``batches`` (the first gets ``layout``)."""

    @pipeline_def(batch_size=len(batches[0]), num_threads=num_threads, device_id=None, seed=1)
    def pipe():
        nodes = [fn.external_source(source=lambda b=b: b, layout=layout if i == 0 else "")
                 for i, b in enumerate(batches)]
        return graph(*nodes)

    p = pipe()
    p.build()
    try:
        return p.run()
    finally:
        p.close()


def reference_warp(img, matrix, out_hw, fill=None, nearest=False):
    """float64 warp: output pixel (x, y) samples the input at matrix @ (x + .5, y + .5, 1)."""
    img = img.astype(np.float64)
    h, w = img.shape[:2]
    y, x = np.mgrid[0:out_hw[0], 0:out_hw[1]] + 0.5
    m = np.asarray(matrix, np.float64).reshape(2, 3)
    sx = m[0, 0] * x + m[0, 1] * y + m[0, 2] - 0.5
    sy = m[1, 0] * x + m[1, 1] * y + m[1, 2] - 0.5

    def pixel(yy, xx):
        inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        v = img[np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]
        if fill is not None:
            v = np.where(inside[..., None], v, fill)
        return v

    if nearest:
        return pixel(np.floor(sy + 0.5).astype(int), np.floor(sx + 0.5).astype(int))
    x0, y0 = np.floor(sx).astype(int), np.floor(sy).astype(int)
    fx, fy = (sx - x0)[..., None], (sy - y0)[..., None]
    top = pixel(y0, x0) * (1 - fx) + pixel(y0, x0 + 1) * fx
    bottom = pixel(y0 + 1, x0) * (1 - fx) + pixel(y0 + 1, x0 + 1) * fx
    return top * (1 - fy) + bottom * fy


def read_photo():
    path = os.path.join(FLOWERS, PHOTO)
    if not os.path.exists(path):
        pytest.skip(f"shared test photo not found at {os.path.abspath(path)}")
    return cv2.cvtColor(cv2.imread(path), cv2.COLOR_BGR2RGB)


def flower_paths(count):
    paths = sorted(glob.glob(os.path.join(FLOWERS, "*", "*.jpg")))
    if not paths:
        pytest.skip(f"shared test photos not found at {os.path.abspath(FLOWERS)}")
    return paths[::max(1, len(paths) // count)][:count]


def _images():
    return [((np.arange(h * w * 3) * 7) % 251).astype(np.uint8).reshape(h, w, 3)
            for h, w in ((40, 60), (50, 30), (33, 47))]


# -- output size of rotate ---------------------------------------------------------------------------------

ROTATED_SIZES = [  # (H, W, angle, (out_h, out_w)); DALI 2.4
    (31, 40, 45.0, (52, 51)),  # tie at 45: like 45.1
    (31, 40, 135.0, (51, 52)),  # tie at 135: like 135.1
    (31, 40, 225.0, (51, 52)),  # tie at 225: like 224.9
    (31, 40, 315.0, (52, 51)),
    (31, 40, -45.0, (52, 51)),
    (100, 37, 45.0, (97, 98)),
    (100, 37, 135.0, (98, 97)),
    (30, 40, 90.0, (40, 30)),  # exactly swapped (0.01 tolerance)
    (30, 40, 1.0, (32, 42)),  # ceil 31 -> even like 30
    (31, 40, 10.0, (39, 46)),
    (30, 41, 33.3, (48, 51)),
    (5, 200, 10.0, (41, 198)),
    (69, 292, 250.15229059480748, (300, 165)),
    (254, 231, -19.983424625195994, (318, 305)),
    (250, 15, 283.1882706414973, (73, 248)),
    (229, 137, 159.5088232853634, (263, 209)),
    (163, 16, 360.0, (163, 16)),
    (111, 217, 120.0, (245, 205)),
    (254, 284, 270.0, (284, 254)),
    (149, 12, -60.350443996070794, (86, 137)),
    (96, 152, 142.4, (170, 180)),
    (257, 217, 360.0, (257, 217)),
    (256, 259, -76.78539138971553, (311, 310)),
    (207, 213, 17.6, (263, 267)),
    (192, 45, -43.94762636791455, (170, 167)),
    (267, 202, -93.22368001506237, (218, 279)),
    (158, 297, -76.60822580790193, (327, 224)),
    (7, 103, 89.99, (103, 9)),
    (264, 177, 150.0, (318, 287)),
    (281, 3, 115.4, (125, 257)),
    (263, 67, 13.448364136561452, (273, 127)),
    (247, 187, 270.0, (187, 247)),
    (249, 183, 13.9, (287, 239)),
    (170, 235, 71.89573302970814, (277, 236)),
    (282, 300, 90.0, (300, 282)),
    (17, 37, 0.0, (17, 37)),
]


@pytest.mark.parametrize("h, w, angle, expected", ROTATED_SIZES)
def test_rotated_size_matches_dali(h, w, angle, expected):
    oh, ow = rotated_size([h], [w], [angle])
    assert (int(oh[0]), int(ow[0])) == expected


def test_rotate_output_shapes_through_the_pipeline():
    rows = ROTATED_SIZES[:12]
    imgs = [np.zeros((h, w, 1), np.uint8) for h, w, _, _ in rows]
    angles = [np.float32(a) for _, _, a, _ in rows]
    out = run(lambda x, a: fn.rotate(x, angle=a), imgs, angles)[0]
    assert [s.shape[:2] for s in out.samples()] == [r[3] for r in rows]


# -- pixel values --------------------------------------------------------------------------------------------

IMG = np.arange(12, dtype=np.float32).reshape(3, 4, 1)
RAMP = np.tile(np.arange(8, dtype=np.float32)[None, :, None], (6, 1, 1))  # value = x

DALI_SMALL = [  # (operator, input, arguments, float output (row 2 of RAMP)); DALI 2.4
    ('rotate', 'img', dict(angle=90.0),
     [[3.000, 7.000, 11.000],
      [2.000, 6.000, 10.000],
      [1.000, 5.000, 9.000],
      [0.000, 4.000, 8.000]]),
    ('rotate', 'img', dict(angle=90.0, keep_size=True),
     [[2.500, 4.500, 8.500, 10.500],
      [1.500, 3.500, 7.500, 9.500],
      [0.500, 2.500, 6.500, 8.500]]),
    ('rotate', 'img', dict(angle=30.0),
     [[0.335, 1.201, 2.067, 2.933, 3.072, 5.072],
      [0.000, 0.701, 1.567, 3.969, 6.536, 8.536],
      [0.000, 1.201, 4.067, 6.933, 9.799, 11.000],
      [2.464, 4.464, 7.031, 9.433, 10.299, 11.000],
      [5.928, 7.928, 8.067, 8.933, 9.799, 10.665]]),
    ('rotate', 'img', dict(angle=30.0, fill_value=-1.0),
     [[-1.000, -1.000, -0.945, 1.037, -0.182, -1.000],
      [-1.000, -0.347, 1.269, 3.969, 4.282, -1.000],
      [-0.749, 1.201, 4.067, 6.933, 9.799, 2.014],
      [-1.000, 2.830, 7.031, 8.223, 3.339, -1.000],
      [-1.000, 0.794, 3.696, -0.822, -1.000, -1.000]]),
    ('rotate', 'img', dict(angle=-123.0, size=[4, 5], fill_value=-1.0),
     [[-1.000, 2.370, 7.510, 2.426, -0.762],
      [-0.438, 8.446, 6.170, 2.271, -0.410],
      [6.078, 8.729, 4.830, 1.111, -0.908],
      [0.747, 4.639, 3.490, 0.107, -1.000]]),
    ('rotate', 'img', dict(angle=30.0, interp_type=types.INTERP_NN, fill_value=-1.0),
     [[-1.000, -1.000, -1.000, 3.000, -1.000, -1.000],
      [-1.000, -1.000, 2.000, 2.000, 7.000, -1.000],
      [-1.000, 0.000, 5.000, 6.000, 11.000, -1.000],
      [-1.000, 4.000, 9.000, 9.000, -1.000, -1.000],
      [-1.000, -1.000, 8.000, -1.000, -1.000, -1.000]]),
    ('warp_affine', 'ramp', dict(matrix=[2.0, 0, 0, 0, 1, 0]),
     [[0.500, 2.500, 4.500, 6.500, 7.000, 7.000, 7.000, 7.000]]),
    ('warp_affine', 'ramp', dict(matrix=[2.0, 0, 0, 0, 1, 0], fill_value=-1.0),
     [[0.500, 2.500, 4.500, 6.500, -1.000, -1.000, -1.000, -1.000]]),
    ('warp_affine', 'ramp', dict(matrix=[1.0, 0, 0.5, 0, 1, 0], fill_value=-1.0),
     [[0.500, 1.500, 2.500, 3.500, 4.500, 5.500, 6.500, 3.000]]),
    ('warp_affine', 'ramp', dict(matrix=[0.5, 0, 0, 0, 1, 0]),
     [[0.000, 0.250, 0.750, 1.250, 1.750, 2.250, 2.750, 3.250]]),
    ('warp_affine', 'ramp', dict(matrix=[1.0, 0, 0.5, 0, 1, 0], fill_value=-1.0, interp_type=types.INTERP_NN),
     [[1.000, 2.000, 3.000, 4.000, 5.000, 6.000, 7.000, -1.000]]),
    ('warp_affine', 'ramp', dict(matrix=[2.0, 0, 0, 0, 1, 0], inverse_map=False),
     [[0.000, 0.250, 0.750, 1.250, 1.750, 2.250, 2.750, 3.250]]),
    ('warp_affine', 'img', dict(matrix=[0.8, 0.3, 0.4, -0.2, 0.9, 0.7], size=[4, 3], fill_value=-1.0),
     [[2.650, 2.650, 2.650],
      [6.550, 6.550, 6.550],
      [5.533, 8.223, 10.450],
      [-1.000, -1.000, 0.793]]),
]
PIXELS = [(0, 0, 0), (10, 200, 1), (100, 100, 2), (223, 223, 0), (57, 13, 1), (150, 199, 2), (200, 31, 0), (111, 5, 1),
 (300, 400, 2)]
DALI_PHOTO = [  # (operator, arguments, output shape, sum, values at PIXELS); DALI 2.4
    ('rotate', dict(angle=30.0), (539, 600, 3), 111382637, [223, 158, 174, 84, 202, 138, 218, 201, 2]),
    ('rotate', dict(angle=-17.0, keep_size=True, fill_value=0.0), (333, 500, 3), 36126320,
     [0, 178, 62, 94, 0, 16, 225, 93, 69]),
    ('rotate', dict(angle=45.0, interp_type=types.INTERP_NN), (590, 591, 3), 120548704,
     [211, 144, 144, 65, 178, 128, 221, 191, 1]),
    ('warp_affine', dict(matrix=[0.9, 0.2, 10.3, -0.15, 1.1, 5.7]), (333, 500, 3), 45806481,
     [218, 189, 12, 99, 136, 6, 207, 147, 66]),
    ('warp_affine',
     dict(matrix=[0.9, 0.2, 10.3, -0.15, 1.1, 5.7], fill_value=50.0, inverse_map=False, size=[300, 420]),
     (300, 420, 3), 28366110, [50, 166, 148, 10, 50, 3, 50, 50, 62]),
]


@pytest.mark.parametrize("op, name, kw, expected", DALI_SMALL, ids=[f"{r[0]}-{r[2]}" for r in DALI_SMALL])
def test_small_images_match_dali(op, name, kw, expected):
    src = IMG if name == "img" else RAMP
    out = run(lambda x: getattr(fn, op)(x, dtype=types.FLOAT, **kw), [src])[0].at(0)[..., 0]
    if name == "ramp":
        out = out[2:3]
    np.testing.assert_allclose(out, expected, atol=0.002)  # measured: at most 5e-4


def test_rotate_by_right_angles_is_exact():
    img = _images()[0]
    for angle, expected in ((90, np.rot90(img)), (180, img[::-1, ::-1]), (270, np.rot90(img, 3)),
     (-90, np.rot90(img, 3))):
        out = run(lambda x: fn.rotate(x, angle=angle), [img])[0].at(0)
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("op, kw, shape, total, values", DALI_PHOTO, ids=[f"{r[0]}-{r[1]}" for r in DALI_PHOTO])
def test_photo_matches_dali(op, kw, shape, total, values):
    out = np.asarray(run(lambda x: getattr(fn, op)(x, **kw), [read_photo()])[0].at(0))
    assert out.shape == shape
    # Measured on flower photos: mean |ours - DALI| below 0.01 for LINEAR (never above 1), and
    # 0.009 for NN at 45 degrees (0.03% of the pixels sit on exact ties and go the other way).
    assert abs(int(out.astype(np.int64).sum()) - total) <= 0.02 * out.size
    got = [int(out[min(y, shape[0] - 1), min(x, shape[1] - 1), c]) for y, x, c in PIXELS]
    assert np.abs(np.array(got) - values).max() <= 1, (got, values)


@pytest.mark.parametrize("fill", [None, 30.0])
@pytest.mark.parametrize("nearest", [False, True])
def test_warp_matches_reference_on_photos(fill, nearest):
    imgs = [cv2.cvtColor(cv2.imread(p), cv2.COLOR_BGR2RGB) for p in flower_paths(3)]
    m = [0.8537, -0.3011, 40.23, 0.2519, 1.0473, -20.71]  # no exact ties (float32 and float64 agree)
    interp = types.INTERP_NN if nearest else types.INTERP_LINEAR
    out = run(lambda x: fn.warp_affine(x, matrix=m, size=[200, 260], fill_value=fill, interp_type=interp,
                                       dtype=types.FLOAT), imgs)[0]
    for img, got in zip(imgs, out.samples()):
        expected = reference_warp(img, m, (200, 260), fill, nearest)
        err = np.abs(got - expected)
        if nearest:  # identical but for exact ties
            assert (err > 0).mean() < 1e-3
        else:  # measured: max 0.003, mean 1e-4
            assert err.max() < 0.01 and err.mean() < 1e-3, (err.max(), err.mean())


def test_rotate_matches_its_matrix():
    img = _images()[1]
    out = run(lambda x: fn.rotate(x, angle=33.0, fill_value=0, dtype=types.FLOAT), [img])[0].at(0)
    m = rotation_matrices([img.shape[:2]], [out.shape[:2]], [33.0])[0]
    np.testing.assert_allclose(out, reference_warp(img, m, out.shape[:2], fill=0.0), atol=0.01)


# -- arguments -----------------------------------------------------------------------------------------------


def test_warp_inverse_map_false_uses_the_inverse():
    img = _images()[0]
    forward = [[1.2, 0.1, -3.0], [-0.2, 0.9, 4.0]]
    inverse = np.linalg.inv(np.vstack([forward, [0, 0, 1]]))[:2]
    a = run(lambda x: fn.warp_affine(x, matrix=np.ravel(forward).tolist(), inverse_map=False), [img])[0].at(0)
    b = run(lambda x: fn.warp_affine(x, matrix=inverse.ravel().tolist()), [img])[0].at(0)
    np.testing.assert_array_equal(a, b)


def test_warp_per_sample_matrix_input_and_argument_agree():
    imgs = _images()
    mats = [np.array([[1, 0.1 * k, 2], [0, 1, -k]], np.float32) for k in range(3)]
    as_input, as_arg, sized = run(lambda x, m: (fn.warp_affine(x, m), fn.warp_affine(x, matrix=m),
                                                fn.warp_affine(x, matrix=m, size=[20, 30])), imgs, mats)
    for k, img in enumerate(imgs):
        single = run(lambda x: fn.warp_affine(x, matrix=mats[k].ravel().tolist()), [img])[0].at(0)
        np.testing.assert_array_equal(as_input.at(k), single)
        np.testing.assert_array_equal(as_arg.at(k), single)
    assert sized.as_array().shape == (3, 20, 30, 3)


def test_rotate_per_sample_angle_size_and_keep_size():
    imgs = _images()
    angles = [np.float32(10), np.float32(-90), np.float32(200)]
    out, kept, sized = run(lambda x, a: (fn.rotate(x, angle=a), fn.rotate(x, angle=a, keep_size=True),
                                         fn.rotate(x, angle=a, size=[21.6, 30.2], keep_size=True)), imgs, angles)
    for k, img in enumerate(imgs):
        oh, ow = rotated_size([img.shape[0]], [img.shape[1]], [angles[k]])
        assert out.at(k).shape == (oh[0], ow[0], 3)
        assert kept.at(k).shape == img.shape
        np.testing.assert_array_equal(out.at(k), run(lambda x: fn.rotate(x, angle=float(angles[k])), [img])[0].at(0))
    assert sized.as_array().shape == (3, 22, 30, 3)  # size wins over keep_size, rounded


def test_warp_layouts_and_sequences():
    img = _images()[0]
    m = [0.9, 0.1, 3.0, -0.1, 1.1, 1.0]
    hwc = run(lambda x: fn.warp_affine(x, matrix=m), [img])[0].at(0)
    seq = run(lambda x: fn.warp_affine(x, matrix=m), [np.stack([img, img[::-1].copy()])], layout="FHWC")[0].at(0)
    np.testing.assert_array_equal(seq[0], hwc)
    np.testing.assert_array_equal(seq[1], run(lambda x: fn.warp_affine(x, matrix=m), [img[::-1].copy()])[0].at(0))
    chw = run(lambda x: fn.warp_affine(x, matrix=m), [img.transpose(2, 0, 1).copy()], layout="CHW")[0].at(0)
    np.testing.assert_array_equal(chw, hwc.transpose(2, 0, 1))
    five = np.concatenate([img, img[:, :, :2]], axis=2)  # more than OpenCV's 4 channels at once
    out5 = run(lambda x: fn.warp_affine(x, matrix=m), [five])[0].at(0)
    np.testing.assert_array_equal(out5[:, :, :3], hwc)


@pytest.mark.parametrize("dtype", [np.uint16, np.int16, np.float32])
def test_warp_input_types_keep_their_type(dtype):
    img = (_images()[0].astype(np.float32) * 100 - 3000).astype(dtype)
    out = run(lambda x: fn.rotate(x, angle=20, fill_value=0), [img])[0].at(0)
    assert out.dtype == dtype
    ref = run(lambda x: fn.rotate(x, angle=20, fill_value=0, dtype=types.FLOAT), [img])[0].at(0)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        ref = np.clip(np.rint(ref), info.min, info.max)
    assert np.abs(out.astype(np.float64) - ref).max() <= 1


def test_warp_float_to_uint8_rounds_and_saturates():
    img = np.array([[[3.6, -7.0, 300.0]]], np.float32).repeat(4, 0).repeat(4, 1)
    out = run(lambda x: fn.warp_affine(x, matrix=[1, 0, 0, 0, 1, 0], dtype=types.UINT8), [img])[0].at(0)
    assert out[0, 0].tolist() == [4, 0, 255]  # DALI 2.4 gives 4 for 3.6


def test_warp_thread_counts_batch_of_one_and_gpu_placement():
    imgs = _images()
    graph = lambda x: fn.rotate(x, angle=17.5, fill_value=3)
    one = run(graph, imgs, num_threads=1)[0]
    two = run(graph, imgs, num_threads=2)[0]
    for a, b in zip(one.samples(), two.samples()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(run(graph, imgs[1:2])[0].at(0), one.at(1))
    gpu = run(lambda x: fn.rotate(x.gpu(), angle=17.5, fill_value=3, keep_size=True), imgs[:1])[0]
    cpu = run(lambda x: fn.rotate(x, angle=17.5, fill_value=3, keep_size=True), imgs[:1])[0]
    assert isinstance(gpu, TensorListGPU)
    np.testing.assert_array_equal(np.asarray(gpu.as_cpu().at(0)), cpu.at(0))


# -- errors --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op, kw, message", [
    ("warp_affine", {}, "argument 'matrix' must be provided"),
    ("warp_affine", {"matrix": [1, 0, 0, 1]}, "argument 'matrix' must have 6 elements"),
    ("warp_affine", {"matrix": [1, 0, 0, 0, 1, 0], "interp_type": types.INTERP_CUBIC},
     "argument 'interp_type' must be INTERP_NN or INTERP_LINEAR"),
    ("rotate", {"angle": 10, "axis": [0, 0, 1]}, "argument 'axis' is not supported: 3-D rotation"),
    ("rotate", {}, "argument 'angle' is required"),
    ("rotate", {"angle": 10, "dtype": types.FLOAT, "output_dtype": types.FLOAT}, "not both"),
])
def test_build_errors_name_the_operator(op, kw, message):
    with pytest.raises(ValueError, match=f"fn.{op}: ") as e:
        run(lambda x: getattr(fn, op)(x, **kw), _images())
    assert message in str(e.value)


@pytest.mark.parametrize("op, kw, layout, data, error, message", [
    ("rotate", {"angle": 10, "size": [0, 5]}, "HWC", None, ValueError, "output size must be positive"),
    ("warp_affine", {"matrix": [1, 0, 0, 0, 1, 0]}, "DHWC", np.zeros((2, 4, 4, 1), np.uint8), ValueError,
     "input layout 'DHWC' (for 4-D samples) is not supported"),
    ("rotate", {"angle": 10}, "HWC", np.zeros((4, 4, 1), np.int32), TypeError, "input type int32 is not supported"),
    ("rotate", {"angle": 10, "dtype": types.INT16}, "HWC", None, TypeError,
     "unsupported input/output types uint8 -> int16"),
])
def test_run_errors_name_the_operator(op, kw, layout, data, error, message):
    batch = [data] if data is not None else _images()
    with pytest.raises(error, match=f"fn.{op}: ") as e:
        run(lambda x: getattr(fn, op)(x, **kw), batch, layout=layout)
    assert message in str(e.value)
