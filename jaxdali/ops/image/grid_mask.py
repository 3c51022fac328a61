"""``fn.grid_mask``: zeroes a rotated grid of squares (GridMask augmentation).

A pixel (x, y) is zeroed when both rotated, shifted coordinates ``u = x cos(a) - y sin(a) - shift_x``
and ``v = x sin(a) + y cos(a) - shift_y`` fall in the first ``ratio`` of their tile:
``frac(u / tile) < ratio`` and ``frac(v / tile) < ratio`` (DALI 2.4's pattern). Without rotation the
mask is the outer product of a row and a column mask.
"""

from __future__ import annotations

import math

import numpy as np

from jaxdali.ops.geometry import image_layout, sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.pipeline.device_stage import owned_empty
from jaxdali.pipeline.tensors import TensorListCPU

__all__ = ["GRID_MASK", "grid_mask"]

_OP = "grid_mask"


def _in_band(coord: np.ndarray, tile: float, ratio: float) -> np.ndarray:
    return np.mod(coord / tile, 1.0) < ratio


def grid_mask(height: int, width: int, tile: int, ratio: float, angle: float, shift_x: float,
              shift_y: float) -> np.ndarray:
    """The (height, width) boolean mask of the zeroed pixels."""
    if angle == 0:
        rows = _in_band(np.arange(height, dtype=np.float64) - shift_y, tile, ratio)
        cols = _in_band(np.arange(width, dtype=np.float64) - shift_x, tile, ratio)
        return rows[:, None] & cols[None, :]
    c, s = math.cos(angle), math.sin(angle)
    y = np.arange(height, dtype=np.float64)[:, None]
    x = np.arange(width, dtype=np.float64)[None, :]
    return _in_band(x * c - y * s - shift_x, tile, ratio) & _in_band(x * s + y * c - shift_y, tile, ratio)


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
        params = [self._params(args, i, sample_name(x, i)) for i in range(n)]
        shapes = [tuple(s) for s in x.shape()]
        dense = owned_empty((n,) + shapes[0], x.np_dtype) if n and len(set(shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, x.np_dtype) for i, s in enumerate(shapes)]
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                h, w = shapes[i][:2]
                np.copyto(outs[i], samples[i])
                np.copyto(outs[i], 0, where=grid_mask(h, w, *params[i])[:, :, None])

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
