"""``fn.color_space_conversion``: RGB, BGR, GRAY and YCbCr (ITU-R BT.601, limited range) on uint8 images.

Every conversion is one GIL-free OpenCV call per sample on the worker pool: ``cvtColor`` for the
conversions to and from GRAY that DALI's CPU operator also leaves to OpenCV (bit-exact), and
``cv2.transform`` with a 3x4 affine matrix for YCbCr (within 1 of DALI: the same matrix, rounded
differently).
"""

from __future__ import annotations

from typing import Callable

import cv2
import numpy as np

from jaxdali.ops.layouts import image_layout, sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIImageType

__all__ = ["COLOR_SPACE_CONVERSION", "RGB_TO_YCBCR"]

_I = DALIImageType
_LAYOUTS = ("HWC", "FHWC", "DHWC")
_CHANNELS = {_I.RGB: 3, _I.BGR: 3, _I.YCbCr: 3, _I.GRAY: 1}

#: BT.601 limited range: rows Y, Cb, Cr of the RGB -> YCbCr matrix (for RGB in 0..255) and the offsets.
RGB_TO_YCBCR = np.array([[65.481, 128.553, 24.966], [-37.797, -74.203, 112.0], [112.0, -93.786, -18.214]]) / 255
_YCBCR_OFFSET = np.array([16.0, 128.0, 128.0])
_YCBCR_TO_RGB = np.linalg.inv(RGB_TO_YCBCR)


def _affine(matrix: np.ndarray, offset: np.ndarray) -> np.ndarray:
    return np.column_stack([matrix, offset])


def _from_ycbcr(rows: np.ndarray) -> np.ndarray:
    return _affine(rows, -rows @ _YCBCR_OFFSET)


# (from, to) -> 3x4 / 1x4 / 3x2 affine matrix for cv2.transform, or a cv2.cvtColor code.
_CONVERSIONS: dict[tuple[DALIImageType, DALIImageType], np.ndarray | int] = {
    (_I.RGB, _I.BGR): cv2.COLOR_RGB2BGR,
    (_I.BGR, _I.RGB): cv2.COLOR_BGR2RGB,
    (_I.RGB, _I.GRAY): cv2.COLOR_RGB2GRAY,
    (_I.BGR, _I.GRAY): cv2.COLOR_BGR2GRAY,
    (_I.GRAY, _I.RGB): cv2.COLOR_GRAY2RGB,
    (_I.GRAY, _I.BGR): cv2.COLOR_GRAY2BGR,
    (_I.RGB, _I.YCbCr): _affine(RGB_TO_YCBCR, _YCBCR_OFFSET),
    (_I.BGR, _I.YCbCr): _affine(RGB_TO_YCBCR[:, ::-1], _YCBCR_OFFSET),
    (_I.GRAY, _I.YCbCr): _affine(RGB_TO_YCBCR.sum(axis=1, keepdims=True), _YCBCR_OFFSET),
    (_I.YCbCr, _I.RGB): _from_ycbcr(_YCBCR_TO_RGB),
    (_I.YCbCr, _I.BGR): _from_ycbcr(_YCBCR_TO_RGB[::-1]),
    (_I.YCbCr, _I.GRAY): _from_ycbcr(np.array([[_YCBCR_TO_RGB[0, 0], 0.0, 0.0]])),
}


def _converter(how: np.ndarray | int) -> Callable[[np.ndarray, np.ndarray], None]:
    """``convert(src, dst)`` on 3-D (rows, W, C) views; writes into ``dst`` (OpenCV wants 2-D for 1 channel)."""
    def convert(src: np.ndarray, dst: np.ndarray) -> None:
        out = dst if dst.shape[2] > 1 else dst[..., 0]
        if isinstance(how, np.ndarray):
            cv2.transform(src, how, dst=out)
        else:
            cv2.cvtColor(src, how, dst=out)

    return convert


class ColorSpaceConversion(Operator):
    """Converts uint8 channel-last images between RGB, BGR, GRAY and YCbCr."""

    row_wise = True

    op = "color_space_conversion"

    def __init__(self, node, build):
        super().__init__(node, build)
        src, dst = self.args["image_type"], self.args["output_type"]
        how = _CONVERSIONS.get((src, dst))
        if how is None:
            raise OpArgumentError(f"fn.{self.op}: conversion from image_type={src.name} to output_type={dst.name} "
                                  f"is not supported (supported: RGB, BGR, GRAY, YCbCr, between different types)")
        self._convert = _converter(how)
        self._in_channels, self._out_channels = _CHANNELS[src], _CHANNELS[dst]

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        layout = image_layout(self.op, x.layout(), x.ndim(), _LAYOUTS)
        if x.np_dtype != np.uint8:
            raise TypeError(f"fn.{self.op}: input must be uint8, got {x.np_dtype.name}")
        shapes = [tuple(s) for s in x.shape()]
        for i, shape in enumerate(shapes):
            if shape[-1] != self._in_channels:
                raise ValueError(f"fn.{self.op}: {sample_name(x.source_info, i)} has {shape[-1]} channels; "
                                 f"image_type={self.args['image_type'].name} needs {self._in_channels}")
        out_shapes = [s[:-1] + (self._out_channels,) for s in shapes]
        dense = owned_empty((n,) + out_shapes[0], np.uint8) if n and len(set(out_shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, np.uint8) for i, s in enumerate(out_shapes)]
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                src, dst = samples[i], outs[i]
                if src.size:
                    rows = (-1,) + src.shape[-2:]
                    self._convert(np.ascontiguousarray(src).reshape(rows), dst.reshape((-1,) + dst.shape[-2:]))

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


COLOR_SPACE_CONVERSION = register(OpSchema(
    name="color_space_conversion", impl=ColorSpaceConversion, devices=("cpu", "gpu"),
    doc="Converts uint8 images (layouts HWC, FHWC, DHWC) between RGB, BGR, GRAY and YCbCr (ITU-R BT.601, "
        "limited range: Y in 16..235). Conversions to and from GRAY and between RGB and BGR equal DALI 2.4's "
        "exactly; those involving YCbCr are within 1 (float rounding). As in DALI, converting a type to "
        "itself is an error.\n\n.. note:: With device='gpu' it runs on the host (OpenCV on the worker pool).",
    args=(Arg("image_type", "image_type", REQUIRED, "Colour space of the input."),
          Arg("output_type", "image_type", REQUIRED, "Colour space of the output.")),
))
