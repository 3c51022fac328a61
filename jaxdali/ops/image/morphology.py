"""``fn.experimental.dilate`` and ``fn.experimental.erode``: maximum and minimum over a rectangle.

DALI 2.4 runs them on the GPU only (CV-CUDA's Morphology); this is a host implementation of the same
semantics. Output pixel (x, y) is the maximum (dilate) or minimum (erode) of the input over columns
``x - anchor_x .. x - anchor_x + width - 1`` and rows ``y - anchor_y .. y - anchor_y + height - 1``;
``mask_size`` is ``(width, height)`` (-1 anywhere: 3x3), a negative anchor coordinate means the middle
(``size // 2``). ``iterations`` applies the filter that many times. Outside the image, ``border_mode``
decides: "constant" reads the value that never wins (the type's minimum for dilate, its maximum for
erode; for float32 dilate CV-CUDA's ``numeric_limits<float>::min()``, the smallest positive normal
number, which is reproduced), the others mirror, repeat or wrap the image. One ``cv2.dilate`` /
``cv2.erode`` call per plane and iteration (wrap: on a wrapped copy of the plane, then cropped).
"""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.image.plane_filter import filter_planes, window_pair
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register

__all__ = ["DILATE", "ERODE"]

_BORDERS = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE, "reflect": cv2.BORDER_REFLECT,
            "reflect_101": cv2.BORDER_REFLECT_101, "wrap": cv2.BORDER_WRAP}


def _neutral(dtype: np.dtype, dilate: bool) -> float:
    """CV-CUDA's constant border value: ``numeric_limits<T>::min()`` for dilate, ``max()`` for erode."""
    if dtype.kind == "f":
        info = np.finfo(dtype)
        return float(info.tiny if dilate else info.max)
    info = np.iinfo(dtype)
    return float(info.min if dilate else info.max)


class _Morphology(Operator):
    """Per-sample mask and anchor; ``iterations`` passes of one OpenCV call per plane."""

    op = ""
    dilate = True

    def __init__(self, node, build):
        super().__init__(node, build)
        self._border = _BORDERS[self.args["border_mode"]]
        self._iterations = self.args["iterations"]

    def _params(self, args, i: int, who: str) -> tuple[np.ndarray, tuple[int, int]]:
        width, height = window_pair(self.op, "mask_size", args.sample_value("mask_size", i), who)
        if width == -1 or height == -1:
            width = height = 3
        if width < 1 or height < 1:
            raise ValueError(f"fn.{self.op}: argument 'mask_size' must be positive (or -1: 3x3), got "
                             f"{[width, height]} for {who}")
        ax, ay = window_pair(self.op, "anchor", args.sample_value("anchor", i), who)
        ax, ay = (width // 2 if ax < 0 else ax), (height // 2 if ay < 0 else ay)
        if ax >= width or ay >= height:
            raise ValueError(f"fn.{self.op}: argument 'anchor' {[ax, ay]} lies outside the mask of size "
                             f"{[width, height]} for {who}")
        return np.ones((height, width), np.uint8), (ax, ay)

    def run(self, ctx, inputs, args):
        (x,) = inputs
        morph = cv2.dilate if self.dilate else cv2.erode
        wrap = self._border == cv2.BORDER_WRAP

        def apply(src: np.ndarray, dst: np.ndarray, params) -> None:
            kernel, (ax, ay) = params
            for _ in range(self._iterations):
                if wrap:  # OpenCV's morphology has no wrap border: filter a wrapped copy, keep the middle
                    kh, kw = kernel.shape
                    padded = cv2.copyMakeBorder(src, ay, kh - 1 - ay, ax, kw - 1 - ax, cv2.BORDER_WRAP)
                    full = morph(padded, kernel, anchor=(ax, ay), borderType=cv2.BORDER_REPLICATE)
                    dst[...] = full[ay:ay + dst.shape[0], ax:ax + dst.shape[1]]
                else:
                    morph(src, kernel, dst=dst, anchor=(ax, ay), borderType=self._border,
                          borderValue=(_neutral(src.dtype, self.dilate),) * 4)
                src = dst

        return filter_planes(self.op, ctx, x, lambda i, who: self._params(args, i, who), apply)


class Dilate(_Morphology):
    op = "experimental.dilate"
    dilate = True


class Erode(_Morphology):
    op = "experimental.erode"
    dilate = False


def _args() -> tuple[Arg, ...]:
    return (Arg("mask_size", "ints", (3, 3), "Size of the rectangular structuring element (width, height).",
                tensor=True),
            Arg("anchor", "ints", (-1, -1), "Position (x, y) of the element over the output pixel; -1: the middle.",
                tensor=True),
            Arg("iterations", "int", 1, "Number of times the operation is applied.", min=1),
            Arg("border_mode", "str", "constant", "Pixels outside the image: constant, replicate, reflect, "
                "reflect_101 or wrap.", choices=tuple(_BORDERS)))


_NOTE = ("\n\n.. note:: DALI 2.4 runs this operator on the GPU only; jaxdali runs it on the host (also for "
         "device='gpu') and also accepts device='cpu'. Checked against a NumPy maximum/minimum filter.")
_INPUTS = "images (HW, HWC, CHW) and sequences (FHWC, FCHW) of uint8, uint16 or float32"

DILATE = register(OpSchema(
    name="experimental.dilate", impl=Dilate, devices=("cpu", "gpu"),
    doc=f"Dilation of {_INPUTS}: each pixel becomes the maximum over the `mask_size` rectangle placed at "
        "`anchor`, `iterations` times." + _NOTE,
    args=_args(),
))

ERODE = register(OpSchema(
    name="experimental.erode", impl=Erode, devices=("cpu", "gpu"),
    doc=f"Erosion of {_INPUTS}: each pixel becomes the minimum over the `mask_size` rectangle placed at "
        "`anchor`, `iterations` times." + _NOTE,
    args=_args(),
))
