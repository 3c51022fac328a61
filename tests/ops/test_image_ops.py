"""Image operators of issue 22 (``jaxdali/ops/image``): errors and properties that need no DALI.

Values are compared against DALI in ``tests/differential/test_ops_image.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.schema import OpArgumentError
from tests.run_once import fed, run_once


def run_pipe(make, inputs, layout="HWC", device_id=None, batch_size=None):
    """Feeds ``inputs`` (one batch) through ``make(x)``; returns each output as a list of NumPy samples."""
    return run_once(lambda: make(fed(inputs, layout)), batch_size=batch_size or len(inputs), device_id=device_id,
                    num_threads=2)[0]

rng = np.random.default_rng(0)
RGB = rng.integers(0, 256, (6, 7, 3), dtype=np.uint8)
GRAY = RGB[..., :1].copy()


# -- brightness, contrast, hue, saturation ---------------------------------------------------------------

def test_brightness_and_contrast_equal_brightness_contrast():
    (b, c, bc) = run_pipe(lambda x: (fn.brightness(x, brightness=1.4, brightness_shift=0.1),
                                     fn.contrast(x, contrast=0.6, contrast_center=90.0),
                                     fn.brightness_contrast(x, brightness=1.4, brightness_shift=0.1)), [RGB, GRAY])
    np.testing.assert_array_equal(b[0], bc[0])
    np.testing.assert_array_equal(b[1], bc[1])   # any number of channels
    expected = np.clip(np.floor(90 + 0.6 * (RGB.astype(np.float64) - 90) + 0.5), 0, 255)
    assert np.abs(c[0].astype(int) - expected).max() <= 1


def test_hue_and_saturation_equal_hsv_and_keep_the_input_type():
    f = (RGB / np.float32(255)).astype(np.float32)
    (h, s, hsv_h, hsv_s) = run_pipe(lambda x: (fn.hue(x, hue=50.0), fn.saturation(x, saturation=0.2),
                                               fn.hsv(x, hue=50.0, dtype=types.FLOAT),
                                               fn.hsv(x, saturation=0.2, dtype=types.FLOAT)), [f])
    assert h[0].dtype == s[0].dtype == np.float32
    # hue/saturation sum the matrix products with OpenCV's fused multiply-adds: the last bit may differ
    np.testing.assert_allclose(h[0], hsv_h[0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(s[0], hsv_s[0], rtol=0, atol=1e-6)


@pytest.mark.parametrize("op", ["hue", "saturation"])
def test_hue_and_saturation_refuse_one_channel(op):
    with pytest.raises(ValueError, match=f"fn.{op}: expects 3-channel RGB"):
        run_pipe(lambda x: getattr(fn, op)(x), [GRAY])


@pytest.mark.parametrize("make,match", [
    (lambda x: fn.brightness(x, brightness="bright"), "fn.brightness: argument 'brightness'"),
    (lambda x: fn.contrast(x, dtype=types.INT8), "fn.contrast: .*INT8"),
    (lambda x: fn.hue(x, angle=3.0), "fn.hue.*'angle'"),
])
def test_color_adjustment_argument_errors_name_operator_and_argument(make, match):
    with pytest.raises((OpArgumentError, TypeError, ValueError), match=match):
        run_pipe(make, [RGB])


def test_color_adjustments_on_the_device_equal_the_host():
    host = run_pipe(lambda x: (fn.brightness(x, brightness=1.3), fn.hue(x, hue=20.0)), [RGB, RGB], device_id=0)
    dev = run_pipe(lambda x: (fn.brightness(x.gpu(), brightness=1.3), fn.hue(x.gpu(), hue=20.0)), [RGB, RGB],
                   device_id=0)
    for a, b in zip(host, dev):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op", ["brightness", "contrast", "hue", "saturation"])
def test_color_adjustments_on_the_device_take_per_sample_tensor_arguments(op):
    """A per-sample argument input (as auto_aug passes its magnitudes) on the device: traced, not NumPy."""
    def make(x, device):
        factor = fn.external_source(source=lambda: [np.float32(0.5), np.float32(1.4)], batch=True)
        return getattr(fn, op)(x.gpu() if device == "gpu" else x, **{op: factor})

    (host,) = run_pipe(lambda x: make(x, "cpu"), [RGB, RGB], device_id=0)
    (dev,) = run_pipe(lambda x: make(x, "gpu"), [RGB, RGB], device_id=0)
    assert not np.array_equal(host[0], host[1])
    for a, b in zip(host, dev):
        assert np.abs(a.astype(int) - b.astype(int)).max() <= 1


# -- color_space_conversion ------------------------------------------------------------------------------

def test_color_space_conversion_round_trip_and_sequences():
    def to(x, src, dst):
        return fn.color_space_conversion(x, image_type=getattr(types, src), output_type=getattr(types, dst))

    (ycc, back, gray) = run_pipe(lambda x: (to(x, "RGB", "YCbCr"), to(to(x, "RGB", "YCbCr"), "YCbCr", "RGB"),
                                            to(x, "RGB", "GRAY")), [RGB])
    assert ycc[0].dtype == np.uint8 and 16 <= ycc[0][..., 0].min() and ycc[0][..., 0].max() <= 235
    assert np.abs(back[0].astype(int) - RGB).max() <= 2
    (gray_seq,) = run_pipe(lambda x: to(x, "RGB", "GRAY"), [np.stack([RGB, RGB[::-1]])], layout="FHWC")
    assert gray_seq[0].shape == (2, 6, 7, 1)
    np.testing.assert_array_equal(gray_seq[0][0], gray[0])
    np.testing.assert_array_equal(gray_seq[0][1], gray[0][::-1])


@pytest.mark.parametrize("make,inputs,error,match", [
    (lambda x: fn.color_space_conversion(x, image_type=types.RGB, output_type=types.RGB), [RGB], OpArgumentError,
     "fn.color_space_conversion: conversion from image_type=RGB to output_type=RGB"),
    (lambda x: fn.color_space_conversion(x, image_type=types.RGB), [RGB], OpArgumentError,
     "fn.color_space_conversion.*output_type"),
    (lambda x: fn.color_space_conversion(x, image_type=types.GRAY, output_type=types.RGB), [RGB], ValueError,
     "fn.color_space_conversion: sample 0 has 3 channels; image_type=GRAY needs 1"),
    (lambda x: fn.color_space_conversion(x, image_type=types.RGB, output_type=types.BGR), [RGB.astype(np.float32)],
     TypeError, "fn.color_space_conversion: input must be uint8"),
])
def test_color_space_conversion_errors(make, inputs, error, match):
    with pytest.raises(error, match=match):
        run_pipe(make, inputs)


# -- gaussian_blur ---------------------------------------------------------------------------------------

def test_gaussian_blur_keeps_a_constant_image_and_sums_to_the_input():
    flat = np.full((9, 11, 3), 77, np.uint8)
    impulse = np.zeros((15, 15), np.float32)
    impulse[7, 7] = 1.0
    (a,) = run_pipe(lambda x: fn.gaussian_blur(x, sigma=2.0), [flat])
    np.testing.assert_array_equal(a[0], flat)
    (b,) = run_pipe(lambda x: fn.gaussian_blur(x, sigma=[0.5, 1.5]), [impulse], layout="HW")
    assert abs(float(b[0].sum()) - 1.0) < 1e-5
    assert b[0][7].std() > b[0][:, 7].std()   # the second sigma is W's: wider along the row


@pytest.mark.parametrize("kwargs,match", [
    ({}, "fn.gaussian_blur: give 'sigma' or 'window_size'"),
    ({"window_size": 4}, "fn.gaussian_blur: argument 'window_size' must be odd"),
    ({"sigma": -1.0}, "fn.gaussian_blur: argument 'sigma' must be >= 0"),
    ({"sigma": [1.0, 2.0, 3.0]}, "fn.gaussian_blur: argument 'sigma' has 3 values for sample 0"),
    ({"sigma": 1.0, "dtype": types.INT16}, "fn.gaussian_blur: argument 'dtype' must be FLOAT"),
])
def test_gaussian_blur_errors(kwargs, match):
    with pytest.raises((OpArgumentError, ValueError), match=match):
        run_pipe(lambda x: fn.gaussian_blur(x, **kwargs), [RGB])


def test_gaussian_blur_refuses_an_unknown_layout():
    with pytest.raises(ValueError, match="fn.gaussian_blur: .*layout"):
        run_pipe(lambda x: fn.gaussian_blur(x, sigma=1.0), [RGB], layout="WHC")


# -- noise.* ---------------------------------------------------------------------------------------------

NOISE = {
    "gaussian": lambda x: fn.noise.gaussian(x, stddev=20.0),
    "shot": lambda x: fn.noise.shot(x, factor=3.0),
    "salt_and_pepper": lambda x: fn.noise.salt_and_pepper(x, prob=0.3),
}


def _noise_pipe(make, checkpoint=None, seed=11):
    @pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=seed, enable_checkpointing=True,
                  checkpoint=checkpoint)
    def pipe():
        return make(fn.external_source(source=lambda iteration: [RGB, RGB, RGB[::-1]], layout="HWC"))

    return pipe()


@pytest.mark.parametrize("kind", sorted(NOISE))
def test_noise_is_deterministic_per_sample_and_iteration_and_resumes_from_a_checkpoint(kind):
    original = _noise_pipe(NOISE[kind])
    first = [np.asarray(original.run()[0].at(i)) for i in range(3)]
    checkpoint = original.checkpoint()
    expected = [[np.asarray(original.run()[0].at(i)) for i in range(3)] for _ in range(2)]
    assert not np.array_equal(first[0], first[1])          # samples differ
    assert not np.array_equal(first[0], expected[0][0])    # iterations differ
    restored = _noise_pipe(NOISE[kind], checkpoint)
    for batch in expected:
        for i in range(3):
            np.testing.assert_array_equal(np.asarray(restored.run()[0].at(i)), batch[i])
    assert not np.array_equal(np.asarray(_noise_pipe(NOISE[kind], seed=12).run()[0].at(0)), first[0])


def test_noise_keeps_shape_and_type_and_saturates():
    f = np.linspace(0, 1, 60, dtype=np.float32).reshape(4, 5, 3)
    (g, s, sp) = run_pipe(lambda x: (fn.noise.gaussian(x, stddev=500.0), fn.noise.shot(x, factor=0.0),
                                     fn.noise.salt_and_pepper(x, prob=1.0, salt_vs_pepper=0.0)), [RGB])
    assert g[0].dtype == np.uint8 and g[0].shape == RGB.shape and {0, 255} <= set(np.unique(g[0]))
    np.testing.assert_array_equal(s[0], RGB)   # factor 0: identity
    assert (sp[0] == 0).all()                  # all pepper: the type's minimum
    (fsp,) = run_pipe(lambda x: fn.noise.salt_and_pepper(x, prob=1.0, salt_vs_pepper=1.0), [f])
    assert fsp[0].dtype == np.float32 and (fsp[0] == 1.0).all()


@pytest.mark.parametrize("make,match", [
    (lambda x: fn.noise.gaussian(x, stddev=-1.0), "fn.noise.gaussian: argument 'stddev' must be >= 0"),
    (lambda x: fn.noise.salt_and_pepper(x, prob=1.5), r"fn.noise.salt_and_pepper: argument 'prob' must be in \[0, 1\]"),
    (lambda x: fn.noise.salt_and_pepper(x, salt_vs_pepper=-0.1), "fn.noise.salt_and_pepper: argument 'salt_vs_pepper'"),
    (lambda x: fn.noise.shot(x, factor="many"), "fn.noise.shot: argument 'factor'"),
])
def test_noise_errors(make, match):
    with pytest.raises((OpArgumentError, ValueError, TypeError), match=match):
        run_pipe(make, [RGB])


# -- erase -----------------------------------------------------------------------------------------------

def test_erase_fills_only_the_clipped_region_on_ragged_batches():
    small = RGB[:4, :5]
    (out,) = run_pipe(lambda x: fn.erase(x, anchor=[2, 3], shape=[10, 10], fill_value=[1, 2, 3]), [RGB, small])
    expected = RGB.copy()
    expected[2:, 3:] = [1, 2, 3]
    np.testing.assert_array_equal(out[0], expected)
    assert out[1].shape == small.shape and (out[1][2:, 3:] == [1, 2, 3]).all() and (out[1][:2] == small[:2]).all()


@pytest.mark.parametrize("kwargs,match", [
    ({"anchor": [1, 1]}, "fn.erase: 'anchor' .2 values. and 'shape' .0 values."),
    ({"anchor": [1, 1], "shape": [2, 2, 2]}, "fn.erase: 'anchor' .2 values. and 'shape' .3 values."),
    ({"shape": [2, 2], "fill_value": [1, 2]}, "fn.erase: 'fill_value' has 2 values but sample 0 has 3 channels"),
    ({"shape": [2], "axis_names": "D"}, "fn.erase: argument 'axis_names' 'D'"),
    ({"shape": [2], "axes": [5]}, "fn.erase: argument 'axes' has \\[5\\]"),
    ({"shape": [2], "axes": [0], "axis_names": "H"}, "fn.erase: arguments 'axes' and 'axis_names' are mutually"),
])
def test_erase_errors(kwargs, match):
    with pytest.raises((OpArgumentError, ValueError), match=match):
        run_pipe(lambda x: fn.erase(x, **kwargs), [RGB])


# -- grid_mask -------------------------------------------------------------------------------------------

def test_grid_mask_zeroes_the_expected_fraction():
    img = np.full((200, 300, 3), 50, np.uint8)
    (out,) = run_pipe(lambda x: fn.grid_mask(x, tile=20, ratio=0.5), [img])
    assert out[0].dtype == np.uint8 and abs((out[0] == 0).mean() - 0.25) < 1e-9
    assert (out[0][:10, :10] == 0).all() and (out[0][10:20, 10:20] == 50).all()


@pytest.mark.parametrize("kwargs,layout,data,match", [
    ({"tile": 0}, "HWC", RGB, "fn.grid_mask: argument 'tile' must be > 0, got 0 for sample 0"),
    ({"ratio": 1.5}, "HWC", RGB, r"fn.grid_mask: argument 'ratio' must be in \[0, 1\]"),
    ({}, "CHW", RGB, "fn.grid_mask: .*layout"),
])
def test_grid_mask_errors(kwargs, layout, data, match):
    with pytest.raises(ValueError, match=match):
        run_pipe(lambda x: fn.grid_mask(x, **kwargs), [data], layout=layout)


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_grid_mask_refuses_the_types_dali_refuses(dtype):
    """A type OpenCV cannot copy (int64) used to fail inside cv2.copyTo with an error naming no operator."""
    with pytest.raises(TypeError, match=f"fn.grid_mask: input must be uint8, int16, int32 or float32, got "
                                        f"{np.dtype(dtype).name}"):
        run_pipe(lambda x: fn.grid_mask(x), [RGB.astype(dtype)])


# -- equalize, jpeg_compression_distortion ---------------------------------------------------------------

def test_equalize_spreads_a_narrow_histogram_per_channel():
    narrow = (100 + RGB // 16).astype(np.uint8)   # values 100..115
    (out,) = run_pipe(lambda x: fn.equalize(x), [narrow])
    for c in range(3):
        assert out[0][..., c].max() == 255 and out[0][..., c].min() < 40
        # monotone: the order of the values is kept
        order = np.argsort(narrow[..., c].ravel(), kind="stable")
        assert (np.diff(out[0][..., c].ravel()[order].astype(int)) >= 0).all()


def test_jpeg_compression_distortion_degrades_with_lower_quality():
    smooth = np.broadcast_to(np.linspace(0, 255, 64, dtype=np.uint8)[None, :, None], (64, 64, 3)).copy()
    smooth[::7] = 255 - smooth[::7]
    (low, high) = run_pipe(lambda x: (fn.jpeg_compression_distortion(x, quality=5),
                                      fn.jpeg_compression_distortion(x, quality=95)), [smooth])
    err = [np.abs(o[0].astype(int) - smooth).mean() for o in (low, high)]
    assert err[0] > 2 * err[1] > 0


@pytest.mark.parametrize("make,data,error,match", [
    (lambda x: fn.equalize(x), RGB.astype(np.float32), TypeError, "fn.equalize: input must be uint8"),
    (lambda x: fn.experimental.equalize(x), RGB.astype(np.float32), TypeError,
     "fn.experimental.equalize: input must be uint8"),
    (lambda x: fn.jpeg_compression_distortion(x), GRAY, ValueError,
     "fn.jpeg_compression_distortion: expects RGB images .3 channels., sample 0 has 1"),
    (lambda x: fn.jpeg_compression_distortion(x, quality=0), RGB, ValueError,
     r"fn.jpeg_compression_distortion: argument 'quality' must be in \[1, 100\], got 0"),
    (lambda x: fn.jpeg_compression_distortion(x), RGB.astype(np.int16), TypeError,
     "fn.jpeg_compression_distortion: input must be uint8"),
])
def test_equalize_and_jpeg_errors(make, data, error, match):
    with pytest.raises(error, match=match):
        run_pipe(make, [data])


# -- experimental.warp_perspective -----------------------------------------------------------------------

def test_warp_perspective_identity_and_translation():
    shift = [1, 0, 2, 0, 1, 1, 0, 0, 1]   # output (x, y) samples input (x + 2, y + 1)
    (same, moved) = run_pipe(lambda x: (fn.experimental.warp_perspective(x, matrix=[1, 0, 0, 0, 1, 0, 0, 0, 1]),
                                        fn.experimental.warp_perspective(x, matrix=shift, interp_type=types.INTERP_NN)),
                             [RGB])
    np.testing.assert_array_equal(same[0], RGB)
    np.testing.assert_array_equal(moved[0][:-1, :-2], RGB[1:, 2:])
    assert (moved[0][-1] == 0).all()


@pytest.mark.parametrize("kwargs,data,error,match", [
    ({}, RGB, OpArgumentError, "fn.experimental.warp_perspective: give the matrix"),
    ({"matrix": [1, 0, 0, 0, 1, 0]}, RGB, ValueError, "must have 9 values .3x3., got 6 for sample 0"),
    ({"matrix": [1, 0, 0, 0, 1, 0, 0, 0, 1], "size": [5]}, RGB, ValueError, "argument 'size' must be 2"),
    ({"matrix": [1, 0, 0, 0, 1, 0, 0, 0, 1], "border_mode": "mirror"}, RGB, OpArgumentError, "border_mode"),
    ({"matrix": [1, 0, 0, 0, 1, 0, 0, 0, 1], "interp_type": types.INTERP_LANCZOS3}, RGB, OpArgumentError,
     "argument 'interp_type' must be INTERP_NN, INTERP_LINEAR or INTERP_CUBIC"),
    ({"matrix": [1, 0, 0, 0, 1, 0, 0, 0, 1]}, RGB.astype(np.int32), TypeError, "input type must be uint8"),
    ({"matrix": [1, 0, 0, 0, 1, 0, 0, 0, 1], "fill_value": [1, 2]}, RGB, ValueError, "'fill_value' has 2 values"),
])
def test_warp_perspective_errors(kwargs, data, error, match):
    with pytest.raises(error, match=match):
        run_pipe(lambda x: fn.experimental.warp_perspective(x, **kwargs), [data])


# -- laplacian -------------------------------------------------------------------------------------------

def test_laplacian_of_a_quadratic_ramp_is_constant_inside():
    y, x = np.mgrid[0:12, 0:15].astype(np.float32)
    ramp = (x * x + 2 * y * y)[..., None]       # d2/dx2 = 2, d2/dy2 = 4
    (out,) = run_pipe(lambda v: fn.laplacian(v, window_size=3, smoothing_size=1), [ramp])
    np.testing.assert_allclose(out[0][2:-2, 2:-2, 0], 6.0)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"window_size": 4}, ValueError, r"fn.laplacian: argument 'window_size' must be odd, in \[3, 23\]"),
    ({"window_size": 1}, ValueError, "fn.laplacian: argument 'window_size' must be odd"),
    ({"smoothing_size": 2}, ValueError, "fn.laplacian: argument 'smoothing_size' must be odd"),
    ({"window_size": [3, 3, 3]}, ValueError, "fn.laplacian: argument 'window_size' has 3 values"),
    ({"normalized_kernel": True, "scale": 2.0}, OpArgumentError, "'normalized_kernel' and 'scale' cannot both"),
    ({"dtype": types.INT32}, OpArgumentError, "fn.laplacian: argument 'dtype' must be FLOAT"),
])
def test_laplacian_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        run_pipe(lambda x: fn.laplacian(x, **kwargs), [RGB])


# -- filter ----------------------------------------------------------------------------------------------

def _with_filter(kernel, **kwargs):
    return lambda x: fn.filter(x, fn.external_source(source=lambda: [np.asarray(kernel, np.float32)]), **kwargs)


def test_filter_identity_shift_and_valid_mode():
    (same, shifted, valid) = run_pipe(lambda x: (_with_filter([[0, 0, 0], [0, 1, 0], [0, 0, 0]])(x),
                                                 _with_filter([[0, 0, 0], [0, 0, 1], [0, 0, 0]])(x),
                                                 _with_filter(np.ones((3, 3)) / 9, mode="valid",
                                                              dtype=types.FLOAT)(x)), [RGB])
    np.testing.assert_array_equal(same[0], RGB)
    np.testing.assert_array_equal(shifted[0][:, :-1], RGB[:, 1:])     # correlation: not flipped
    assert valid[0].shape == (4, 5, 3) and valid[0].dtype == np.float32
    np.testing.assert_allclose(valid[0][0, 0], RGB[:3, :3].reshape(-1, 3).mean(0), rtol=1e-5)


@pytest.mark.parametrize("make,match", [
    (lambda x: fn.filter(x), "fn.filter: needs the filter as its second input|expects at least 2 inputs|input"),
    (_with_filter([1, 2, 3]), "fn.filter: the filter must be a non-empty 2-D array, got shape \\(3,\\)"),
    (_with_filter(np.ones((3, 3)), anchor=[3, 0]), "fn.filter: argument 'anchor' \\[3, 0\\] lies outside"),
    (_with_filter(np.ones((3, 3)), dtype=types.INT32), "fn.filter: argument 'dtype' must be FLOAT or the input"),
    (_with_filter(np.ones((9, 9)), mode="valid"), "fn.filter: the filter \\(9, 9\\) is larger than sample 0"),
    (_with_filter(np.ones((3, 3)), border="mirror"), "fn.filter.*border"),
])
def test_filter_errors(make, match):
    with pytest.raises((OpArgumentError, ValueError, TypeError), match=match):
        run_pipe(make, [RGB])


# -- debayer ---------------------------------------------------------------------------------------------

def test_debayer_of_a_grey_mosaic_is_grey():
    flat = np.full((8, 10), 90, np.uint8)
    (rgb, gray) = run_pipe(lambda x: (fn.debayer(x, blue_position=[0, 1]),
                                      fn.debayer(x, blue_position=[0, 1], algorithm="gray_ocv")), [flat], layout="HW")
    assert rgb[0].shape == (8, 10, 3) and (rgb[0] == 90).all()
    assert gray[0].shape == (8, 10, 1) and (gray[0] == 90).all()


@pytest.mark.parametrize("kwargs,data,layout,error,match", [
    ({"blue_position": [0, 2]}, GRAY[:, :6], "HWC", ValueError,
     "fn.debayer: argument 'blue_position' must be 2 values"),
    ({"blue_position": [0, 0]}, RGB[:, :6], "HWC", ValueError,
     "fn.debayer: expects single-channel mosaics, sample 0 has 3"),
    ({"blue_position": [0, 0]}, GRAY.astype(np.float32), "HWC", TypeError, "fn.debayer: input must be uint8 or"),
    ({"blue_position": [0, 0], "algorithm": "vng_ocv"}, GRAY.astype(np.uint16), "HWC", TypeError, "vng_ocv"),
    ({"blue_position": [0, 0], "algorithm": "bilinear_npp"}, GRAY, "HWC", OpArgumentError, "algorithm"),
    ({}, GRAY, "HWC", OpArgumentError, "fn.debayer.*blue_position"),
    ({"blue_position": [0, 0]}, GRAY[:5], "HWC", ValueError, "fn.debayer: the height and width of a mosaic must be "
     "even, sample 0 is 5 x 7"),
])
def test_debayer_errors(kwargs, data, layout, error, match):
    with pytest.raises(error, match=match):
        run_pipe(lambda x: fn.debayer(x, **kwargs), [data], layout=layout)


# -- clahe -----------------------------------------------------------------------------------------------

def test_clahe_raises_local_contrast_of_a_dim_image():
    dim = (60 + RGB[..., 0] // 8).astype(np.uint8)   # values 60..91
    (out,) = run_pipe(lambda x: fn.clahe(x, tiles_x=2, tiles_y=2, clip_limit=40.0), [dim], layout="HW")
    assert out[0].shape == dim.shape and int(out[0].max()) - int(out[0].min()) > 2 * (int(dim.max()) - int(dim.min()))


@pytest.mark.parametrize("kwargs,data,error,match", [
    ({"tiles_x": 2, "tiles_y": 2, "clip_limit": 2.0, "bins": 128}, RGB, OpArgumentError, "'bins' must be 256"),
    ({"tiles_x": 0, "tiles_y": 2, "clip_limit": 2.0}, RGB, OpArgumentError, "fn.clahe: argument 'tiles_x' must be"),
    ({"tiles_x": 2, "tiles_y": 2, "clip_limit": 0.0}, RGB, OpArgumentError, "'clip_limit' must be > 0"),
    ({"tiles_x": 2, "tiles_y": 2, "clip_limit": 2.0}, RGB.astype(np.float32), TypeError, "input must be uint8"),
    ({"tiles_x": 2, "tiles_y": 2, "clip_limit": 2.0}, RGB[..., :2], ValueError, "expects 1 or 3 channels"),
    ({"tiles_x": 2, "tiles_y": 2}, RGB, OpArgumentError, "fn.clahe.*clip_limit"),
])
def test_clahe_errors(kwargs, data, error, match):
    with pytest.raises(error, match=match):
        run_pipe(lambda x: fn.clahe(x, **kwargs), [data])


# -- paste -----------------------------------------------------------------------------------------------

def test_paste_places_the_image_on_the_canvas():
    (out,) = run_pipe(lambda x: fn.paste(x, ratio=2.0, paste_x=1.0, paste_y=0.0, fill_value=[1, 2, 3]), [RGB])
    assert out[0].shape == (12, 14, 3)
    np.testing.assert_array_equal(out[0][:6, 7:], RGB)
    assert (out[0][6:] == [1, 2, 3]).all() and (out[0][:, :7] == [1, 2, 3]).all()


@pytest.mark.parametrize("kwargs,data,error,match", [
    ({"ratio": 0.5, "fill_value": 0}, RGB, ValueError, "fn.paste: argument 'ratio' must be >= 1, got 0.5"),
    ({"ratio": 2.0, "fill_value": 0, "paste_x": 1.5}, RGB, ValueError, r"'paste_x' must be in \[0, 1\]"),
    ({"ratio": 2.0, "fill_value": [1, 2]}, RGB, ValueError, "'fill_value' must have 1 or n_channels=3 values"),
    ({"ratio": 2.0, "fill_value": 0}, GRAY, ValueError, "fn.paste: sample 0 has 1 channels, n_channels is 3"),
    ({"ratio": 2.0}, RGB, OpArgumentError, "fn.paste.*fill_value"),
])
def test_paste_errors(kwargs, data, error, match):
    with pytest.raises(error, match=match):
        run_pipe(lambda x: fn.paste(x, **kwargs), [data])


# -- water, sphere ---------------------------------------------------------------------------------------

def test_water_without_amplitude_keeps_the_image_and_sphere_its_centre():
    (still, lens) = run_pipe(lambda x: (fn.water(x, ampl_x=0.0, ampl_y=0.0), fn.sphere(x)), [RGB])
    np.testing.assert_array_equal(still[0], RGB)
    assert lens[0].shape == RGB.shape and (lens[0][3, 3] == RGB[3, 3]).all() and not np.array_equal(lens[0], RGB)


@pytest.mark.parametrize("make,data,error,match", [
    (lambda x: fn.water(x, interp_type=types.INTERP_CUBIC), RGB, OpArgumentError,
     "fn.water: argument 'interp_type' must be INTERP_NN or INTERP_LINEAR"),
    (lambda x: fn.sphere(x), np.zeros((4, 4, 5), np.uint8), ValueError, "fn.sphere: at most 4 channels"),
    (lambda x: fn.sphere(x, mask="yes"), RGB, OpArgumentError, "fn.sphere: argument 'mask'"),
])
def test_water_and_sphere_errors(make, data, error, match):
    with pytest.raises(error, match=match):
        run_pipe(make, [data])


@pytest.mark.parametrize("name", ["water", "sphere"])
@pytest.mark.parametrize("dtype", [np.int16, np.int64, np.float64])
def test_water_and_sphere_refuse_the_types_dali_refuses(name, dtype):
    """int64 used to fail inside cv2.remap with an error naming no operator."""
    with pytest.raises(TypeError, match=f"fn.{name}: input must be uint8 or float32, got {np.dtype(dtype).name}"):
        run_pipe(lambda x: getattr(fn, name)(x), [RGB.astype(dtype)])


# -- multi_paste -----------------------------------------------------------------------------------------

def test_multi_paste_later_pastes_cover_earlier_ones():
    def make(x):
        return fn.multi_paste(x, in_ids=[0, 1], in_anchors=[0, 0, 0, 0], shapes=[4, 4, 2, 2],
                              out_anchors=[0, 0, 1, 1], output_size=[5, 6])

    other = (255 - RGB).astype(np.uint8)
    (out,) = run_pipe(make, [RGB, other])
    expected = np.zeros((5, 6, 3), np.uint8)
    expected[:4, :4] = RGB[:4, :4]
    expected[1:3, 1:3] = other[:2, :2]
    np.testing.assert_array_equal(out[0], expected)


@pytest.mark.parametrize("kwargs,match", [
    ({"in_ids": [0], "shapes": [9, 9]}, "fn.multi_paste: paste 0 of output sample 0 does not fit"),
    ({"in_ids": [3]}, "fn.multi_paste: 'in_ids' of output sample 0 has \\[3\\], outside the batch of 1"),
    ({"in_anchors": [0, 0], "in_anchors_rel": [0.5, 0.5]}, "'in_anchors' and 'in_anchors_rel' are mutually"),
    ({"in_ids": [0], "out_anchors": [-1, 0]}, "paste 0 of output sample 0 does not fit"),
])
def test_multi_paste_errors(kwargs, match):
    with pytest.raises((OpArgumentError, ValueError), match=match):
        run_pipe(lambda x: fn.multi_paste(x, **kwargs), [RGB])
