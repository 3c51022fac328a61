"""``fn.experimental.median_blur``: each pixel becomes the median of a rectangular window around it.

DALI 2.4 runs it on the GPU only (CV-CUDA's MedianBlur); this is a host implementation of the same
semantics: ``window_size`` is ``(width, height)``, both odd; the window is centred on the pixel;
pixels outside the image repeat the nearest edge pixel (replicate border); each channel is filtered
separately. ``cv2.medianBlur`` (the same border) does square windows where it can (any size for
uint8 with 1, 3 or 4 channels, 3 and 5 otherwise); other windows run a median selection network
(``median_network``) of whole-array NumPy minimum/maximum over the window's shifted copies, a band of
rows at a time.
"""

from __future__ import annotations

import functools

import cv2
import numpy as np

from jaxdali.ops.image.plane_filter import filter_planes, window_pair
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register

__all__ = ["MEDIAN_BLUR", "median_filter", "median_network"]

_OP = "experimental.median_blur"
#: Elements of the window's shifted copies one band of rows may hold in the NumPy path (cache-sized).
_BAND_ELEMENTS = 1 << 20


@functools.lru_cache(maxsize=64)
def median_network(count: int) -> tuple[tuple[int, int], ...]:
    """Compare-exchange pairs ``(i, j)``, ``i < j``, after which position ``count // 2`` of ``count`` values holds
    their median: Batcher's odd-even merge sort of the next power of two, without the pairs that touch the
    padding (values past ``count`` act as +inf and never move) or cannot reach the median's position."""
    size = 1 << max(0, (count - 1).bit_length())
    pairs = []
    span = 1
    while span < size:
        step = span
        while step >= 1:
            for j in range(step % span, size - step, 2 * step):
                for i in range(min(step, size - j - step)):
                    if (i + j) // (2 * span) == (i + j + step) // (2 * span):
                        pairs.append((i + j, i + j + step))
            step //= 2
        span *= 2
    needed, kept = {count // 2}, []
    for i, j in reversed(pairs):
        if j < count and (i in needed or j in needed):
            kept.append((i, j))
            needed |= {i, j}
    return tuple(reversed(kept))


def median_filter(src: np.ndarray, dst: np.ndarray, width: int, height: int) -> None:
    """Writes the (height x width) replicate-border median of the (H, W) or (H, W, C) plane ``src`` to ``dst``."""
    channels = src.shape[2] if src.ndim == 3 else 1
    if width == height and (width <= 5 or (src.dtype == np.uint8 and channels in (1, 3, 4))):
        cv2.medianBlur(src, width, dst=dst)
        return
    # Elsewhere: the median network over the window's shifted copies, whole-array min/max (GIL-free), by bands
    ry, rx = height // 2, width // 2
    padded = cv2.copyMakeBorder(src, ry, ry, rx, rx, cv2.BORDER_REPLICATE).reshape(
        (src.shape[0] + 2 * ry, src.shape[1] + 2 * rx) + src.shape[2:])
    count = width * height
    pairs = median_network(count)
    rows = max(1, _BAND_ELEMENTS // (count * src.shape[1] * channels))
    for top in range(0, src.shape[0], rows):
        bottom = min(top + rows, src.shape[0])
        values = [np.array(padded[top + dy:bottom + dy, dx:dx + src.shape[1]])
                  for dy in range(height) for dx in range(width)]
        spare = np.empty_like(values[0])
        for i, j in pairs:
            np.minimum(values[i], values[j], out=spare)
            np.maximum(values[i], values[j], out=values[j])
            values[i], spare = spare, values[i]
        dst[top:bottom] = values[count // 2]


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
