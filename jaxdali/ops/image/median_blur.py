"""``fn.experimental.median_blur``: each pixel becomes the median of a rectangular window around it.

DALI 2.4 runs it on the GPU only (CV-CUDA's MedianBlur); this is a host implementation of the same
semantics: ``window_size`` is ``(width, height)``, both odd; the window is centred on the pixel;
pixels outside the image repeat the nearest edge pixel (replicate border); each channel is filtered
separately. ``cv2.medianBlur`` (the same border) does square windows where it can (any size for
uint8 with 1, 3 or 4 channels, 3 and 5 otherwise); other windows take the median of the sliding
windows with NumPy, a band of rows at a time.
"""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.image.plane_filter import filter_planes, window_pair
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register

__all__ = ["MEDIAN_BLUR", "median_filter"]

_OP = "experimental.median_blur"
#: Elements of the window stack one band of rows may hold in the NumPy path.
_BAND_ELEMENTS = 1 << 22


def median_filter(src: np.ndarray, dst: np.ndarray, width: int, height: int) -> None:
    """Writes the (height x width) replicate-border median of the (H, W) or (H, W, C) plane ``src`` to ``dst``."""
    channels = src.shape[2] if src.ndim == 3 else 1
    if width == height and (width <= 5 or (src.dtype == np.uint8 and channels in (1, 3, 4))):
        cv2.medianBlur(src, width, dst=dst)
        return
    ry, rx = height // 2, width // 2
    pad = ((ry, ry), (rx, rx)) + ((0, 0),) * (src.ndim - 2)
    padded = np.pad(src, pad, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, (height, width), axis=(0, 1))
    middle = height * width // 2
    rows = max(1, _BAND_ELEMENTS // max(1, src.shape[1] * channels * height * width))
    for top in range(0, src.shape[0], rows):
        band = windows[top:top + rows]
        stacked = band.reshape(band.shape[:-2] + (-1,))
        dst[top:top + rows] = np.partition(stacked, middle, axis=-1)[..., middle]


class MedianBlur(Operator):
    """Per-sample odd window; one filter call per 2-D plane on the worker pool."""

    def run(self, ctx, inputs, args):
        (x,) = inputs

        def window(i: int, who: str) -> tuple[int, int]:
            width, height = window_pair(_OP, "window_size", args.sample_value("window_size", i), who)
            if width < 1 or height < 1 or width % 2 == 0 or height % 2 == 0:
                raise ValueError(f"fn.{_OP}: argument 'window_size' must be odd and positive, got "
                                 f"{[width, height]} for {who}")
            return width, height

        return filter_planes(_OP, ctx, x, window, lambda s, d, wh: median_filter(s, d, *wh))


MEDIAN_BLUR = register(OpSchema(
    name=_OP, impl=MedianBlur, devices=("cpu", "gpu"),
    doc="Median blur of images (HW, HWC, CHW) and sequences (FHWC, FCHW) of uint8, uint16 or float32: each "
        "pixel of each channel becomes the median of the `window_size` (width, height; odd) window centred "
        "on it; pixels outside the image repeat the nearest edge pixel.\n\n.. note:: DALI 2.4 runs this operator "
        "on the GPU only; jaxdali runs it on the host (also for device='gpu') and also accepts device='cpu'. "
        "Checked against SciPy's median filter.",
    args=(Arg("window_size", "ints", (3, 3), "Window size (width, height), odd.", tensor=True),),
))
