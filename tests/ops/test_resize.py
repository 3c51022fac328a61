"""Tests of fn.resize and fn.random_resized_crop.

Expected values marked "DALI 2.4" were produced by NVIDIA DALI 2.4 (CPU pipelines) and are
hard-coded here; DALI is not needed to run the tests. Pixel comparisons use an independent dense
float64 reference (``reference_resize``) of the same filters.
"""

from __future__ import annotations

import glob
import os

import cv2
import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops import rng
from jaxdali.ops.crop_window import crop_window_draws, random_crop_windows
from jaxdali.ops.resample_plan import resize_geometry
from jaxdali.tensors import TensorListGPU

FLOWERS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "flowers")


# -- helpers ---------------------------------------------------------------------------------------------


def run(graph, *batches, layout="HWC", num_threads=2, seed=1, iterations=1):
    """Runs ``graph(*nodes)`` on external sources that return ``batches`` (the first one gets
    ``layout``); returns the outputs of the last iteration."""

    @pipeline_def(batch_size=len(batches[0]), num_threads=num_threads, device_id=None, seed=seed)
    def pipe():
        nodes = [fn.external_source(source=lambda b=b: b, layout=layout if i == 0 else "")
                 for i, b in enumerate(batches)]
        return graph(*nodes)

    p = pipe()
    p.build()
    try:
        for _ in range(iterations):
            out = p.run()
        return out
    finally:
        p.close()


def _triangle(x):
    return np.maximum(0.0, 1.0 - np.abs(x))


def _cubic(x):  # Keys, a = -0.5
    x = np.abs(x)
    return np.where(x < 1, 1.5 * x**3 - 2.5 * x**2 + 1, np.where(x < 2, -0.5 * x**3 + 2.5 * x**2 - 4 * x + 2, 0.0))


def _lanczos3(x):
    return np.where(np.abs(x) < 3, np.sinc(x) * np.sinc(x / 3), 0.0)


def _gaussian(x):
    return np.where(np.abs(x) < 1, np.exp(-4 * x * x), 0.0)


KERNELS = {types.INTERP_LINEAR: (_triangle, 1), types.INTERP_TRIANGULAR: (_triangle, 1),
           types.INTERP_CUBIC: (_cubic, 2), types.INTERP_LANCZOS3: (_lanczos3, 3),
           types.INTERP_GAUSSIAN: (_gaussian, 1)}


def reference_matrix(n, m, lo, hi, interp, antialias):
    """Dense (m, n) resampling matrix: output pixel i samples lo + (i + 0.5) * (hi - lo) / m."""
    step = (hi - lo) / m
    centres = lo + (np.arange(m) + 0.5) * step
    if interp == types.INTERP_NN:
        w = np.zeros((m, n))
        w[np.arange(m), np.clip(np.floor(centres).astype(int), 0, n - 1)] = 1
        return w
    kernel, radius = KERNELS[interp]
    k = max(1.0, abs(step)) if (antialias or interp == types.INTERP_TRIANGULAR) else 1.0
    reach = int(np.ceil(radius * k)) + 2
    taps = np.arange(int(np.floor(min(lo, hi))) - reach, int(np.ceil(max(lo, hi))) + reach)
    weights = kernel((taps[None, :] + 0.5 - centres[:, None]) / k)
    w = np.zeros((m, n))
    for j, col in zip(np.clip(taps, 0, n - 1), weights.T):
        w[:, j] += col
    return w / w.sum(axis=1, keepdims=True)


def reference_resize(img, out_hw, window=None, interp=types.INTERP_LINEAR, antialias=True):
    """float64 (H', W', C) resize of an (H, W, C) image over ``window`` = (y_lo, y_hi, x_lo, x_hi)."""
    h, w = img.shape[:2]
    y0, y1, x0, x1 = window if window is not None else (0, h, 0, w)
    wy = reference_matrix(h, out_hw[0], y0, y1, interp, antialias)
    wx = reference_matrix(w, out_hw[1], x0, x1, interp, antialias)
    return np.einsum("ij,jkc,lk->ilc", wy, img.astype(np.float64), wx, optimize=True)


def to_uint8(x):
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def flower_paths(count):
    paths = sorted(glob.glob(os.path.join(FLOWERS, "*", "*.jpg")))
    if not paths:
        pytest.skip(f"shared test photos not found at {os.path.abspath(FLOWERS)}")
    return paths[::max(1, len(paths) // count)][:count]


def read_rgb(path):
    return cv2.cvtColor(cv2.imread(path), cv2.COLOR_BGR2RGB)


def geometry_args(hw, kw):
    """The arguments of ``resize_geometry`` for an fn.resize argument dict on an (H, W) image."""
    mode = kw.get("mode", "default")
    if "resize_x" in kw or "resize_y" in kw:
        req = [kw.get("resize_y", 0), kw.get("resize_x", 0)]
    elif "size" in kw:
        req = kw["size"] if isinstance(kw["size"], list) else [kw["size"]] * 2
    elif "resize_shorter" in kw:
        req, mode = [kw["resize_shorter"]] * 2, "not_smaller"
    else:
        req, mode = [kw["resize_longer"]] * 2, "not_larger"
    start = end = None
    if "roi_start" in kw:
        scale = np.array(hw, float) if kw.get("roi_relative") else 1.0
        start, end = [np.array(kw["roi_start"]) * scale], [np.array(kw["roi_end"]) * scale]
    return ([hw], [req], mode, kw.get("max_size"), start, end, kw.get("subpixel_scale", True))


# -- size arithmetic -----------------------------------------------------------------------------------------

GEOMETRY = [
    # ((H, W), arguments, (out_h, out_w), (y_lo, y_hi, x_lo, x_hi))  -- DALI 2.4 values
    # both extents given: exactly that size
    ((375, 500), {'resize_x': 224, 'resize_y': 224}, (224, 224), (-0.0, 375.0, 0.0, 500.0)),
    # ResNet val: shorter side; subpixel moves the x window by 0.244
    ((375, 500), {'resize_shorter': 256}, (256, 341), (0.0, 375.0, 0.244, 499.756)),
    # the same through size + mode
    ((375, 500), {'size': 256, 'mode': 'not_smaller'}, (256, 341), (0.0, 375.0, 0.244, 499.756)),
    # one extent: the other keeps the aspect ratio
    ((375, 500), {'resize_x': 100}, (75, 100), (0.0, 375.0, 0.0, 500.0)),
    ((375, 500), {'size': [100, 0]}, (100, 133), (0.0, 375.0, 0.625, 499.375)),  # 0 = unspecified
    ((375, 500), {'resize_longer': 300}, (225, 300), (0.0, 375.0, -0.0, 500.0)),  # not_larger
    ((375, 500), {'resize_x': -100, 'resize_y': 50}, (50, 100), (0.0, 375.0, 500.0, 0.0)),  # negative size flips x
    # fractional size: subpixel window
    ((375, 500), {'resize_x': 100.4, 'resize_y': 50}, (50, 100), (0.0, 375.0, 0.996, 499.004)),
    # no subpixel: whole window
    ((375, 500), {'resize_x': 100.4, 'resize_y': 50, 'subpixel_scale': False}, (50, 100), (0.0, 375.0, 0.0, 500.0)),
    # rounding half away from zero
    ((375, 500), {'resize_x': 100.5, 'resize_y': 50.5}, (51, 101), (-1.856, 376.856, -1.244, 501.244)),
    # default mode: max_size clamps each extent
    ((375, 500), {'resize_x': 200, 'max_size': 150}, (150, 150), (0.0, 375.0, 0.0, 500.0)),
    # max_size per axis, layout order (H, W)
    ((375, 500), {'resize_x': 200, 'max_size': [100, 150]}, (100, 150), (0.0, 375.0, 0.0, 500.0)),
    # not_smaller reduced so max_size holds
    ((375, 500), {'resize_shorter': 300, 'max_size': 350}, (263, 350), (-0.357, 375.357, -0.0, 500.0)),
    # not_larger: max_size joins the minimum
    ((375, 500), {'resize_longer': 300, 'max_size': 200}, (150, 200), (0.0, 375.0, 0.0, 500.0)),
    ((375, 500), {'size': [300, 300], 'mode': 'not_larger'}, (225, 300), (0.0, 375.0, -0.0, 500.0)),  # smallest scale
    ((375, 500), {'size': [300, 300], 'mode': 'not_smaller'}, (300, 400), (0.0, 375.0, 0.0, 500.0)),  # largest scale
    # only given extents count
    ((375, 500), {'size': [300, 0], 'mode': 'not_larger'}, (300, 400), (0.0, 375.0, 0.0, 500.0)),
    # stretch: missing extent unchanged
    ((375, 500), {'size': [300, 0], 'mode': 'stretch'}, (300, 500), (0.0, 375.0, 0.0, 500.0)),
    # stretch: max_size clamps too
    ((375, 500), {'size': [300, 0], 'mode': 'stretch', 'max_size': 200}, (200, 200), (0.0, 375.0, 0.0, 500.0)),
    ((375, 500), {'size': [0, 0]}, (375, 500), (0.0, 375.0, 0.0, 500.0)),  # nothing given: unchanged
    # nothing given: max_size ignored
    ((375, 500), {'size': [0, 0], 'mode': 'not_larger', 'max_size': 100}, (375, 500), (0.0, 375.0, 0.0, 500.0)),
    ((375, 500), {'resize_shorter': 0.4}, (1, 1), (None, None, None, None)),  # tiny: at least 1
    # scale relative to the window
    ((375, 500), {'resize_x': 300, 'roi_start': [0, 0], 'roi_end': [100, 100]}, (300, 300), (0.0, 100.0, 0.0, 100.0)),
    # start > end flips y
    ((375, 500), {'roi_start': [110, 20], 'roi_end': [10, 220], 'resize_x': 100, 'resize_y': 100}, (100, 100),
     (110.0, 10.0, 20.0, 220.0)),
    # negative size flips the window
    ((375, 500), {'roi_start': [10, 20], 'roi_end': [110, 220], 'resize_x': -100, 'resize_y': 100}, (100, 100),
     (10.0, 110.0, 220.0, 20.0)),
    # relative window
    ((375, 500),
     {'roi_start': [0.1, 0.2], 'roi_end': [0.9, 0.5], 'roi_relative': True, 'resize_x': 100, 'resize_y': 100},
     (100, 100), (37.5, 337.5, 100.0, 250.0)),
    # subpixel on a relative window
    ((375, 500), {'resize_shorter': 100, 'roi_start': [0, 0], 'roi_end': [0.5, 0.2], 'roi_relative': True}, (188, 100),
     (-0.25, 187.75, 0.0, 100.0)),
    # fractional window and size
    ((375, 500), {'resize_x': 100.4, 'resize_y': 50, 'roi_start': [10.5, 20.25], 'roi_end': [110, 220]}, (50, 100),
     (10.5, 110.0, 20.648, 219.602)),
    ((452, 217), {'size': [-199.51, 193]}, (200, 193), (452.555, -0.555, 0.0, 217.0)),
    ((381, 434), {'resize_shorter': 168}, (168, 191), (0.0, 381.0, 0.42, 433.58)),
    ((190, 144), {'resize_longer': 42, 'max_size': 122, 'roi_start': [96.51, 134.33], 'roi_end': [20.72, 79.38]},
     (42, 30), (96.51, 20.72, 133.923, 79.787)),
    ((220, 448), {'resize_longer': 277}, (136, 277), (0.022, 219.978, 0.0, 448.0)),
    ((316, 160), {'size': [398.54, -54.99], 'max_size': [240, 137], 'subpixel_scale': False}, (240, 55),
     (-0.0, 316.0, 160.0, -0.0)),
    ((420, 94), {'resize_longer': 303, 'max_size': 375}, (303, 68), (0.0, 420.0, -0.129, 94.129)),
    ((79, 38), {'resize_shorter': 290.06, 'max_size': [397, 61]}, (127, 61), (-0.057, 79.057, 0.0, 38.0)),
    ((55, 133), {'resize_x': 80.32, 'resize_y': -282.74, 'mode': 'not_larger'}, (33, 80),
     (54.822, 0.178, 0.265, 132.735)),
    ((325, 491),
     {'size': [193.93, 367.83], 'mode': 'default', 'roi_start': [0.544, 0.135], 'roi_end': [0.762, 0.482],
      'roi_relative': True},
     (194, 368), (176.787, 247.663, 66.246, 236.701)),
    ((353, 61), {'resize_x': 181, 'resize_y': 287.04, 'mode': 'not_smaller', 'subpixel_scale': False}, (1047, 181),
     (0.0, 353.0, 0.0, 61.0)),
    ((259, 45),
     {'size': [334, 380.32], 'max_size': 395, 'roi_start': [0.199, 0.302], 'roi_end': [0.689, 0.182],
      'roi_relative': True},
     (334, 380), (51.541, 178.451, 13.588, 8.192)),
    ((492, 223),
     {'resize_longer': 150, 'roi_start': [0.651, 0.347], 'roi_end': [0.872, 0.278], 'roi_relative': True,
      'subpixel_scale': False},
     (150, 21), (320.292, 429.024, 77.381, 61.994)),
    ((273, 384),
     {'resize_longer': 337, 'max_size': 350, 'roi_start': [215.57, 275.9], 'roi_end': [92.34, 238.29],
      'subpixel_scale': False},
     (337, 103), (215.57, 92.34, 275.9, 238.29)),
    ((103, 96),
     {'resize_shorter': 212, 'max_size': [172, 74], 'roi_start': [0.071, 0.403], 'roi_end': [0.329, 0.415],
      'roi_relative': True, 'subpixel_scale': False},
     (172, 7), (7.313, 33.887, 38.688, 39.84)),
    ((347, 64), {'resize_x': 123, 'mode': 'not_larger'}, (667, 123), (-0.029, 347.028, 0.0, 64.0)),
    ((367, 131), {'size': 0, 'mode': 'stretch', 'max_size': 253}, (367, 131), (0.0, 367.0, 0.0, 131.0)),
    ((339, 94), {'resize_x': 195, 'mode': 'not_smaller', 'max_size': [376, 398]}, (376, 104),
     (0.0, 339.0, 0.117, 93.883)),
    ((489, 474),
     {'size': [265, 13.78], 'mode': 'not_larger', 'roi_start': [143.95, 334.82], 'roi_end': [230.04, 379.17]},
     (27, 14), (143.546, 230.444, 334.466, 379.524)),
    ((488, 40), {'resize_x': -15.96, 'mode': 'stretch'}, (488, 16), (0.0, 488.0, 40.05, -0.05)),
    ((210, 278), {'size': 267, 'mode': 'not_smaller'}, (267, 353), (-0.0, 210.0, 0.18, 277.82)),
    ((190, 53), {'size': [311.27, 0], 'mode': 'not_smaller', 'max_size': 358}, (311, 87),
     (0.082, 189.918, -0.052, 53.053)),
    ((38, 333), {'size': [34, 0], 'roi_start': [26.63, 204.57], 'roi_end': [35.49, 216.61]}, (34, 46),
     (26.63, 35.49, 204.596, 216.583)),
    ((424, 343), {'resize_x': 30}, (37, 30), (0.483, 423.517, -0.0, 343.0)),
    ((67, 417),
     {'resize_longer': 214.25, 'roi_start': [0.422, 0.084], 'roi_end': [0.105, 0.063], 'roi_relative': True},
     (214, 88), (28.262, 7.047, 35.011, 26.288)),
    ((99, 395), {'resize_y': 21.75, 'max_size': 86, 'subpixel_scale': False}, (22, 86), (0.0, 99.0, 0.0, 395.0)),
    ((445, 138),
     {'size': [-83, 384], 'roi_start': [202.05, 65.78], 'roi_end': [314.83, 35.63], 'subpixel_scale': False},
     (83, 384), (314.83, 202.05, 65.78, 35.63)),
    ((126, 205),
     {'size': 0, 'roi_start': [0.291, 0.42], 'roi_end': [0.046, 0.132], 'roi_relative': True, 'subpixel_scale': False},
     (31, 59), (5.796, 36.666, 27.06, 86.1)),
    ((59, 379), {'resize_x': 291, 'mode': 'not_larger', 'roi_start': [21.79, 359.65], 'roi_end': [3.41, 154.87]},
     (26, 291), (21.748, 3.452, 359.65, 154.87)),
    ((404, 261), {'resize_x': 222.06, 'resize_y': 21, 'mode': 'not_smaller'}, (344, 222),
     (-0.162, 404.162, 0.035, 260.965)),
    ((72, 402), {'size': [396, 37.48], 'mode': 'stretch', 'subpixel_scale': False}, (396, 37),
     (0.0, 72.0, -0.0, 402.0)),
    ((460, 168), {'size': 303, 'mode': 'not_smaller', 'subpixel_scale': False}, (830, 303), (-0.0, 460.0, 0.0, 168.0)),
    ((376, 81), {'size': [64.42, 252], 'mode': 'default', 'roi_start': [333.64, 17.47], 'roi_end': [133.63, 31.67]},
     (64, 252), (332.988, 134.282, 17.47, 31.67)),
    ((453, 289), {'resize_x': 380.23, 'resize_y': -31}, (31, 380), (453.0, -0.0, 0.087, 288.913)),
    ((371, 242), {'resize_y': 85, 'mode': 'stretch'}, (85, 242), (0.0, 371.0, 0.0, 242.0)),
    ((230, 254),
     {'resize_x': 383.02, 'resize_y': 109.35, 'mode': 'not_larger', 'max_size': 76, 'subpixel_scale': False}, (69, 76),
     (-0.0, 230.0, 0.0, 254.0)),
    ((52, 422),
     {'size': [321, 183], 'mode': 'not_larger', 'max_size': [72, 147], 'roi_start': [0.346, 0.837],
      'roi_end': [0.251, 0.729], 'roi_relative': True},
     (16, 147), (18.002, 13.042, 353.214, 307.638)),
    ((63, 61), {'resize_x': 88, 'mode': 'default'}, (91, 88), (-0.04, 63.04, 0.0, 61.0)),
    ((159, 138), {'resize_x': 48.57, 'mode': 'not_larger', 'subpixel_scale': False}, (56, 49),
     (-0.0, 159.0, -0.0, 138.0)),
    ((294, 283), {'size': [160.03, -387], 'max_size': [83, 315]}, (83, 315), (-0.0, 294.0, 283.0, -0.0)),
    ((341, 265),
     {'size': [325.8, 335], 'mode': 'default', 'max_size': 155, 'roi_start': [79.69, 101.92],
      'roi_end': [207.5, 35.12]},
     (155, 155), (79.69, 207.5, 101.92, 35.12)),
]


@pytest.mark.parametrize("hw, kw, out_hw, window", GEOMETRY, ids=[str(r[1]) for r in GEOMETRY])
def test_resize_geometry_matches_dali(hw, kw, out_hw, window):
    out, lo, hi = resize_geometry(*geometry_args(hw, kw))
    assert tuple(out[0]) == out_hw
    got = (lo[0, 0], hi[0, 0], lo[0, 1], hi[0, 1])
    for g, e in zip(got, window):
        if e is not None:  # DALI's window is measured from a ramp image: +-0.002
            assert g == pytest.approx(e, abs=2e-3)


VOLUME_SHAPES = [  # (D, H, W) = (10, 30, 40); DALI 2.4
    ({"size": [0, 15, 10]}, (4, 15, 10)),  # depth: geometric mean of 0.5 and 0.25
    ({"resize_x": 20}, (5, 15, 20)),
    ({"resize_x": 20, "resize_z": 20}, (20, 30, 20)),  # scales 2 and 0.5: height keeps 1
    ({"size": [5, 0, 0], "mode": "stretch"}, (5, 30, 40)),
    ({"resize_shorter": 20}, (20, 60, 80)),
    ({"resize_longer": 20}, (5, 15, 20)),
    ({"size": [20, 20, 20], "mode": "not_larger"}, (5, 15, 20)),
    ({"size": [20, 20, 20], "mode": "not_smaller", "max_size": 50}, (13, 38, 50)),
    ({"size": 7.5}, (8, 8, 8)),
    ({"resize_x": -20, "resize_y": 7}, (3, 7, 20)),
]


@pytest.mark.parametrize("kw, expected", VOLUME_SHAPES)
def test_resize_volume_shapes_match_dali(kw, expected):
    out = run(lambda x: fn.resize(x, **kw), [np.zeros((10, 30, 40, 1), np.uint8)], layout="DHWC")[0]
    assert out.at(0).shape == expected + (1,)


def test_resize_geometry_keeps_empty_axes_empty():
    # DALI 2.4: (0, 40) -> (0, 20) and (30, 0) with only resize_x -> (30, 0)
    out, _, _ = resize_geometry([[0, 40], [30, 0]], [[10, 20], [0, 20]])
    assert out.tolist() == [[0, 20], [30, 0]]


def probe_window(out):
    """(y_lo, y_hi, x_lo, x_hi) read back from the resize of a coordinate ramp (channels x, y)."""
    res = []
    for ch, line in ((1, out[:, out.shape[1] // 2, 1]), (0, out[out.shape[0] // 2, :, 0])):
        inner = np.nonzero((line > 0.001) & (line < [500, 375][ch] - 1.001))[0]
        a, b = inner[0], inner[-1]
        s = (float(line[b]) - float(line[a])) / (b - a)
        lo = float(line[a]) + 0.5 - (a + 0.5) * s
        res += [lo, lo + len(line) * s]
    return res


@pytest.mark.parametrize("hw, kw, out_hw, window", GEOMETRY[:28], ids=[str(r[1]) for r in GEOMETRY[:28]])
def test_resize_arguments_reach_the_geometry(hw, kw, out_hw, window):
    """The fn.resize arguments give DALI's output size and sampling window (read from a ramp)."""
    y, x = np.mgrid[0:hw[0], 0:hw[1]].astype(np.float32)
    ramp = np.stack([x, y], axis=-1)
    out = np.asarray(run(lambda n: fn.resize(n, antialias=False, dtype=types.FLOAT, **kw), [ramp])[0].at(0))
    assert out.shape[:2] == out_hw
    if min(out_hw) >= 3:
        for g, e in zip(probe_window(out), window):
            assert g == pytest.approx(e, abs=5e-3)


# -- pixels -------------------------------------------------------------------------------------------------

IMG = ((np.arange(6 * 8) * 37) % 256).astype(np.uint8).reshape(6, 8, 1)

DALI_SMALL = [  # float output of a 6x8 image; DALI 2.4
    ('linear_aa_down', dict(resize_x=5, resize_y=4),
     [[26.65, 84.59, 142.83, 178.95, 64.45],
      [84.43, 142.37, 180.46, 92.40, 60.79],
      [142.21, 184.35, 104.31, 65.90, 118.57],
      [199.99, 115.70, 63.72, 118.41, 176.35]]),
    ('linear_noaa_down', dict(resize_x=5, resize_y=4, antialias=False),
     [[21.10, 80.30, 139.50, 192.30, 59.50],
      [81.10, 140.30, 199.50, 60.30, 61.90],
      [141.10, 200.30, 99.50, 62.70, 121.90],
      [201.10, 87.50, 63.50, 122.70, 181.90]]),
    ('cubic_up', dict(resize_x=11, resize_y=9, interp_type=types.INTERP_CUBIC),
     [[-4.18, 17.73, 46.46, 73.37, 100.28, 127.19, 153.81, 180.71, 238.58, 147.66, -11.16],
      [15.62, 37.53, 66.27, 93.18, 120.09, 146.00, 179.66, 219.35, 149.89, 68.63, 15.89],
      [44.79, 66.70, 95.44, 122.35, 149.06, 179.77, 204.97, 204.91, 50.75, 3.45, 52.29],
      [71.46, 93.37, 122.11, 149.00, 174.92, 225.21, 203.12, 38.48, 25.52, 52.06, 78.36],
      [98.12, 120.03, 148.22, 176.26, 225.47, 183.50, 92.48, 14.59, 44.80, 84.11, 104.88],
      [124.79, 146.49, 177.44, 204.77, 220.77, 102.31, -1.29, 53.34, 81.40, 109.63, 131.54],
      [151.46, 172.31, 214.51, 237.88, 76.45, 25.60, 49.01, 80.54, 107.66, 136.30, 158.21],
      [180.63, 211.67, 200.55, 123.79, 35.30, 39.00, 83.99, 109.84, 136.73, 165.47, 187.38],
      [200.43, 241.67, 175.08, 2.06, 40.84, 76.73, 102.72, 129.63, 156.54, 185.27, 207.18]]),
    ('cubic_aa_down', dict(resize_x=3, resize_y=4, interp_type=types.INTERP_CUBIC),
     [[41.51, 152.42, 115.49],
      [104.18, 173.65, 59.72],
      [171.07, 107.75, 91.91],
      [173.98, 66.17, 159.55]]),
    ('lanczos_aa_down', dict(resize_x=5, resize_y=3, interp_type=types.INTERP_LANCZOS3),
     [[30.03, 83.98, 165.69, 182.88, 49.49],
      [108.24, 190.67, 163.97, 41.39, 80.68],
      [203.20, 142.48, 40.07, 108.89, 176.95]]),
    ('gaussian_up', dict(resize_x=10, resize_y=7, interp_type=types.INTERP_GAUSSIAN),
     [[0.00, 30.77, 55.50, 80.23, 112.45, 146.55, 178.77, 203.50, 185.12, 3.00],
      [36.30, 67.07, 91.80, 116.53, 148.76, 182.85, 215.07, 123.64, 28.22, 39.30],
      [70.31, 101.08, 125.81, 150.54, 182.77, 216.86, 87.75, 48.81, 42.54, 73.31],
      [100.00, 130.77, 155.50, 180.23, 207.42, 123.58, 44.32, 47.50, 72.23, 103.00],
      [129.69, 160.46, 185.19, 199.48, 172.51, 27.86, 52.46, 77.19, 101.92, 132.69],
      [163.70, 194.47, 207.36, 181.13, 20.15, 54.24, 86.47, 111.20, 135.93, 166.70],
      [200.00, 230.77, 127.50, 24.23, 56.45, 90.55, 122.77, 147.50, 172.23, 203.00]]),
    ('nn_up', dict(resize_x=11, resize_y=9, interp_type=types.INTERP_NN),
     [[0.00, 37.00, 37.00, 74.00, 111.00, 148.00, 148.00, 185.00, 222.00, 222.00, 3.00],
      [40.00, 77.00, 77.00, 114.00, 151.00, 188.00, 188.00, 225.00, 6.00, 6.00, 43.00],
      [40.00, 77.00, 77.00, 114.00, 151.00, 188.00, 188.00, 225.00, 6.00, 6.00, 43.00],
      [80.00, 117.00, 117.00, 154.00, 191.00, 228.00, 228.00, 9.00, 46.00, 46.00, 83.00],
      [120.00, 157.00, 157.00, 194.00, 231.00, 12.00, 12.00, 49.00, 86.00, 86.00, 123.00],
      [120.00, 157.00, 157.00, 194.00, 231.00, 12.00, 12.00, 49.00, 86.00, 86.00, 123.00],
      [160.00, 197.00, 197.00, 234.00, 15.00, 52.00, 52.00, 89.00, 126.00, 126.00, 163.00],
      [200.00, 237.00, 237.00, 18.00, 55.00, 92.00, 92.00, 129.00, 166.00, 166.00, 203.00],
      [200.00, 237.00, 237.00, 18.00, 55.00, 92.00, 92.00, 129.00, 166.00, 166.00, 203.00]]),
    ('roi_flip', dict(resize_x=5, resize_y=4, roi_start=[5.5, 1.25], roi_end=[0.5, 7.0]),
     [[188.21, 89.99, 53.72, 94.99, 138.63],
      [176.67, 189.54, 94.48, 50.16, 88.12],
      [124.37, 165.63, 195.16, 102.37, 45.48],
      [73.85, 115.12, 156.39, 197.66, 110.58]]),
    ('neg_size_subpixel', dict(resize_x=-4.6, resize_y=3),
     [[49.67, 157.78, 151.91, 93.06, 33.81],
      [94.19, 72.55, 144.32, 162.69, 108.81],
      [169.19, 109.94, 72.26, 140.99, 183.81]]),
    ('minmag', dict(resize_x=13, resize_y=3, min_filter=types.INTERP_NN, mag_filter=types.INTERP_CUBIC),
     [[37.68, 53.05, 78.42, 101.19, 123.96, 146.73, 169.50, 193.79, 233.41, 158.10, 10.11, 16.74, 45.32],
      [117.68, 133.05, 158.42, 181.19, 210.75, 238.24, 121.50, 4.76, 32.25, 61.81, 84.58, 109.95, 125.32],
      [197.68, 226.26, 232.89, 84.90, 9.59, 49.21, 73.50, 96.27, 119.04, 141.81, 164.58, 189.95, 205.32]]),
]


# DALI tabulates its kernels; its cubic and Gaussian values differ from the exact kernels by up to 0.13.
SMALL_TOLERANCE = {"cubic_up": 0.15, "gaussian_up": 0.15, "minmag": 0.1}


@pytest.mark.parametrize("name, kw, expected", DALI_SMALL, ids=[r[0] for r in DALI_SMALL])
def test_resize_small_image_matches_dali(name, kw, expected):
    out = run(lambda x: fn.resize(x, dtype=types.FLOAT, **kw), [IMG])[0].at(0)[..., 0]
    np.testing.assert_allclose(out, expected, atol=SMALL_TOLERANCE.get(name, 0.02))


VOLUME = ((np.arange(4 * 5 * 6) * 53) % 256).astype(np.uint8).reshape(4, 5, 6, 1)
DALI_VOLUME_LINEAR = [
    [[32.39, 108.95, 162.23, 68.12],
     [67.82, 139.95, 140.03, 68.09],
     [112.11, 163.91, 109.33, 85.77],
     [156.39, 165.72, 74.19, 130.06],
     [184.06, 119.50, 103.70, 174.35],
     [175.15, 100.98, 132.10, 135.52],
     [148.52, 100.95, 154.23, 60.12]],
    [[98.67, 161.00, 95.33, 72.33],
     [134.10, 147.67, 82.00, 107.76],
     [166.19, 122.87, 85.65, 152.05],
     [180.00, 85.89, 119.78, 196.33],
     [132.86, 99.70, 164.06, 179.67],
     [104.00, 125.70, 141.30, 126.43],
     [90.67, 153.00, 87.33, 64.33]],
    [[164.94, 109.62, 69.81, 138.61],
     [164.90, 87.42, 100.80, 174.03],
     [140.48, 81.83, 141.76, 182.86],
     [79.48, 109.49, 186.05, 138.48],
     [90.52, 153.78, 186.01, 105.19],
     [121.51, 141.55, 132.77, 108.48],
     [156.94, 101.62, 61.81, 130.61]],
]
DALI_VOLUME_CUBIC = [
    [[15.03, 47.49, 92.40, 139.21, 188.10, 167.08, 95.92, 21.20],
     [116.86, 166.13, 197.19, 174.56, 89.23, 58.73, 89.35, 145.76],
     [238.26, 168.56, 96.53, 67.83, 111.20, 175.57, 155.67, 72.03]],
    [[41.09, 76.59, 127.02, 168.26, 171.14, 110.74, 62.95, 51.61],
     [156.15, 183.30, 174.21, 121.44, 72.16, 83.98, 130.05, 176.06],
     [183.86, 123.96, 84.70, 98.85, 155.84, 144.01, 120.49, 109.98]],
    [[81.63, 121.66, 167.14, 182.69, 127.68, 53.01, 45.99, 96.57],
     [195.13, 182.89, 131.81, 67.74, 72.22, 126.47, 178.64, 204.27],
     [114.40, 82.53, 90.47, 142.52, 176.50, 112.87, 92.52, 132.81]],
    [[123.31, 168.42, 182.05, 136.37, 47.36, 52.70, 97.21, 138.15],
     [191.96, 127.98, 73.85, 69.52, 125.56, 177.08, 199.97, 196.38],
     [72.16, 95.21, 145.49, 179.80, 98.75, 116.91, 117.81, 82.69]],
    [[166.98, 172.36, 137.27, 73.34, 50.88, 90.36, 143.38, 178.66],
     [133.25, 88.01, 75.69, 116.00, 172.41, 199.08, 179.37, 136.53],
     [92.53, 138.59, 158.02, 134.25, 105.52, 108.00, 110.14, 104.21]],
    [[196.11, 161.16, 88.72, 26.53, 79.94, 127.47, 172.26, 204.72],
     [76.85, 66.43, 96.03, 161.00, 201.18, 204.27, 152.28, 80.59],
     [126.12, 177.07, 152.80, 77.88, 136.55, 98.23, 94.84, 140.86]],
]


@pytest.mark.parametrize("kw, expected, tol", [
    ({"size": [3, 7, 4]}, DALI_VOLUME_LINEAR, 0.02),
    ({"size": [6, 3, 8], "interp_type": types.INTERP_CUBIC}, DALI_VOLUME_CUBIC, 0.15),
])
def test_resize_volume_matches_dali(kw, expected, tol):
    out = run(lambda x: fn.resize(x, dtype=types.FLOAT, **kw), [VOLUME], layout="DHWC")[0].at(0)[..., 0]
    np.testing.assert_allclose(out, expected, atol=tol)


def test_resize_nearest_neighbour_ties_match_dali():
    """DALI adds the row step in float32, so exact ties (240 -> 600 rows: 11.0, 13.0, ...) go down
    from row 27 on; columns are computed directly (320 -> 224)."""
    rows = np.arange(240, dtype=np.float32)[:, None, None] * np.ones((1, 320, 1), np.float32)
    cols = np.arange(320, dtype=np.float32)[None, :, None] * np.ones((240, 1, 1), np.float32)
    out = run(lambda x: fn.resize(x, resize_x=224, resize_y=600, interp_type=types.INTERP_NN),
              [np.concatenate([rows, cols], axis=2)])[0].at(0)
    assert out[20:60, 0, 0].tolist() == [  # DALI 2.4
        8, 8, 9, 9, 9, 10, 10, 10, 11, 11, 12, 12, 12, 13, 13, 14, 14, 14, 15, 15, 16, 16, 16, 17, 17, 18, 18, 18,
        19, 19, 20, 20, 20, 21, 21, 22, 22, 22, 23, 23]
    assert out[0, 25:55, 1].tolist() == [  # DALI 2.4
        36, 37, 39, 40, 42, 43, 45, 46, 47, 49, 50, 52, 53, 55, 56, 57, 59, 60, 62, 63, 65, 66, 67, 69, 70, 72, 73,
        75, 76, 77]


@pytest.mark.parametrize("width, out_width, centre", [  # DALI 2.4: the columns picked around the middle
    (2, 41, [0, 0, 1]), (6, 37, [2, 2, 3]), (4, 61, [1, 1, 2]), (8, 47, [3, 3, 4]), (6, 79, [2, 2, 3]),
    (2, -41, [1, 1, 0]), (6, -37, [3, 3, 2]),
])
def test_resize_nearest_neighbour_column_ties_match_dali(width, out_width, centre):
    """The middle output column of these sizes lies exactly on a pixel border; DALI computes the
    column positions in float32, which puts it on the left pixel (the right one when flipped)."""
    img = np.tile(np.arange(width, dtype=np.uint8), (3, 1))[:, :, None]
    out = run(lambda x: fn.resize(x, resize_x=out_width, resize_y=3, interp_type=types.INTERP_NN), [img])[0].at(0)
    cols = out[0, :, 0].astype(int)
    n = abs(out_width)
    assert cols[n // 2 - 1:n // 2 + 2].tolist() == centre
    exact = (np.arange(n) + 0.5) * width / n  # everywhere else: the pixel containing the centre
    expected = np.floor(exact if out_width > 0 else width - exact).astype(int)
    others = np.arange(n) != n // 2
    np.testing.assert_array_equal(cols[others], expected[others])


def test_triangular_is_linear_also_without_antialias():
    """DALI 2.4 treats the deprecated TRIANGULAR as LINEAR: with antialias=False it is plain linear
    interpolation, not the widened filter."""
    img = read_rgb(flower_paths(1)[0])
    for kw in (dict(resize_x=120, resize_y=90), dict(resize_x=700, resize_y=33), dict(size=[150, 0])):
        outs = {(interp, aa): run(lambda x: fn.resize(x, interp_type=interp, antialias=aa, **kw), [img])[0].at(0)
                for interp in (types.INTERP_TRIANGULAR, types.INTERP_LINEAR) for aa in (True, False)}
        for aa in (True, False):
            np.testing.assert_array_equal(outs[types.INTERP_TRIANGULAR, aa], outs[types.INTERP_LINEAR, aa])
        assert not np.array_equal(outs[types.INTERP_TRIANGULAR, True], outs[types.INTERP_TRIANGULAR, False])


PHOTO = "roses/319298955_0c72bd36bf.jpg"  # 333 x 500
DALI_PHOTO = [  # DALI 2.4, uint8 output
    # (name, arguments, output shape, sum of all values, values at PIXELS)
    ('linear', dict(resize_x=224, resize_y=224), (224, 224, 3), 13641128, [217, 149, 6, 126, 137, 69, 184, 159]),
    ('triangular', dict(resize_x=224, resize_y=224, interp_type=types.INTERP_TRIANGULAR), (224, 224, 3), 13641128,
     [217, 149, 6, 126, 137, 69, 184, 159]),
    ('linear_no_antialias', dict(resize_x=224, resize_y=224, antialias=False), (224, 224, 3), 13641768,
     [216, 151, 5, 128, 136, 70, 184, 158]),
    ('cubic', dict(resize_x=224, resize_y=224, interp_type=types.INTERP_CUBIC), (224, 224, 3), 13640868,
     [217, 149, 6, 127, 137, 69, 183, 159]),
    ('lanczos3', dict(resize_x=224, resize_y=224, interp_type=types.INTERP_LANCZOS3), (224, 224, 3), 13641603,
     [217, 149, 6, 128, 137, 70, 183, 159]),
    ('gaussian', dict(resize_x=224, resize_y=224, interp_type=types.INTERP_GAUSSIAN), (224, 224, 3), 13641440,
     [216, 149, 6, 127, 137, 69, 184, 159]),
    ('nn', dict(resize_x=224, resize_y=224, interp_type=types.INTERP_NN), (224, 224, 3), 13638611,
     [215, 151, 4, 132, 137, 71, 185, 156]),
    ('shorter256', dict(resize_shorter=256), (256, 384, 3), 26711774, [217, 160, 12, 59, 135, 8, 211, 151]),
    ('upscale_cubic', dict(resize_x=700, resize_y=600, interp_type=types.INTERP_CUBIC), (600, 700, 3), 114183944,
     [218, 197, 132, 116, 173, 22, 210, 134]),
]
PIXELS = [(0, 0, 0), (10, 200, 1), (100, 100, 2), (223, 223, 0), (57, 13, 1), (150, 199, 2), (200, 31, 0), (111, 5, 1)]


@pytest.mark.parametrize("name, kw, shape, total, values", DALI_PHOTO, ids=[r[0] for r in DALI_PHOTO])
def test_resize_photo_matches_dali(name, kw, shape, total, values):
    path = os.path.join(FLOWERS, PHOTO)
    if not os.path.exists(path):
        pytest.skip(f"shared test photo not found at {os.path.abspath(path)}")
    out = np.asarray(run(lambda x: fn.resize(x, **kw), [read_rgb(path)])[0].at(0))
    assert out.shape == shape
    # Measured on flower photos: mean |ours - DALI| below 0.01 (0 for NN), never more than 1.
    assert abs(int(out.astype(np.int64).sum()) - total) <= 0.01 * out.size
    got = [int(out[y, x, c]) for y, x, c in PIXELS]
    assert np.abs(np.array(got) - values).max() <= 1, (got, values)


@pytest.mark.parametrize("interp", [types.INTERP_LINEAR, types.INTERP_CUBIC, types.INTERP_LANCZOS3,
                                    types.INTERP_GAUSSIAN, types.INTERP_NN])
def test_resize_photos_match_reference(interp):
    imgs = [read_rgb(p) for p in flower_paths(3)]
    out = run(lambda x: fn.resize(x, resize_x=224, resize_y=160, interp_type=interp), imgs)[0]
    for img, got in zip(imgs, out.samples()):
        expected = to_uint8(reference_resize(img, (160, 224), interp=interp))
        err = np.abs(got.astype(int) - expected)
        assert err.max() <= 1 and err.mean() < 0.01, (err.max(), err.mean())


def test_resize_upscale_and_window_match_reference():
    img = read_rgb(flower_paths(1)[0])
    kw = dict(resize_x=300.6, resize_y=-410, roi_start=[10.5, 200.25], roi_end=[150, 20])
    out = run(lambda x: fn.resize(x, dtype=types.FLOAT, **kw), [img])[0].at(0)
    _, lo, hi = resize_geometry(*geometry_args(img.shape[:2], kw))
    expected = reference_resize(img, out.shape[:2], (lo[0, 0], hi[0, 0], lo[0, 1], hi[0, 1]))
    # Row positions are accumulated in float32 like DALI's (about 3e-4 pixel of drift over 410 rows).
    np.testing.assert_allclose(out, expected, atol=0.1)


def test_resize_without_antialias_is_opencv_linear_on_floats():
    img = read_rgb(flower_paths(1)[0])
    out = run(lambda x: fn.resize(x, resize_x=200, resize_y=150, antialias=False), [img])[0].at(0)
    expected = cv2.resize(img.astype(np.float32), (200, 150), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_array_equal(out, to_uint8(expected))


# -- per-sample arguments, batches, layouts and types --------------------------------------------------------


def _images():
    return [((np.arange(h * w * 3) * 7) % 251).astype(np.uint8).reshape(h, w, 3)
            for h, w in ((40, 60), (50, 30), (33, 47))]


def test_resize_per_sample_sizes():
    imgs = _images()
    xs = [np.float32(20), np.float32(31.0), np.float32(-12)]
    out = run(lambda x, rx: fn.resize(x, resize_x=rx), imgs, xs)[0]
    assert [s.shape for s in out.samples()] == [(13, 20, 3), (52, 31, 3), (8, 12, 3)]
    for img, got, x in zip(imgs, out.samples(), xs):
        single = run(lambda n: fn.resize(n, resize_x=float(x)), [img])[0].at(0)
        np.testing.assert_array_equal(got, single)


def test_resize_per_sample_size_roi_and_filter():
    imgs = _images()
    sizes = [np.array([10, 12], np.float32), np.array([7], np.float32), np.array([0, 9], np.float32)]
    starts = [np.array([1, 2], np.float32), np.array([0.5, 0.5], np.float32), np.array([30, 20], np.float32)]
    ends = [np.array([30, 40], np.float32), np.array([40, 20], np.float32), np.array([3, 1], np.float32)]
    interp = [np.int32(types.INTERP_NN), np.int32(types.INTERP_CUBIC), np.int32(types.INTERP_LINEAR)]
    out = run(lambda x, s, a, b, i: fn.resize(x, size=s, roi_start=a, roi_end=b, interp_type=i),
              imgs, sizes, starts, ends, interp)[0]
    for k, got in enumerate(out.samples()):
        kw = dict(size=sizes[k].tolist(), roi_start=starts[k].tolist(), roi_end=ends[k].tolist(),
                  interp_type=types.DALIInterpType(int(interp[k])))
        single = run(lambda n: fn.resize(n, **kw), [imgs[k]])[0].at(0)
        np.testing.assert_array_equal(got, single)


def test_resize_output_is_dense_when_sizes_agree():
    out = run(lambda x: (fn.resize(x, resize_x=24, resize_y=16), fn.resize(x, resize_x=24)), _images())
    assert out[0].as_array().shape == (3, 16, 24, 3)
    assert not out[1].is_dense_tensor()


def test_resize_batch_of_one_and_thread_counts_agree():
    imgs = [read_rgb(p) for p in flower_paths(4)]
    graph = lambda x: (fn.resize(x, resize_shorter=100), fn.resize(x, size=[64, 48], interp_type=types.INTERP_CUBIC))
    one = run(graph, imgs, num_threads=1)
    two = run(graph, imgs, num_threads=2)
    for a, b in zip(one, two):
        for s, t in zip(a.samples(), b.samples()):
            np.testing.assert_array_equal(s, t)
    single = run(graph, imgs[2:3])
    np.testing.assert_array_equal(single[0].at(0), one[0].at(2))


def test_resize_gpu_placement_gives_host_values():
    imgs = _images()
    cpu = run(lambda x: fn.resize(x, resize_x=24, resize_y=16), imgs)[0]
    gpu = run(lambda x: fn.resize(x.gpu(), resize_x=24, resize_y=16), imgs)[0]
    assert isinstance(gpu, TensorListGPU)
    np.testing.assert_array_equal(np.asarray(gpu.as_cpu().as_array()), cpu.as_array())


def test_resize_layouts_agree_with_hwc():
    img = _images()[0]
    hwc = run(lambda x: fn.resize(x, resize_x=25, resize_y=17), [img])[0].at(0)
    chw = run(lambda x: fn.resize(x, resize_x=25, resize_y=17), [img.transpose(2, 0, 1).copy()], layout="CHW")[0]
    np.testing.assert_array_equal(chw.at(0), hwc.transpose(2, 0, 1))
    assert chw.layout() == "CHW"
    seq = np.stack([img, 255 - img])
    fhwc = run(lambda x: fn.resize(x, resize_x=25, resize_y=17), [seq], layout="FHWC")[0].at(0)
    np.testing.assert_array_equal(fhwc[0], hwc)
    np.testing.assert_array_equal(fhwc[1], run(lambda x: fn.resize(x, resize_x=25, resize_y=17), [255 - img])[0].at(0))
    gray = run(lambda x: fn.resize(x, resize_x=25, resize_y=17), [img[:, :, 0].copy()], layout="HW")[0].at(0)
    np.testing.assert_array_equal(gray, run(lambda x: fn.resize(x, resize_x=25, resize_y=17),
                                            [img[:, :, :1].copy()])[0].at(0)[:, :, 0])


@pytest.mark.parametrize("dtype", [np.uint16, np.int16, np.float32])
def test_resize_input_types(dtype):
    img = (_images()[0].astype(np.float32) * 100 - 5000).astype(dtype)
    out = run(lambda x: fn.resize(x, resize_x=25, resize_y=17), [img])[0].at(0)
    assert out.dtype == dtype
    expected = reference_resize(img, (17, 25))
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        expected = np.clip(np.rint(expected), info.min, info.max)
    np.testing.assert_allclose(out.astype(np.float64), expected, atol=1.0 if dtype != np.float32 else 0.05)


def test_resize_float_output_of_uint8():
    img = _images()[0]
    out = run(lambda x: fn.resize(x, resize_x=25, resize_y=17, dtype=types.FLOAT), [img])[0].at(0)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, reference_resize(img, (17, 25)), atol=0.01)


def test_resize_save_attrs_adds_the_input_shape():
    out, attrs = run(lambda x: tuple(fn.resize(x, resize_x=10, save_attrs=True)), _images())
    assert attrs.as_array().tolist() == [[40, 60], [50, 30], [33, 47]]
    assert attrs.as_array().dtype == np.int32


# -- errors --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kw, message", [
    ({"resize_x": 10, "size": [5, 5]}, "exactly one way of specifying the size must be used"),
    ({}, "exactly one way of specifying the size must be used: resize_x/resize_y/resize_z, size, "
         "resize_shorter or resize_longer; got none"),
    ({"resize_shorter": 10, "resize_longer": 20}, "got resize_longer, resize_shorter"),
    ({"resize_shorter": 10, "mode": "not_larger"},
     "'resize_shorter', 'resize_longer' and 'mode' are mutually exclusive"),
    ({"resize_x": 10, "roi_start": [1, 2]}, "'roi_start' and 'roi_end' must be given together"),
    ({"resize_x": 10, "dtype": types.INT32}, "argument 'dtype' must be FLOAT or the input type"),
])
def test_resize_argument_errors_name_the_operator(kw, message):
    with pytest.raises(ValueError, match="^fn.resize: ") as e:
        run(lambda x: fn.resize(x, **kw), _images())
    assert message in str(e.value)


def test_resize_rejects_unknown_mode_when_called():
    with pytest.raises(ValueError, match=r"fn.resize: argument 'mode' must be one of"):
        run(lambda x: fn.resize(x, resize_x=10, mode="bogus"), _images())


@pytest.mark.parametrize("kw, layout, data, error, message", [
    ({"size": [1, 2, 3]}, "HWC", None, ValueError, "argument 'size' expects either a single value or a list of 2"),
    ({"resize_x": 5}, "WHC", None, ValueError, "input layout 'WHC' (for 3-D samples) is not supported"),
    ({"resize_x": 5}, "HWC", np.zeros((4, 4, 3), np.int32), TypeError, "input type int32 is not supported"),
    ({"resize_x": 5, "dtype": types.UINT16}, "HWC", None, TypeError, "argument 'dtype' must be the input type"),
])
def test_resize_run_errors_name_the_operator(kw, layout, data, error, message):
    batch = [data] if data is not None else _images()
    with pytest.raises(error, match="fn.resize: ") as e:
        run(lambda x: fn.resize(x, **kw), batch, layout=layout)
    assert message in str(e.value)


# -- fn.random_resized_crop ----------------------------------------------------------------------------------


def expected_windows(seed, iteration, heights, widths, area=(0.08, 1.0), ratio=(3 / 4, 4 / 3), attempts=10):
    keys = rng.sample_keys(seed, iteration, len(heights))
    u = rng.uniform(keys, crop_window_draws(attempts), 0)
    return random_crop_windows(np.array(heights), np.array(widths), u, area, ratio, attempts)


def test_random_resized_crop_resizes_the_generator_window():
    imgs = [read_rgb(p) for p in flower_paths(4)]
    out = run(lambda x: fn.random_resized_crop(x, size=[96, 128], seed=7), imgs, iterations=2)[0]
    assert out.as_array().shape == (4, 96, 128, 3)
    y, x, h, w = expected_windows(7, 1, [i.shape[0] for i in imgs], [i.shape[1] for i in imgs])
    for k, img in enumerate(imgs):
        expected = to_uint8(reference_resize(img, (96, 128), (y[k], y[k] + h[k], x[k], x[k] + w[k])))
        err = np.abs(out.at(k).astype(int) - expected)
        assert err.max() <= 1 and err.mean() < 0.01


def test_random_resized_crop_windows_follow_the_ranges():
    img = np.zeros((300, 400, 1), np.uint8)
    y, x, h, w = expected_windows(3, 0, [300] * 500, [400] * 500, (0.3, 0.6), (0.5, 2.0))
    assert ((h * w >= 0.3 * 120000 * 0.97) & (h * w <= 0.6 * 120000 * 1.03)).mean() > 0.95
    assert ((w / h >= 0.49) & (w / h <= 2.01)).all()
    out = run(lambda n: fn.random_resized_crop(n, size=32, random_area=[0.3, 0.6], random_aspect_ratio=[0.5, 2.0]),
              [img] * 3)[0]
    assert out.as_array().shape == (3, 32, 32, 1)


def test_random_resized_crop_frames_share_the_window():
    img = _images()[0].astype(np.float32)
    out = run(lambda x: fn.random_resized_crop(x, size=[20, 30], seed=4), [np.stack([img, 255 - img])],
              layout="FHWC")[0].at(0)
    assert out.shape == (2, 20, 30, 3)
    np.testing.assert_allclose(out[1], 255 - out[0], atol=1e-3)


def test_random_resized_crop_is_deterministic_and_varies_by_iteration():
    imgs = [read_rgb(p) for p in flower_paths(3)]
    graph = lambda x: fn.random_resized_crop(x, size=64, seed=11)
    a = run(graph, imgs, num_threads=1, iterations=2)[0].as_array()
    b = run(graph, imgs, num_threads=2, iterations=2)[0].as_array()
    c = run(graph, imgs, num_threads=2, iterations=1)[0].as_array()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_random_resized_crop_matches_decoder_windows():
    """With equal seeds, fn.decoders.image_random_crop cuts the same windows."""
    paths = flower_paths(3)
    encoded = [np.fromfile(p, np.uint8) for p in paths]
    imgs = [read_rgb(p) for p in paths]
    crops = run(lambda e: fn.decoders.image_random_crop(e, seed=21), encoded, layout="")[0]
    y, x, h, w = expected_windows(21, 0, [i.shape[0] for i in imgs], [i.shape[1] for i in imgs])
    assert [c.shape[:2] for c in crops.samples()] == list(zip(h.tolist(), w.tolist()))


@pytest.mark.parametrize("kw, message", [
    ({}, "argument 'size' is required"),
    ({"size": [1, 2, 3]}, "argument 'size' must be one positive value or two [height, width]"),
    ({"size": 10, "random_area": [0.5, 0.1]}, "argument 'random_area' must satisfy min <= max"),
    ({"size": 10, "random_aspect_ratio": [0, 1]}, "argument 'random_aspect_ratio' must be > 0"),
])
def test_random_resized_crop_errors(kw, message):
    with pytest.raises(ValueError, match="fn.random_resized_crop: ") as e:
        run(lambda x: fn.random_resized_crop(x, **kw), _images())
    assert message in str(e.value)


# -- planning and the resampling paths (jaxdali.ops.resample_plan, jaxdali.ops.resample) -----------------------------------------------------------


def test_batch_planning_gives_the_single_sample_taps_and_the_paths_agree():
    """plan_resample of a batch gives each sample the taps it gets alone; the kernel or OpenCV path
    (resample_sample) against the NumPy passes (resample_nd) with the same taps: values within one
    level (float32 summation order), for random windows, flips, filters, channel counts and types."""
    from jaxdali.ops.resample import resample_nd, resample_sample
    from jaxdali.ops.resample_plan import axis_taps, plan_resample

    r = np.random.RandomState(0)
    filters = [types.INTERP_LINEAR, types.INTERP_CUBIC, types.INTERP_LANCZOS3, types.INTERP_GAUSSIAN,
               types.INTERP_TRIANGULAR]
    for trial in range(120):
        c = int(r.choice([1, 2, 3, 4]))
        dtype = np.dtype(r.choice([np.uint8, np.uint16, np.int16, np.float32]))
        h, w = r.randint(1, 60, 2)
        img = (r.rand(h, w, c) * 3000 - (1500 if dtype == np.int16 else 0)).clip(0 if dtype.kind == "u" else None)
        img = (img / 12 if dtype == np.uint8 else img).astype(dtype)
        oh, ow = r.randint(1, 80, 2)
        lo = r.uniform(-3, [h, w])
        hi = r.uniform(lo, np.array([h, w]) + 3)
        if trial % 3 == 0:
            lo, hi = np.zeros(2), np.array([h, w], float)
        if trial % 5 == 0:
            lo, hi = hi, lo
        f = int(filters[trial % len(filters)])
        antialias = trial % 4 != 1
        out_dtype = np.dtype(np.float32) if trial % 2 else dtype
        other = (r.randint(1, 90), r.randint(1, 90), c)
        plan = plan_resample(np.array([other, img.shape]), dtype, (0, 1), np.array([[7, 9], [oh, ow]]),
                             np.array([[0, 0], lo]), np.array([other[:2], hi]), np.array([f, f]), np.array([f, f]),
                             antialias)[1]
        alone = plan_resample(np.array([img.shape]), dtype, (0, 1), np.array([[oh, ow]]), lo[None], hi[None],
                              np.array([f]), np.array([f]), antialias)[0]
        assert plan.cv2_linear == alone.cv2_linear and plan.taps.keys() == alone.taps.keys()
        for axis, (index, weights) in alone.taps.items():
            assert np.array_equal(plan.taps[axis][0], index) and np.array_equal(plan.taps[axis][1], weights)
        taps = plan.taps
        if plan.cv2_linear:
            taps = {a: axis_taps(f, [n], [m], [l], [e], antialias, accumulate=a == 0)[0]
                    for a, (n, m, l, e) in enumerate(zip(img.shape, (oh, ow), lo, hi))}
        expected, got = np.empty((oh, ow, c), out_dtype), np.empty((oh, ow, c), out_dtype)
        resample_nd(img, taps, expected)
        resample_sample(img, (0, 1), plan, got)
        tol = 1 if out_dtype.kind in "iu" else 1e-4 * max(1.0, float(np.abs(expected).max()))
        assert np.abs(got.astype(np.float64) - expected).max() <= tol, (trial, dtype, out_dtype, c, f)


def test_samples_of_one_geometry_share_their_taps_and_get_the_taps_they_get_alone():
    """plan_resample plans each distinct (extent, output, window) once: samples of the same geometry get
    the same read-only arrays, bit for bit the taps each gets alone, next to samples of other geometries."""
    from jaxdali.ops.resample_plan import plan_resample

    shapes = np.array([(375, 500, 3), (333, 500, 3), (375, 500, 3), (500, 375, 3), (375, 500, 3)])
    n = len(shapes)
    out = np.array([(256, 341), (256, 384), (256, 341), (341, 256), (256, 341)])
    lo, hi = np.zeros((n, 2)), shapes[:, :2].astype(float)
    linear = np.full(n, int(types.INTERP_LINEAR))
    plans = plan_resample(shapes, np.dtype(np.uint8), (0, 1), out, lo, hi, linear, linear, True)
    for axis in (0, 1):
        assert plans[0].taps[axis] is plans[2].taps[axis] is plans[4].taps[axis]
        assert plans[0].taps[axis] is not plans[1].taps[axis]
        assert not plans[0].taps[axis][0].flags.writeable and not plans[0].taps[axis][1].flags.writeable
    for i in range(n):
        alone = plan_resample(shapes[i:i + 1], np.dtype(np.uint8), (0, 1), out[i:i + 1], lo[i:i + 1], hi[i:i + 1],
                              linear[:1], linear[:1], True)[0]
        assert plans[i].taps.keys() == alone.taps.keys() == {0, 1}
        for axis, (index, weights) in alone.taps.items():
            assert np.array_equal(plans[i].taps[axis][0], index)
            assert np.array_equal(plans[i].taps[axis][1].view(np.uint32), weights.view(np.uint32))


def test_batch_of_mixed_sizes_and_filters_matches_single_samples():
    """A batch whose samples need different tap counts (up- and downscaling) gives each sample the
    result it gets alone: planning is vectorised per (filter, tap count) group, not padded."""
    imgs = [((np.arange(h * w * 3) * 7) % 251).astype(np.uint8).reshape(h, w, 3)
            for h, w in [(40, 60), (200, 90), (13, 17), (224, 224), (97, 301)]]
    batch = run(lambda x: fn.resize(x, resize_x=64, resize_y=48), imgs)[0]
    for img, got in zip(imgs, batch.samples()):
        alone = run(lambda x: fn.resize(x, resize_x=64, resize_y=48), [img])[0].at(0)
        assert np.array_equal(np.asarray(got), np.asarray(alone))


# -- windowed resize: a cropping reader gets only its windows -------------------------------------------------


@pytest.mark.parametrize("case", ["centre", "per_sample_positions", "mirror_hwc_cubic", "pad_outside", "crop",
                                  "crop_per_sample_sizes", "crop_pad_outside"])
def test_resize_followed_by_a_crop_computes_only_the_windows(case, monkeypatch):
    """resize -> crop_mirror_normalize(crop=...) or fn.crop: the resize computes only the crop windows (the
    runner pairs them), and the pipeline's output is the same as with the full resize."""
    from jaxdali.pipeline import plan as plan_module
    from jaxdali.pipeline import runner as runner_module

    r = np.random.RandomState(3)
    imgs = [(r.rand(h, w, 3) * 255).astype(np.uint8) for h, w in [(60, 80), (90, 70), (45, 120), (100, 100)]]
    kw = dict(dtype=types.FLOAT, output_layout="CHW", mean=[120, 110, 100], std=[50, 60, 70])

    def graph(x):
        if case == "centre":
            return fn.crop_mirror_normalize(fn.resize(x, resize_shorter=48), crop=(40, 40), **kw)
        if case == "per_sample_positions":
            px, py = fn.random.uniform(range=(0, 1)), fn.random.uniform(range=(0, 1))
            return fn.crop_mirror_normalize(fn.resize(x, resize_shorter=52), crop=(33, 41), crop_pos_x=px,
                                            crop_pos_y=py, **kw)
        if case == "mirror_hwc_cubic":
            return fn.crop_mirror_normalize(fn.resize(x, resize_x=64, resize_y=50, interp_type=types.INTERP_CUBIC),
                                            crop=(30, 60), mirror=1, output_layout="HWC", dtype=types.UINT8)
        if case == "crop":
            return fn.crop(fn.resize(x, resize_shorter=50), crop=(40, 44), crop_pos_x=0.2, dtype=types.FLOAT)
        if case == "crop_per_sample_sizes":
            return fn.crop(fn.resize(x, resize_x=64, resize_y=56), crop_h=fn.random.uniform(range=(10, 50)),
                           crop_w=fn.random.uniform(range=(20, 60)), crop_pos_y=fn.random.uniform(range=(0, 1)))
        if case == "crop_pad_outside":
            return fn.crop(fn.resize(x, resize_shorter=30), crop=(40, 40), out_of_bounds_policy="pad")
        return fn.crop_mirror_normalize(fn.resize(x, resize_shorter=30), crop=(40, 40),
                                        out_of_bounds_policy="pad", **kw)

    calls = []
    original = runner_module.GraphRunner._windows_for

    def spy(self, *a, **k):
        windows = original(self, *a, **k)
        calls.append(windows is not None)
        return windows

    monkeypatch.setattr(runner_module.GraphRunner, "_windows_for", spy)
    fused = run(graph, imgs, iterations=2)[0]
    assert calls and all(calls) == (case not in ("pad_outside", "crop_pad_outside"))
    monkeypatch.setattr(plan_module, "window_pairs", lambda *plan_args: {})
    plain = run(graph, imgs, iterations=2)[0]
    for a, b in zip(fused, plain, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_reader_of_whole_samples_does_not_window_its_resize(monkeypatch):
    """crop_mirror_normalize without a crop (and a crop as large as the resize's output) reads every sample
    whole: the resize runs as usual, without a window job per sample."""
    from jaxdali.pipeline import runner as runner_module

    imgs = [np.zeros((h, w, 3), np.uint8) for h, w in [(60, 80), (90, 70)]]

    def no_crop(x):
        return fn.crop_mirror_normalize(fn.resize(x, size=(32, 32)), mirror=fn.random.coin_flip())

    def whole_crop(x):
        return fn.crop(fn.resize(x, size=(32, 32)), crop=(32, 32), crop_pos_x=fn.random.uniform(range=(0, 1)))

    seen = []
    original = runner_module.GraphRunner._windows_for
    monkeypatch.setattr(runner_module.GraphRunner, "_windows_for",
                        lambda self, *a, **k: seen.append(original(self, *a, **k)) or seen[-1])
    for graph in (no_crop, whole_crop):
        seen.clear()
        run(graph, imgs, iterations=2)
        assert all(w is None for w in seen), graph.__name__


def test_window_jobs_are_planned_once_per_shape_geometry_and_window(monkeypatch):
    """The kernel's job for a window is kept between batches (photo sizes recur): three batches of four
    images of two sizes plan two jobs, and the outputs stay those of the unwindowed pipeline."""
    from jaxdali.ops import resize as resize_module
    from jaxdali.ops.resample_plan import BoundedCache
    from jaxdali.pipeline import plan as plan_module

    monkeypatch.setattr(resize_module, "_WINDOW_JOBS", BoundedCache(16))
    planned = []
    original = resize_module.window_job
    monkeypatch.setattr(resize_module, "window_job", lambda *a, **k: planned.append(a[0]) or original(*a, **k))
    r = np.random.RandomState(4)
    imgs = [(r.rand(h, w, 3) * 255).astype(np.uint8) for h, w in [(60, 80), (80, 60), (60, 80), (80, 60)]]

    def graph(x):
        return fn.crop_mirror_normalize(fn.resize(x, resize_shorter=48), crop=(40, 40), dtype=types.FLOAT)

    fused = run(graph, imgs, iterations=3)[0]
    assert sorted(tuple(int(v) for v in shape) for shape in planned) == [(60, 80, 3), (80, 60, 3)]
    monkeypatch.setattr(plan_module, "window_pairs", lambda *plan_args: {})
    np.testing.assert_array_equal(fused.as_array(), run(graph, imgs, iterations=3)[0].as_array())


def test_windowed_resize_of_photos_equals_the_cut_full_resize():
    """Real photos through the fast path: windowed values are the full resize's, bit for bit."""
    from jaxdali.ops.resize import RESIZE

    if not os.path.isdir(FLOWERS):
        pytest.skip(f"shared photos not found at {os.path.abspath(FLOWERS)}")
    imgs = [read_rgb(p) for p in flower_paths(6)]
    full = run(lambda x: fn.resize(x, resize_shorter=256), imgs)[0]
    cut = run(lambda x: fn.crop_mirror_normalize(fn.resize(x, resize_shorter=256), crop=(224, 224),
                                                 dtype=types.UINT8, output_layout="HWC"), imgs)[0]
    for f, c in zip(full.samples(), cut.samples()):
        y, x = int(np.floor((f.shape[0] - 224) * 0.5 + 0.5)), int(np.floor((f.shape[1] - 224) * 0.5 + 0.5))
        np.testing.assert_array_equal(np.asarray(c), np.asarray(f)[y:y + 224, x:x + 224])
    assert RESIZE.name == "resize"


def test_recurring_geometries_reuse_their_taps_with_the_same_values(monkeypatch):
    """plan_resample keeps the taps of a geometry from its second appearance (in one batch or across
    batches) and hands out equal read-only arrays; geometries seen once are only remembered."""
    from jaxdali.ops import resample_plan as rp

    cache = rp._TapsCache(4)
    monkeypatch.setattr(rp, "_TAPS_CACHE", cache)
    linear = int(types.DALIInterpType.INTERP_LINEAR)

    def plan(heights):
        n = len(heights)
        shapes = np.array([[h, 500, 3] for h in heights])
        lo, hi = np.zeros((n, 2)), shapes[:, :2].astype(np.float64)
        return rp.plan_resample(shapes, np.uint8, (0, 1), np.array([[200, 224]] * n), lo, hi, np.full(n, linear),
                                np.full(n, linear), True)

    def kept_heights():  # the H axis's entries (accumulated positions): (filter, antialias, True, in, ...)
        return sorted(key[3] for key in cache.entries.keys() if key[2])

    fresh = plan([375, 333, 301])  # three different heights: remembered, none kept (the shared W axis is)
    assert kept_heights() == []
    again = plan([375, 333, 333])  # 375 comes back, 333 appears twice: both kept
    assert kept_heights() == [333.0, 375.0]
    for before, after in ((fresh[0], again[0]), (fresh[1], again[1]), (fresh[1], again[2])):
        for axis in (0, 1):
            for x, y in zip(before.taps[axis], after.taps[axis]):
                np.testing.assert_array_equal(x, y)
    [third] = plan([375])
    assert third.taps[0][0] is cache.get((linear, True, True, 375.0, 200.0, 0.0, 375.0))[0]
    assert not any(array.flags.writeable for array in third.taps[0])
    plan([100, 100, 110, 110, 120, 120])  # more recurring geometries than it holds: the oldest go
    assert len(cache.entries) == 4 and kept_heights() == [100.0, 110.0, 120.0]
