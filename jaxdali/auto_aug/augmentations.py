"""The standard augmentations of AutoAugment (ImageNet), RandAugment and TrivialAugmentWide, built
from jaxdali operators and wrapped by ``@augmentation`` with example magnitude ranges.

Each one is called as ``aug(images, magnitude_bin=..., num_magnitude_bins=...)`` on uint8 HWC
images. Change a range with ``.augmentation``, e.g. ``shear_x.augmentation(mag_range=(0, 0.5))``.
"""

from __future__ import annotations

import numpy as np

from jaxdali import fn, types
from jaxdali.auto_aug.core import augmentation


def warp_x_param(magnitude: float) -> list:
    """The magnitude as the x component of a 2D shear or translation."""
    return [magnitude, 0]


def warp_y_param(magnitude: float) -> list:
    """The magnitude as the y component of a 2D shear or translation."""
    return [0, magnitude]


def _warp(data, matrix, fill_value, interp_type):
    return fn.warp_affine(data, matrix=matrix, fill_value=fill_value, interp_type=interp_type, inverse_map=False)


@augmentation(mag_range=(0, 0.3), randomly_negate=True, mag_to_param=warp_x_param)
def shear_x(data, shear, fill_value=128, interp_type=None):
    """Shears along x by the magnitude (a shear factor)."""
    return _warp(data, fn.transforms.shear(shear=shear), fill_value, interp_type)


@augmentation(mag_range=(0, 0.3), randomly_negate=True, mag_to_param=warp_y_param)
def shear_y(data, shear, fill_value=128, interp_type=None):
    """Shears along y by the magnitude (a shear factor)."""
    return _warp(data, fn.transforms.shear(shear=shear), fill_value, interp_type)


@augmentation(mag_range=(0.0, 1.0), randomly_negate=True, mag_to_param=warp_x_param)
def translate_x(data, rel_offset, shape, fill_value=128, interp_type=None):
    """Moves along x by the magnitude times the width (``shape`` is the images' HWC shape)."""
    return _warp(data, fn.transforms.translation(offset=rel_offset * shape[1]), fill_value, interp_type)


@augmentation(mag_range=(0, 250), randomly_negate=True, mag_to_param=warp_x_param, name="translate_x")
def translate_x_no_shape(data, offset, fill_value=128, interp_type=None):
    """Moves along x by the magnitude in pixels."""
    return _warp(data, fn.transforms.translation(offset=offset), fill_value, interp_type)


@augmentation(mag_range=(0.0, 1.0), randomly_negate=True, mag_to_param=warp_y_param)
def translate_y(data, rel_offset, shape, fill_value=128, interp_type=None):
    """Moves along y by the magnitude times the height (``shape`` is the images' HWC shape)."""
    return _warp(data, fn.transforms.translation(offset=rel_offset * shape[0]), fill_value, interp_type)


@augmentation(mag_range=(0, 250), randomly_negate=True, mag_to_param=warp_y_param, name="translate_y")
def translate_y_no_shape(data, offset, fill_value=128, interp_type=None):
    """Moves along y by the magnitude in pixels."""
    return _warp(data, fn.transforms.translation(offset=offset), fill_value, interp_type)


@augmentation(mag_range=(0, 30), randomly_negate=True)
def rotate(data, angle, fill_value=128, interp_type=None, rotate_keep_size=True):
    """Rotates by the magnitude in degrees."""
    return fn.rotate(data, angle=angle, fill_value=fill_value, interp_type=interp_type, keep_size=rotate_keep_size)


def shift_enhance_range(magnitude: float) -> float:
    """``1 + magnitude``: the enhance factors (brightness, contrast, color, sharpness) are neutral at
    1, so a magnitude in [0, 1], randomly negated, gives a factor in [0, 2]."""
    return 1 + magnitude


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range)
def brightness(data, parameter):
    """Multiplies the pixels by the factor."""
    return fn.brightness(data, brightness=parameter)


_LUMA_WEIGHTS = np.array([0.299, 0.587, 0.114], dtype=np.float32)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range)
def contrast(data, parameter):
    """Scales the distance from the image's mean luma by the factor (PIL's ImageEnhance.Contrast)."""
    channel_means = fn.reductions.mean(data, axis_names="HW", keep_dims=True)
    center = fn.reductions.sum(channel_means * types.Constant(_LUMA_WEIGHTS), axis_names="C", keep_dims=True)
    return fn.cast_like(center + (data - center) * parameter, data)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=shift_enhance_range)
def color(data, parameter):
    """Scales the saturation by the factor."""
    return fn.saturation(data, saturation=parameter)


def sharpness_kernel(magnitude: float) -> np.ndarray:
    """A 3x3 kernel blending the image with PIL's smoothing filter: ``1 + magnitude`` parts of the
    image less ``magnitude`` parts of the smoothed image."""
    smooth = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], dtype=np.float32) / 13
    identity_kernel = np.zeros((3, 3), dtype=np.float32)
    identity_kernel[1, 1] = 1
    return (1 + magnitude) * identity_kernel - magnitude * smooth


def sharpness_kernel_shifted(magnitude: float) -> np.ndarray:
    """``sharpness_kernel`` for a factor given around 1 (as in AutoAugment's policies)."""
    return sharpness_kernel(magnitude - 1)


@augmentation(mag_range=(0, 0.9), randomly_negate=True, mag_to_param=sharpness_kernel, param_device="auto")
def sharpness(data, kernel):
    """Sharpens (or blurs, for negative magnitudes) with the kernel; unlike PIL, the 1-pixel border
    is filtered too."""
    return fn.experimental.filter(data, kernel)


def poster_mask_uint8(magnitude: float) -> np.ndarray:
    """The uint8 mask keeping the high ``round(magnitude)`` bits of a pixel (clipped to 1..8 bits)."""
    kept_bits = int(np.clip(np.round(magnitude), 1, 8))
    return np.array(0xFF ^ ((1 << (8 - kept_bits)) - 1), dtype=np.uint8)


@augmentation(mag_range=(0, 4), mag_to_param=poster_mask_uint8, param_device="auto")
def posterize(data, mask):
    """Keeps the high bits of each pixel (``data & mask``)."""
    return data & mask


@augmentation(mag_range=(256, 0), param_device="auto")
def solarize(data, threshold):
    """Inverts the pixels at or above the threshold."""
    # 255 - x == x ^ 255 for uint8: one pass flips the chosen pixels.
    return data ^ ((data >= threshold) * types.Constant(255, dtype=types.UINT8))


def solarize_add_shift(shift: float) -> np.ndarray:
    """The shift as uint8; it must be below 128."""
    if shift >= 128:
        raise ValueError(f"solarize_add: the shift must be in [0, 128), got {shift}")
    return np.uint8(shift)


@augmentation(mag_range=(0, 110), param_device="auto", mag_to_param=solarize_add_shift)
def solarize_add(data, shift):
    """Adds the shift to the pixels below 128 (wrapping as uint8)."""
    return data + (data < types.Constant(128, dtype=types.UINT8)) * shift


@augmentation
def invert(data, _):
    """``255 - pixel``."""
    return types.Constant(255, dtype=types.UINT8) - data


@augmentation
def equalize(data, _):
    """Histogram equalisation per channel (OpenCV's formula, not PIL's)."""
    return fn.experimental.equalize(data)


@augmentation
def auto_contrast(data, _):
    """Stretches each channel's range to [0, 255] (channels with one value are left alone)."""
    lo = fn.reductions.min(data, axis_names="HW", keep_dims=True)
    hi = fn.reductions.max(data, axis_names="HW", keep_dims=True)
    span = hi - lo
    varies = span > 0
    divisor = span * varies + types.Constant(255, dtype=types.UINT8) * (varies ^ True)
    return fn.cast_like((data - lo * varies) * (255 / divisor), data)


@augmentation
def identity(data, _):
    """The samples unchanged."""
    return data
