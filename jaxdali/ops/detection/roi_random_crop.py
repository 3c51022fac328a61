"""``fn.roi_random_crop``: random crop anchors whose window holds a region of interest.

Per dimension, a crop at least as large as the ROI starts in [roi_end - crop, roi_start] (it
contains the ROI); a smaller one starts in [roi_start, roi_end - crop] (it lies inside the ROI).
With an input shape (``in_shape``, or the first ``len(crop_shape)`` dimensions of the data input's
shape) the range is also limited to [0, in - crop]. The anchor is a uniform integer in that range,
one per sample and dimension, drawn from the per-sample counter-based generator (seeds and
checkpoints as for every random operator; not DALI's stream).
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, REQUIRED, register
from jaxdali.tensors import TensorListCPU

__all__ = ["anchor_range", "ROI_RANDOM_CROP"]


def anchor_range(crop, roi_start, roi_end, in_shape=None) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest anchor (inclusive, int64) of a crop of ``crop`` around the ROI."""
    crop, roi_start, roi_end = (np.asarray(v, np.int64) for v in (crop, roi_start, roi_end))
    contains = crop >= roi_end - roi_start
    lo = np.where(contains, roi_end - crop, roi_start)
    hi = np.where(contains, roi_start, roi_end - crop)
    if in_shape is not None:
        in_shape = np.asarray(in_shape, np.int64)
        lo, hi = np.maximum(lo, 0), np.minimum(hi, in_shape - crop)
    return lo, np.maximum(hi, lo)


class RoiRandomCrop(Operator):
    """``fn.roi_random_crop``."""

    op = "roi_random_crop"

    def __init__(self, node, build):
        super().__init__(node, build)
        given = {a for a in ("roi_end", "roi_shape", "in_shape")
                 if a in node.arg_inputs or node.args.get(a) is not None}
        if ("roi_end" in given) == ("roi_shape" in given):
            raise OpArgumentError(f"fn.{self.op}: give exactly one of 'roi_end' and 'roi_shape'")
        if node.inputs and "in_shape" in given:
            raise OpArgumentError(f"fn.{self.op}: give the input shape either as the data input or as 'in_shape', "
                                  "not both")
        self.given = given

    def _vector(self, args, name: str, n: int, ndim: int | None) -> np.ndarray:
        rows = [np.asarray(args.sample_value(name, i), np.int64).reshape(-1) for i in range(n)]
        sizes = {len(r) for r in rows}
        if len(sizes) > 1 or (ndim is not None and sizes and sizes != {ndim}):
            raise OpArgumentError(f"fn.{self.op}: argument '{name}' must have one value per dimension "
                                  f"({ndim if ndim is not None else 'the same number in every sample'}), got "
                                  f"lengths {sorted(sizes)}")
        return np.stack(rows) if rows else np.zeros((0, ndim or 0), np.int64)

    def run(self, ctx, inputs, args):
        n = ctx.batch_size
        crop = self._vector(args, "crop_shape", n, None)
        ndim = crop.shape[1]
        start = self._vector(args, "roi_start", n, ndim)
        end = self._vector(args, "roi_end", n, ndim) if "roi_end" in self.given else \
            start + self._vector(args, "roi_shape", n, ndim)
        if inputs:
            # As DALI: the input's first len(crop_shape) dimensions (e.g. H, W of an HWC image).
            shapes = [tuple(s) for s in inputs[0].shape()]
            if any(len(s) < ndim for s in shapes):
                raise ValueError(f"fn.{self.op}: the input has {sorted({len(s) for s in shapes})} dimensions, but "
                                 f"'crop_shape' has {ndim} values")
            in_shape = np.array([s[:ndim] for s in shapes], np.int64).reshape(n, ndim)
        else:
            in_shape = self._vector(args, "in_shape", n, ndim) if "in_shape" in self.given else None
        if (crop < 0).any() or (end < start).any():
            raise OpArgumentError(f"fn.{self.op}: 'crop_shape' must be >= 0 and the ROI must not end before it "
                                  f"starts, got crop_shape {crop[0].tolist()}, roi {start[0].tolist()} to "
                                  f"{end[0].tolist()}")
        if in_shape is not None and (crop > in_shape).any():
            i = int(np.flatnonzero((crop > in_shape).any(1))[0])
            raise ValueError(f"fn.{self.op}: sample {i}: the crop {crop[i].tolist()} is larger than the input "
                             f"{in_shape[i].tolist()}")
        lo, hi = anchor_range(crop, start, end, in_shape)
        u = rng.uniform(ctx.sample_keys(self.seed), ndim)
        anchor = lo + np.minimum(np.floor(u * (hi - lo + 1)).astype(np.int64), hi - lo)
        return TensorListCPU(anchor)


ROI_RANDOM_CROP = register(OpSchema(
    name="roi_random_crop", impl=RoiRandomCrop, min_inputs=0, max_inputs=1,
    doc="Random int64 crop anchors (one per dimension) for a window of ``crop_shape`` that contains the region "
        "of interest (or lies inside it, when smaller), within the input shape when known (data input or "
        "``in_shape``).",
    args=(Arg("crop_shape", "ints", REQUIRED, "Crop window shape.", tensor=True),
          Arg("roi_start", "ints", REQUIRED, "ROI start.", tensor=True),
          Arg("roi_end", "ints", None, "ROI end (exclusive); or give roi_shape.", tensor=True),
          Arg("roi_shape", "ints", None, "ROI shape; or give roi_end.", tensor=True),
          Arg("in_shape", "ints", None, "Input shape, when there is no data input.", tensor=True)),
))
