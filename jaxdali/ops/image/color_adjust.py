"""``fn.brightness``, ``fn.contrast``, ``fn.hue``, ``fn.saturation``: the single-adjustment forms of
``fn.brightness_contrast`` and ``fn.hsv``.

DALI defines each as its combined operator with the other coefficients at their neutral values, so
these classes reuse the combined operators' formulas (and their host/device bit equality) and only
change which arguments exist and the default output type (the input's type here, UINT8 in ``fn.hsv``).
"""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.color import BrightnessContrast, Hsv, _value_range, bc_coefficients, hsv_matrix
from jaxdali.ops.convert import convert
from jaxdali.ops.layouts import allocate_batch
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU

__all__ = ["BRIGHTNESS", "CONTRAST", "HUE", "SATURATION"]


def _dtype_arg() -> Arg:
    return Arg("dtype", "dtype", None, "Output type; default: the input type.")


_LEVELS = np.arange(256, dtype=np.uint8)


#: Output types ``cv2.LUT`` writes as they are (it narrows 64-bit types).
_LUT_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.float32, np.float64))


class _Uint8Table:
    """uint8 input through a 256-entry table per sample (``cv2.LUT``, GIL-free), to any output type
    OpenCV's LUT writes: the per-pixel formula evaluated once per level, so the values are those of
    the formula on every pixel, bit for bit."""

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        out_dtype = np.dtype(self._dtype) if self._dtype is not None else x.np_dtype
        if x.np_dtype != np.uint8 or out_dtype not in _LUT_TYPES or not n:
            return super().run(ctx, inputs, args)
        shapes = [tuple(s) for s in x.shape()]
        self._check(x.layout(), x.ndim(), shapes[0][-1], x.np_dtype)
        values, _ = self._values(args, n, x.np_dtype, np)
        coeffs = self.coefficients(values, x.np_dtype, out_dtype, np)
        tables = [convert(self.transform(_LEVELS, [c[i] for c in coeffs], np), out_dtype) for i in range(n)]
        dense = owned_empty((n,) + shapes[0], out_dtype) if len(set(shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, out_dtype) for i, s in enumerate(shapes)]
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if samples[i].size:
                    flat = np.ascontiguousarray(samples[i]).reshape(1, -1)
                    cv2.LUT(flat, tables[i], dst=outs[i].reshape(1, -1))

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, x.layout())


class _OpenCVColorMatrix:
    """Host path of a 3x3 colour matrix per sample: ``cv2.transform`` on the float32 pixels (one pass,
    GIL-free, on the worker pool), then the usual rounding and saturation to the output type.

    OpenCV sums the three products with fused multiply-adds, so a value may differ from the
    separately rounded float32 formula (the device stage's) in the last bit, and an integer output
    by 1 in about one pixel in a million (as the formula differs from DALI's): these operators are
    therefore not moved to the device stage (``device_offload``), where that bit would change."""

    device_offload = False

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        if not n:
            return super().run(ctx, inputs, args)
        shapes = [tuple(s) for s in x.shape()]
        out_dtype = self._check(x.layout(), x.ndim(), shapes[0][-1], x.np_dtype)
        values, _ = self._values(args, n, x.np_dtype, np)
        (matrices,) = self.coefficients(values, x.np_dtype, out_dtype, np)
        out = allocate_batch(shapes, out_dtype)
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if samples[i].size:
                    pixels = samples[i].astype(np.float32).reshape(-1, 1, 3)
                    mixed = cv2.transform(pixels, matrices[i])
                    np.copyto(out[i], convert(mixed, out_dtype).reshape(shapes[i]))

        ctx.parallel_for(work, n)
        return TensorListCPU(out, x.layout())


class Brightness(_Uint8Table, BrightnessContrast):
    """brightness_contrast with contrast 1."""

    op = "brightness"
    coefficient_args = ("brightness", "brightness_shift")

    def coefficients(self, values, in_dtype, out_dtype, xp):
        neutral = xp.ones_like(values["brightness"])
        return bc_coefficients(values["brightness"], neutral, values["brightness_shift"], neutral * 0,
                               _value_range(out_dtype), xp)


class Contrast(_Uint8Table, BrightnessContrast):
    """brightness_contrast with brightness 1 and no shift."""

    op = "contrast"
    coefficient_args = ("contrast", "contrast_center")

    def coefficients(self, values, in_dtype, out_dtype, xp):
        neutral = xp.ones_like(values["contrast"])
        return bc_coefficients(neutral, values["contrast"], neutral * 0, values["contrast_center"],
                               _value_range(out_dtype), xp)


class Hue(_OpenCVColorMatrix, Hsv):
    """hsv with saturation and value 1."""

    op = "hue"
    coefficient_args = ("hue",)

    def coefficients(self, values, in_dtype, out_dtype, xp):
        neutral = xp.ones_like(values["hue"])
        return (hsv_matrix(values["hue"], neutral, neutral, xp),)


class Saturation(_OpenCVColorMatrix, Hsv):
    """hsv with hue 0 and value 1."""

    op = "saturation"
    coefficient_args = ("saturation",)

    def coefficients(self, values, in_dtype, out_dtype, xp):
        neutral = xp.ones_like(values["saturation"])
        return (hsv_matrix(neutral * 0, values["saturation"], neutral, xp),)


_INTEGER_NOTE = "Integer outputs round half away from zero and saturate. Layouts HWC, FHWC, DHWC."
_HSV_NOTE = ("RGB images (3 channels), layouts HWC, FHWC, DHWC; DALI's linear YIQ approximation (see fn.hsv). "
             "`image_type` has no effect, as in DALI 2.4.\n\n.. note:: Tolerance against DALI as for fn.hsv.")

BRIGHTNESS = register(OpSchema(
    name="brightness", impl=Brightness, devices=("cpu", "gpu"),
    doc="out = brightness * in + brightness_shift * range, where range is 1 for float outputs and the type's "
        "maximum for integer outputs. Any number of channels. " + _INTEGER_NOTE,
    args=(Arg("brightness", "float", 1.0, "Brightness multiplier.", tensor=True),
          Arg("brightness_shift", "float", 0.0, "Brightness shift, in units of the output range.", tensor=True),
          _dtype_arg()),
))

CONTRAST = register(OpSchema(
    name="contrast", impl=Contrast, devices=("cpu", "gpu"),
    doc="out = contrast_center + contrast * (in - contrast_center). Any number of channels. " + _INTEGER_NOTE,
    args=(Arg("contrast", "float", 1.0, "Contrast multiplier (0 gives uniform grey).", tensor=True),
          Arg("contrast_center", "float", None, "Intensity unaffected by contrast; default: half of the input "
              "type's range (0.5 for float, 128 for uint8).", tensor=True),
          _dtype_arg()),
))

HUE = register(OpSchema(
    name="hue", impl=Hue, devices=("cpu", "gpu"),
    doc="Rotates the hue of RGB images by `hue` degrees. " + _HSV_NOTE,
    args=(Arg("hue", "float", 0.0, "Hue change in degrees.", tensor=True),
          Arg("image_type", "image_type", None, "Colour space of input and output; no effect (as in DALI)."),
          _dtype_arg()),
))

SATURATION = register(OpSchema(
    name="saturation", impl=Saturation, devices=("cpu", "gpu"),
    doc="Scales the saturation of RGB images (0: grey, 1: unchanged). " + _HSV_NOTE,
    args=(Arg("saturation", "float", 1.0, "Saturation multiplier.", tensor=True),
          Arg("image_type", "image_type", None, "Colour space of input and output; no effect (as in DALI)."),
          _dtype_arg()),
))

