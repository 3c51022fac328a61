"""``fn.grid_mask``: zeroes a rotated grid of squares (GridMask augmentation).

A pixel (x, y) is zeroed when both rotated, shifted coordinates ``u = x cos(a) - y sin(a) - shift_x``
and ``v = x sin(a) + y cos(a) - shift_y`` fall in the first ``ratio`` of their tile:
``frac(u / tile) < ratio`` and ``frac(v / tile) < ratio`` (DALI 2.4's pattern). Without rotation the
mask is the outer product of a row and a column mask.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from jaxdali.ops.layouts import image_layout, sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU

__all__ = ["GRID_MASK", "grid_mask"]

_OP = "grid_mask"
_INPUT_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int16, np.int32, np.float32))  # DALI 2.4's


_ROWS = 32  # rows per block of the rotated mask: the float64 temporaries stay in cache


def _in_band(coord: np.ndarray, tile: float, ratio: float, scratch: np.ndarray, out: np.ndarray) -> None:
    """``out = frac(coord / tile) < ratio``, overwriting ``coord`` (``u - floor(u)`` is exact, like
    ``mod(u, 1)``, and several times faster)."""
    np.divide(coord, tile, out=coord)
    np.floor(coord, out=scratch)
    np.subtract(coord, scratch, out=coord)
    np.less(coord, ratio, out=out)


def grid_mask(height: int, width: int, tile: int, ratio: float, angle: float, shift_x: float,
              shift_y: float) -> np.ndarray:
    """The (height, width) boolean mask of the zeroed pixels."""
    x, y = np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64)
    if angle == 0:
        rows, cols = np.empty(height, bool), np.empty(width, bool)
        _in_band(y - shift_y, tile, ratio, np.empty(height), rows)
        _in_band(x - shift_x, tile, ratio, np.empty(width), cols)
        return rows[:, None] & cols[None, :]
    c, s = math.cos(angle), math.sin(angle)
    xc, xs, ys, yc = x * c, x * s, y * s, y * c
    mask = np.empty((height, width), bool)
    u, v, scratch = (np.empty((_ROWS, width)) for _ in range(3))
    in_v = np.empty((_ROWS, width), bool)
    for r0 in range(0, height, _ROWS):
        r1 = min(height, r0 + _ROWS)
        k = r1 - r0
        np.subtract(xc[None, :], ys[r0:r1, None], out=u[:k])   # u = x cos - y sin - shift_x
        np.subtract(u[:k], shift_x, out=u[:k])
        np.add(xs[None, :], yc[r0:r1, None], out=v[:k])        # v = x sin + y cos - shift_y
        np.subtract(v[:k], shift_y, out=v[:k])
        _in_band(u[:k], tile, ratio, scratch[:k], mask[r0:r1])
        _in_band(v[:k], tile, ratio, scratch[:k], in_v[:k])
        mask[r0:r1] &= in_v[:k]
    return mask


class GridMask(Operator):
    """Copies the input with the grid's pixels (all channels) set to zero."""

    def _params(self, args, i: int, who: str) -> tuple:
        tile = int(np.asarray(args.sample_value("tile", i)).reshape(-1)[0])
        ratio = float(np.asarray(args.sample_value("ratio", i)).reshape(-1)[0])
        if tile <= 0:
            raise ValueError(f"fn.{_OP}: argument 'tile' must be > 0, got {tile} for {who}")
        if not 0 <= ratio <= 1:
            raise ValueError(f"fn.{_OP}: argument 'ratio' must be in [0, 1], got {ratio} for {who}")
        rest = (float(np.asarray(args.sample_value(n, i)).reshape(-1)[0]) for n in ("angle", "shift_x", "shift_y"))
        return (tile, ratio, *rest)

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        layout = image_layout(_OP, x.layout(), x.ndim(), ("HWC",))
        if x.np_dtype not in _INPUT_TYPES:
            raise TypeError(f"fn.{_OP}: input must be uint8, int16, int32 or float32, got {x.np_dtype.name}")
        params = [self._params(args, i, sample_name(x.source_info, i)) for i in range(n)]
        shapes = [tuple(s) for s in x.shape()]
        dense = owned_empty((n,) + shapes[0], x.np_dtype) if n and len(set(shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, x.np_dtype) for i, s in enumerate(shapes)]
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                h, w = shapes[i][:2]
                keep = ~grid_mask(h, w, *params[i])
                outs[i][...] = 0
                cv2.copyTo(np.ascontiguousarray(samples[i]), keep.view(np.uint8), outs[i])

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


GRID_MASK = register(OpSchema(
    name=_OP, impl=GridMask, devices=("cpu", "gpu"),
    doc="GridMask augmentation on HWC images: zeroes the pixels of a grid of squares of side `ratio * tile`, "
        "one per `tile` x `tile` cell, rotated by `angle` (radians) and shifted by (`shift_x`, `shift_y`) "
        "pixels.\n\n.. note:: With device='gpu' it runs on the host.",
    args=(Arg("tile", "int", 100, "Side of a grid cell, in pixels.", tensor=True),
          Arg("ratio", "float", 0.5, "Side of the zeroed square as a fraction of the cell.", tensor=True),
          Arg("angle", "float", 0.0, "Rotation of the grid, in radians.", tensor=True),
          Arg("shift_x", "float", 0.0, "Horizontal shift of the grid, in pixels.", tensor=True),
          Arg("shift_y", "float", 0.0, "Vertical shift of the grid, in pixels.", tensor=True)),
))
