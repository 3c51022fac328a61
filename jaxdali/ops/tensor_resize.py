"""``fn.tensor_resize``: resizes any axes of N-D tensors, with ``fn.resize``'s filters and size arithmetic.

The sizes refer to ``axes`` (or ``axis_names``; all axes by default). An axis that is not listed is
given its own extent, so it keeps its size in the ``default`` and ``stretch`` modes but takes part in
``not_larger``/``not_smaller`` like any other axis (as in DALI: with those modes a channel axis can be
resampled too). ``scales`` give ``size_rounding(scale * extent)`` outputs; the source window is then
widened or narrowed so that the scale factor stays exact, keeping the point at ``alignment`` (0 the
start, 0.5 the centre, 1 the end of the window) in place.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.convert import round_half_away
from jaxdali.ops.layouts import SpatialLayout, check_resampled_dtype_arg, resampled_dtype
from jaxdali.ops.operator import Operator
from jaxdali.ops.resample_plan import MODES, resize_geometry
from jaxdali.ops.resize import INTERP_ARGS, resample_filters, resample_batch, per_axis_arg
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["TENSOR_RESIZE"]

_ROUNDING = {"round": round_half_away, "truncate": np.trunc, "ceil": np.ceil}


class TensorResize(Operator):
    """``fn.tensor_resize``: the host implementation (``device="gpu"`` runs the same code)."""

    def __init__(self, node, build):
        super().__init__(node, build)
        op = "tensor_resize"
        given = {name for name in ("sizes", "scales") if name in node.arg_inputs or self.args.get(name) is not None}
        if len(given) != 1:
            raise OpArgumentError(f"fn.{op}: exactly one of the arguments 'sizes' and 'scales' must be given, "
                                  f"got {sorted(given) or 'none'}")
        self.method = given.pop()
        if self.args.get("axes") is not None and self.args.get("axis_names") is not None:
            raise OpArgumentError(f"fn.{op}: arguments 'axes' and 'axis_names' are mutually exclusive")
        roi = [name for name in ("roi_start", "roi_end") if name in node.arg_inputs or self.args.get(name) is not None]
        if len(roi) == 1:
            raise OpArgumentError(f"fn.{op}: arguments 'roi_start' and 'roi_end' must be given together")
        check_resampled_dtype_arg(op, self.args.get("dtype"))

    def _axes(self, layout: str, ndim: int) -> list[int]:
        """The axes that the per-axis arguments refer to."""
        op = "tensor_resize"
        if self.args.get("axis_names") is not None:
            names = self.args["axis_names"]
            missing = [ch for ch in names if ch not in layout]
            if missing:
                raise ValueError(f"fn.{op}: argument 'axis_names' = {names!r} names axes {missing} that the input "
                                 f"layout {layout!r} does not have")
            return [layout.index(ch) for ch in names]
        if self.args.get("axes") is None:
            return list(range(ndim))
        axes = []
        for a in self.args["axes"]:
            if not -ndim <= a < ndim:
                raise ValueError(f"fn.{op}: argument 'axes' holds {a}, outside [{-ndim}, {ndim - 1}] for "
                                 f"{ndim}-D input")
            axes.append(a % ndim)
        if len(set(axes)) != len(axes):
            raise ValueError(f"fn.{op}: argument 'axes' repeats an axis: {list(self.args['axes'])}")
        return axes

    def run(self, ctx, inputs, args):
        op = "tensor_resize"
        images = inputs[0]
        n = len(images)
        if n == 0:
            return images
        ndim = images.ndim()
        axes = self._axes(images.layout(), ndim)
        d = len(axes)
        dtype = resampled_dtype(op, images.np_dtype, self.args.get("dtype"))
        extent = np.array(images.shape(), np.int64).reshape(n, ndim).astype(np.float64)
        listed = extent[:, axes]
        lo, hi = np.zeros((n, ndim)), extent.copy()
        if args.given("roi_start"):
            start, end = per_axis_arg(op, args, "roi_start", n, d), per_axis_arg(op, args, "roi_end", n, d)
            if self.args["roi_relative"]:
                start, end = start * listed, end * listed
            lo[:, axes], hi[:, axes] = start, end
        requested = extent.copy()
        if self.method == "sizes":
            requested[:, axes] = per_axis_arg(op, args, "sizes", n, d)
        else:
            scales = per_axis_arg(op, args, "scales", n, d)
            if (scales <= 0).any():
                raise ValueError(f"fn.{op}: argument 'scales' must hold positive values, got {scales.min()}")
            requested[:, axes] = np.maximum(_ROUNDING[self.args["size_rounding"]](scales * np.abs(
                hi[:, axes] - lo[:, axes])), 1)
        max_size = None
        if self.args.get("max_size") is not None:
            max_size = np.zeros(ndim)
            max_size[axes] = per_axis_arg(op, args, "max_size", 1, d)[0]
        out_size, lo, hi = resize_geometry(extent, requested, self.args.get("mode") or "default", max_size, lo, hi,
                                           bool(self.args["subpixel_scale"]))
        if self.method == "scales":
            lo, hi = _align(lo, hi, out_size, axes, scales, per_axis_arg(op, args, "alignment", n, d))
        # Only the axes that change are resampled, so that HWC images keep the 2-D fast path.
        changed = ((out_size != extent) | (lo != 0) | (hi != extent)).any(axis=0)
        spatial = [a for a in range(ndim) if changed[a]]
        if not spatial:
            return images if dtype == images.np_dtype else TensorListCPU(
                [s.astype(dtype) for s in images.samples()], images.layout())
        min_f, mag_f = resample_filters(op, args, n)
        return resample_batch(ctx, op, images, SpatialLayout(images.layout(), tuple(spatial)), out_size[:, spatial],
                              lo[:, spatial], hi[:, spatial], min_f, mag_f, bool(self.args["antialias"]), dtype)


def _align(lo: np.ndarray, hi: np.ndarray, out_size: np.ndarray, axes: list[int], scales: np.ndarray,
           alignment: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Source windows of ``axes`` spanning ``out_size / scale``, anchored at the ``alignment`` point."""
    lo, hi = lo.copy(), hi.copy()
    a_lo, a_hi = lo[:, axes], hi[:, axes]
    anchor = (1 - alignment) * a_lo + alignment * a_hi
    span = np.copysign(out_size[:, axes] / scales, a_hi - a_lo)
    lo[:, axes] = anchor - alignment * span
    hi[:, axes] = lo[:, axes] + span
    return lo, hi


TENSOR_RESIZE = register(OpSchema(
    name="tensor_resize", impl=TensorResize, devices=("cpu", "gpu"),
    doc="""Resizes tensors of any rank along the given axes.

Exactly one of ``sizes`` and ``scales``, one value per axis of ``axes``/``axis_names`` (every axis by
default). With ``scales`` the output extent is ``size_rounding(scale * extent)`` and the scale factor
is kept exact around the ``alignment`` point of the source window. Axes that are not listed keep
their extent, except that ``mode`` not_larger/not_smaller scales them too (as in DALI). ``mode``,
``max_size``, ``roi_*``, ``subpixel_scale`` and the filters work as in ``fn.resize``. Types: uint8,
int16, uint16, float32. ``device="gpu"`` runs the host implementation.""",
    args=(
        Arg("sizes", "floats", None, "Output extents of the listed axes; 0 = derived from the others per mode.",
            tensor=True),
        Arg("scales", "floats", None, "Scale factors of the listed axes.", tensor=True),
        Arg("axes", "ints", None, "Axes that the per-axis arguments refer to (negative: from the end)."),
        Arg("axis_names", "str", None, "Layout names of the axes that the per-axis arguments refer to."),
        Arg("alignment", "floats", (0.5,), "With scales: the relative point of the source window that keeps "
            "its place (0 start, 0.5 centre, 1 end).", tensor=True),
        Arg("size_rounding", "str", "round", "Rounding of scale * extent: 'round' (half away from zero), "
            "'truncate' or 'ceil'.", choices=("round", "truncate", "ceil")),
        Arg("mode", "str", None, "How missing extents and max_size combine with the given ones (default "
            "'default').", choices=MODES),
        Arg("max_size", "floats", None, "Limit of the output extents of the listed axes."),
        Arg("roi_start", "floats", None, "Start of the source region of the listed axes.", tensor=True),
        Arg("roi_end", "floats", None, "End of the source region of the listed axes.", tensor=True),
        Arg("roi_relative", "bool", False, "roi_start/roi_end are fractions of the input extents."),
        Arg("subpixel_scale", "bool", True,
            "A fractional size moves the source region's edges so the scale factor is exactly the requested one."),
    ) + INTERP_ARGS,
))
