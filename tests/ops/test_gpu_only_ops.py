"""The operators DALI 2.4 runs on the GPU only: jitter, experimental.median_blur, dilate, erode, remap.

DALI offers no CPU oracle for them, so each is checked on real photos against an independent reference
written here (SciPy's median filter; NumPy sliding-window maximum/minimum, interpolation and gathers),
following the semantics of DALI's implementation (CV-CUDA, NPP, its displacement filter), and its
schema (argument names, defaults, argument inputs) is compared with the installed DALI's.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
import scipy.ndimage  # installed with scikit-learn (the test extra)
from PIL import Image

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.schema import COMMON_ARGS, OpArgumentError, registry
from tests.run_once import fed, run_once

COVERED_OPERATORS = ("jitter", "experimental.median_blur", "experimental.dilate", "experimental.erode",
                     "experimental.remap")

FLOWERS = pathlib.Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "flowers"


@pytest.fixture(scope="module")
def photos() -> list[np.ndarray]:
    """Three real photos of different sizes, reduced (uint8 HWC)."""
    files = sorted((FLOWERS / "roses").glob("*.jpg"))[:3]
    if len(files) < 3:
        pytest.skip(f"shared test photos not found at {FLOWERS}")
    out = []
    for path in files:
        with Image.open(path) as im:
            out.append(np.asarray(im.convert("RGB").reduce(3)))
    assert len({p.shape for p in out}) > 1
    return out


def run(make, inputs, layout="HWC", **kwargs) -> list[list[np.ndarray]]:
    return run_once(lambda: make(fed(inputs, layout)), batch_size=len(inputs), num_threads=2, **kwargs)[0]


# -- the schema, against DALI's ------------------------------------------------------------------------

DALI_SCHEMA_NAMES = {"jitter": "Jitter", "experimental.median_blur": "experimental__MedianBlur",
                     "experimental.dilate": "experimental__Dilate", "experimental.erode": "experimental__Erode",
                     "experimental.remap": "experimental__Remap"}


def _dali_default(schema, name: str):
    """DALI's default of an argument as a Python value ('[3, 3, ]' -> (3, 3); enums as ints)."""
    text = schema.GetArgumentDefaultValueString(name).strip("'")
    if text.startswith("["):
        return tuple(int(v) for v in text.strip("[]").split(",") if v.strip())
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return text


@pytest.mark.parametrize("name", COVERED_OPERATORS)
def test_arguments_defaults_and_inputs_match_dali(name):
    backend = pytest.importorskip("nvidia.dali.backend")
    dali = backend.GetSchema(DALI_SCHEMA_NAMES[name])
    ours = registry()[name]
    common = {a.name for a in COMMON_ARGS}   # seed, preserve, bytes_per_sample_hint: every operator's
    assert {a.name for a in ours.args} == set(dali.GetArgumentNames()) - common
    assert (ours.min_inputs, ours.max_inputs) == (dali.MinNumInput(), dali.MaxNumInput())
    assert "gpu" in ours.devices
    for arg in ours.args:
        assert arg.tensor == dali.IsTensorArgument(arg.name), arg.name
        expected = _dali_default(dali, arg.name)
        value = arg.default
        if isinstance(value, tuple):
            assert value == expected, arg.name
        elif hasattr(value, "value"):  # DALIInterpType
            assert int(value.value) == expected, arg.name
        else:
            assert value == expected or float(value) == expected, (arg.name, value, expected)


# -- median_blur -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("window", [[3, 3], [5, 5], [7, 7], [5, 3], [1, 9]])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_median_blur_equals_scipy_median_filter_with_replicated_edges(photos, window, dtype):
    images = [p.astype(dtype) for p in photos]
    (out,) = run(lambda x: fn.experimental.median_blur(x, window_size=window), images)
    width, height = window
    for image, got in zip(images, out):
        assert got.dtype == image.dtype and got.shape == image.shape
        np.testing.assert_array_equal(got, scipy.ndimage.median_filter(image, size=(height, width, 1),
                                                                        mode="nearest"))


def test_median_blur_filters_planar_images_sequences_and_uint16(photos):
    chw = np.ascontiguousarray(photos[0].transpose(2, 0, 1)).astype(np.uint16) * 200
    seq = np.stack([photos[0], photos[0][::-1]])
    (planar,) = run(lambda x: fn.experimental.median_blur(x, window_size=[3, 5]), [chw], layout="CHW")
    (frames,) = run(lambda x: fn.experimental.median_blur(x, window_size=[5, 5]), [seq], layout="FHWC")
    np.testing.assert_array_equal(planar[0], scipy.ndimage.median_filter(chw, size=(1, 5, 3), mode="nearest"))
    np.testing.assert_array_equal(frames[0], scipy.ndimage.median_filter(seq, size=(1, 5, 5, 1), mode="nearest"))


def test_median_blur_window_can_vary_per_sample(photos):
    windows = [np.array([3, 3], np.int32), np.array([7, 5], np.int32), np.array([1, 1], np.int32)]
    (out,) = run(lambda x: fn.experimental.median_blur(x, window_size=fed(windows, "")), photos)
    for image, got, (w, h) in zip(photos, out, windows):
        np.testing.assert_array_equal(got, scipy.ndimage.median_filter(image, size=(h, w, 1), mode="nearest"))


# -- dilate and erode ------------------------------------------------------------------------------------

_PAD_MODES = {"replicate": "edge", "reflect": "symmetric", "reflect_101": "reflect", "wrap": "wrap"}


def reference_morphology(image: np.ndarray, dilate: bool, size, anchor, iterations: int, border: str) -> np.ndarray:
    """Max/min over the (height, width) window whose (anchor_y, anchor_x) element sits on the pixel."""
    (width, height), (ax, ay) = size, anchor
    out = image
    for _ in range(iterations):
        pad = ((ay, height - 1 - ay), (ax, width - 1 - ax), (0, 0))
        if border == "constant":
            info = np.finfo(image.dtype) if image.dtype.kind == "f" else np.iinfo(image.dtype)
            value = (info.tiny if image.dtype.kind == "f" else info.min) if dilate else info.max
            padded = np.pad(out, pad, mode="constant", constant_values=value)
        else:
            padded = np.pad(out, pad, mode=_PAD_MODES[border])
        windows = np.lib.stride_tricks.sliding_window_view(padded, (height, width), axis=(0, 1))
        out = windows.max(axis=(-2, -1)) if dilate else windows.min(axis=(-2, -1))
    return out


@pytest.mark.parametrize("op", ["dilate", "erode"])
@pytest.mark.parametrize("border", ["constant", "replicate", "reflect", "reflect_101", "wrap"])
def test_morphology_equals_a_sliding_window_max_min(photos, op, border):
    kwargs = dict(mask_size=[5, 3], anchor=[1, 2], iterations=2, border_mode=border)
    (out,) = run(lambda x: getattr(fn.experimental, op)(x, **kwargs), photos)
    for image, got in zip(photos, out):
        assert got.dtype == image.dtype and got.shape == image.shape
        np.testing.assert_array_equal(got, reference_morphology(image, op == "dilate", (5, 3), (1, 2), 2, border))


def test_morphology_defaults_float_images_and_per_sample_masks(photos):
    floats = [p.astype(np.float32) / 255 - 0.5 for p in photos]   # negative values reach the border
    masks = [np.array(m, np.int32) for m in ([3, 3], [1, 7], [-1, -1])]
    (dil, ero, per_sample) = run(lambda x: (fn.experimental.dilate(x), fn.experimental.erode(x),
                                            fn.experimental.dilate(x, mask_size=fed(masks, ""))), floats)
    for image, d, e, p, m in zip(floats, dil, ero, per_sample, ([3, 3], [1, 7], [3, 3])):
        np.testing.assert_array_equal(d, reference_morphology(image, True, (3, 3), (1, 1), 1, "constant"))
        np.testing.assert_array_equal(e, reference_morphology(image, False, (3, 3), (1, 1), 1, "constant"))
        np.testing.assert_array_equal(p, reference_morphology(image, True, m, (m[0] // 2, m[1] // 2), 1, "constant"))
    # CV-CUDA's constant border of a float dilation is the smallest positive normal float, not -inf
    (negative,) = run(lambda x: fn.experimental.dilate(x), [np.full((4, 5, 1), -1.0, np.float32)])
    assert (negative[0][1:-1, 1:-1] == -1).all()
    assert (negative[0][[0, -1]] == np.finfo(np.float32).tiny).all()


def test_morphology_of_planar_images_and_sequences(photos):
    chw = np.ascontiguousarray(photos[1].transpose(2, 0, 1))
    seq = np.stack([photos[1], photos[1][:, ::-1]])
    (planar,) = run(lambda x: fn.experimental.erode(x, mask_size=[3, 5]), [chw], layout="CHW")
    (frames,) = run(lambda x: fn.experimental.dilate(x, border_mode="reflect"), [seq], layout="FHWC")
    expected = reference_morphology(chw.transpose(1, 2, 0), False, (3, 5), (1, 2), 1, "constant")
    np.testing.assert_array_equal(planar[0], expected.transpose(2, 0, 1))
    for frame, got in zip(seq, frames[0]):
        np.testing.assert_array_equal(got, reference_morphology(frame, True, (3, 3), (1, 1), 1, "reflect"))


# -- remap -----------------------------------------------------------------------------------------------

def bilinear_zero_border(image: np.ndarray, mx: np.ndarray, my: np.ndarray) -> np.ndarray:
    """Bilinear interpolation at (mx, my) in OpenCV's convention (pixel centres on integers), zeros outside."""
    h, w = image.shape[:2]
    padded = np.zeros((h + 4, w + 4) + image.shape[2:], np.float64)
    padded[2:-2, 2:-2] = image
    x = np.clip(mx.astype(np.float64), -2, w + 1) + 2
    y = np.clip(my.astype(np.float64), -2, h + 1) + 2
    x0, y0 = np.floor(x).astype(int), np.floor(y).astype(int)
    fx, fy = (x - x0)[..., None], (y - y0)[..., None]
    x1, y1 = np.minimum(x0 + 1, w + 3), np.minimum(y0 + 1, h + 3)
    top = padded[y0, x0] * (1 - fx) + padded[y0, x1] * fx
    bottom = padded[y1, x0] * (1 - fx) + padded[y1, x1] * fx
    return top * (1 - fy) + bottom * fy


def _random_maps(image: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A smooth warp plus noise that also points outside the image."""
    h, w = image.shape[:2]
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    mx = x * 1.1 - 3 + 4 * np.sin(y / 9) + rng.uniform(-0.5, 0.5, (h, w))
    my = y * 0.95 + 2 + 3 * np.cos(x / 7) + rng.uniform(-0.5, 0.5, (h, w))
    return mx.astype(np.float32), my.astype(np.float32)


def test_remap_nearest_takes_the_pixel_containing_the_point(photos):
    maps = [_random_maps(p, i) for i, p in enumerate(photos)]
    (corner, center) = run(lambda x: (
        fn.experimental.remap(x, fed([m[0] for m in maps], "HW"), fed([m[1] for m in maps], "HW"),
                              interp=types.INTERP_NN),
        fn.experimental.remap(x, fed([m[0] for m in maps], "HW"), fed([m[1] for m in maps], "HW"),
                              interp=types.INTERP_NN, pixel_origin="center")), photos)
    for image, (mx, my), got_corner, got_center in zip(photos, maps, corner, center):
        h, w = image.shape[:2]
        for got, (cx, cy) in ((got_corner, (np.floor(mx), np.floor(my))),
                              (got_center, (np.floor(mx + 0.5), np.floor(my + 0.5)))):
            inside = (cx >= 0) & (cx < w) & (cy >= 0) & (cy < h)
            expected = np.zeros_like(image)
            expected[inside] = image[cy[inside].astype(int), cx[inside].astype(int)]
            assert inside.mean() > 0.8 and (~inside).any()
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_remap_linear_is_bilinear_interpolation_with_a_zero_border(photos, dtype):
    images = [p.astype(dtype) for p in photos]
    maps = [_random_maps(p, 10 + i) for i, p in enumerate(photos)]
    (out,) = run(lambda x: fn.experimental.remap(x, fed([m[0] for m in maps], "HW"),
                                                 fed([m[1] for m in maps], "HW")), images)
    for image, (mx, my), got in zip(images, maps, out):
        assert got.dtype == image.dtype and got.shape == image.shape
        expected = bilinear_zero_border(image, mx - 0.5, my - 0.5)     # corner origin
        diff = np.abs(got.astype(np.float64) - expected)
        # OpenCV quantises the position to 1/32 pixel: a few units on the sharpest edges, ~0.3 on average
        assert diff.mean() < 0.5 and np.percentile(diff, 99) <= 3.0 and diff.max() <= 12, (diff.mean(), diff.max())


def test_remap_identity_maps_sequences_and_one_channel(photos):
    image = photos[0]
    h, w = image.shape[:2]
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    seq = np.stack([image, image[::-1]])
    gray = np.ascontiguousarray(image[..., :1])
    (same, cubic, frames, one) = run_once(lambda: (
        fn.experimental.remap(fed([image]), fed([x + 0.5], "HW"), fed([y + 0.5], "HW")),
        fn.experimental.remap(fed([image]), fed([x], "HW"), fed([y], "HW"), interp=types.INTERP_CUBIC,
                              pixel_origin="center"),
        fn.experimental.remap(fed([seq], "FHWC"), fed([np.stack([x + 0.5, w - 0.5 - x])], "FHW"),
                              fed([np.stack([y + 0.5, y + 0.5])], "FHW"), interp=types.INTERP_NN),
        fn.experimental.remap(fed([gray]), fed([(x + 0.5)[..., None]], "HWC"), fed([y[..., None]], "HWC"),
                              pixel_origin="center")), batch_size=1)[0]
    np.testing.assert_array_equal(same[0], image)
    np.testing.assert_array_equal(cubic[0], image)
    np.testing.assert_array_equal(frames[0][0], image)
    np.testing.assert_array_equal(frames[0][1], image[::-1, ::-1])
    expected = bilinear_zero_border(gray, x + 0.5, y)   # half way between horizontal neighbours
    assert one[0].shape == gray.shape and np.abs(one[0] - expected).max() <= 1


# -- jitter ----------------------------------------------------------------------------------------------

def _coordinates(h: int, w: int) -> np.ndarray:
    """A float32 image whose pixel (y, x) holds (y, x, y * w + x): each output pixel names its source."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    return np.stack([y, x, y * w + x], axis=-1)


@pytest.mark.parametrize("degree", [2, 3, 6])
def test_jitter_moves_every_pixel_within_the_degree_and_keeps_its_channels_together(degree):
    h, w = 60, 80
    image = _coordinates(h, w)
    (out,) = run(lambda x: fn.jitter(x, nDegree=degree, seed=3), [image, image])
    lo, hi = -(degree // 2), degree - 1 - degree // 2
    y, x = np.mgrid[0:h, 0:w]
    for got in out:
        sy, sx = got[..., 0], got[..., 1]
        np.testing.assert_array_equal(got[..., 2], sy * w + sx)    # one source pixel for all channels
        dy, dx = sy - y, sx - x
        interior = (y >= degree) & (y < h - degree) & (x >= degree) & (x < w - degree)
        for d in (dx, dy):
            assert d.min() >= lo and d.max() <= hi
            counts = np.bincount((d[interior] - lo).astype(int), minlength=degree)
            assert len(counts) == degree and counts.min() > 0.7 * interior.sum() / degree   # uniform
        # clamped into the image: the edge pixels are sources more often, never outside
        assert sy.min() == 0 and sy.max() == h - 1 and sx.min() == 0 and sx.max() == w - 1
    assert not np.array_equal(out[0], out[1])   # each sample draws its own offsets


def test_jitter_moves_wide_pixels_whole():
    image = np.concatenate([_coordinates(30, 40)] * 2, axis=-1)   # 6 channels: gathered with NumPy
    (out,) = run(lambda x: fn.jitter(x, nDegree=3, seed=4), [image])
    np.testing.assert_array_equal(out[0][..., :3], out[0][..., 3:])
    y, x = np.mgrid[0:30, 0:40]
    for source, position in ((out[0][..., 0], y), (out[0][..., 1], x)):
        assert set(np.unique(source - position)) == {-1.0, 0.0, 1.0}


def test_jitter_with_a_degree_beyond_the_image_clamps_to_its_edges():
    image = _coordinates(20, 30)
    (out,) = run(lambda x: fn.jitter(x, nDegree=70000, seed=2), [image])
    sy, sx = out[0][..., 0], out[0][..., 1]
    np.testing.assert_array_equal(out[0][..., 2], sy * 30 + sx)
    assert sy.min() >= 0 and sy.max() <= 19 and sx.min() >= 0 and sx.max() <= 29
    assert np.isin(sy, (0, 19)).mean() > 0.97 and np.isin(sx, (0, 29)).mean() > 0.97   # most draws overshoot


def test_jitter_output_pixels_are_input_pixels_of_the_neighbourhood(photos):
    (out, masked) = run(lambda x: (fn.jitter(x), fn.jitter(x, mask=fed([np.int32(1), np.int32(0), np.int32(1)], ""))),
                        photos)
    for image, got, kept in zip(photos, out, masked):
        assert got.dtype == np.uint8 and got.shape == image.shape
        padded = np.pad(image, ((1, 0), (1, 0), (0, 0)), mode="edge")
        candidates = [padded[1 + dy:1 + dy + image.shape[0], 1 + dx:1 + dx + image.shape[1]]
                      for dy in (-1, 0) for dx in (-1, 0)]
        assert np.any([np.all(got == c, axis=-1) for c in candidates], axis=0).all()
        assert not np.array_equal(got, image)
    np.testing.assert_array_equal(masked[1], photos[1])
    assert not np.array_equal(masked[0], photos[0])


def _jitter_pipe(checkpoint=None, seed=11):
    image = _coordinates(20, 30)

    @pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=seed, enable_checkpointing=True,
                  checkpoint=checkpoint)
    def pipe():
        return fn.jitter(fn.external_source(source=lambda iteration: [image] * 3, layout="HWC"), nDegree=4)

    return pipe()


def test_jitter_is_deterministic_and_resumes_from_a_checkpoint():
    original = _jitter_pipe()
    first = [np.asarray(original.run()[0].at(i)) for i in range(3)]
    checkpoint = original.checkpoint()
    expected = [[np.asarray(original.run()[0].at(i)) for i in range(3)] for _ in range(2)]
    assert not np.array_equal(first[0], expected[0][0])     # iterations differ
    restored = _jitter_pipe(checkpoint)
    for batch in expected:
        for i in range(3):
            np.testing.assert_array_equal(np.asarray(restored.run()[0].at(i)), batch[i])
    again = _jitter_pipe()
    np.testing.assert_array_equal(np.asarray(again.run()[0].at(0)), first[0])
    assert not np.array_equal(np.asarray(_jitter_pipe(seed=12).run()[0].at(0)), first[0])


# -- errors ----------------------------------------------------------------------------------------------

RGB = np.random.default_rng(0).integers(0, 256, (8, 10, 3), dtype=np.uint8)
MAP = np.zeros((8, 10), np.float32)


@pytest.mark.parametrize("make,inputs,match", [
    (lambda x: fn.experimental.median_blur(x, window_size=[4, 3]), [RGB],
     r"fn.experimental.median_blur: argument 'window_size' must be odd and positive, got \[4, 3\] for sample 0"),
    (lambda x: fn.experimental.median_blur(x, window_size=5), [RGB],
     "fn.experimental.median_blur: argument 'window_size' must have 2 values"),
    (lambda x: fn.experimental.median_blur(x), [RGB.astype(np.int32)], "fn.experimental.median_blur: unsupported input"),
    (lambda x: fn.experimental.median_blur(x), [np.zeros((4, 4, 5), np.uint8)],
     "fn.experimental.median_blur: interleaved images may have at most 4 channels"),
    (lambda x: fn.experimental.dilate(x, mask_size=[0, 3]), [RGB], "fn.experimental.dilate: argument 'mask_size'"),
    (lambda x: fn.experimental.erode(x, anchor=[3, 0]), [RGB],
     r"fn.experimental.erode: argument 'anchor' \[3, 0\] lies outside the mask"),
    (lambda x: fn.experimental.erode(x, border_mode="mirror"), [RGB], "fn.experimental.erode: argument 'border_mode'"),
    (lambda x: fn.experimental.dilate(x, iterations=0), [RGB], "fn.experimental.dilate: argument 'iterations'"),
    (lambda x: fn.jitter(x, nDegree=0), [RGB], "fn.jitter: argument 'nDegree' must be >= 1"),
    (lambda x: fn.jitter(x, interp_type=types.INTERP_CUBIC), [RGB], "fn.jitter: argument 'interp_type'"),
    (lambda x: fn.jitter(x), [RGB.astype(np.int16)], "fn.jitter: unsupported input type int16"),
    (lambda x: fn.experimental.remap(x, fed([MAP], ""), fed([MAP[:4]], "")), [RGB],
     r"fn.experimental.remap: input 'mapy' must hold a map of the image's height and width \[8, 10\]"),
    (lambda x: fn.experimental.remap(x, fed([MAP.astype(np.float64)], ""), fed([MAP], "")), [RGB],
     "fn.experimental.remap: input 'mapx' must be float32"),
    (lambda x: fn.experimental.remap(x, fed([MAP], ""), fed([MAP], "")), [RGB[..., :2].copy()],
     "fn.experimental.remap: images must have 1 or 3 channels"),
    (lambda x: fn.experimental.remap(x, fed([MAP], ""), fed([MAP], ""), interp=types.INTERP_LANCZOS3), [RGB],
     "fn.experimental.remap: argument 'interp'"),
    (lambda x: fn.experimental.remap(x, fed([MAP], ""), fed([MAP], ""), pixel_origin="middle"), [RGB],
     "fn.experimental.remap: argument 'pixel_origin'"),
])
def test_bad_input_names_the_operator_and_the_argument(make, inputs, match):
    with pytest.raises((OpArgumentError, ValueError, TypeError), match=match):
        run(make, inputs)


@pytest.mark.parametrize("op", ["median_blur", "dilate"])
def test_unsupported_layout_is_refused(op):
    with pytest.raises(ValueError, match=f"fn.experimental.{op}: .*layout"):
        run(lambda x: getattr(fn.experimental, op)(x), [RGB], layout="WHC")
