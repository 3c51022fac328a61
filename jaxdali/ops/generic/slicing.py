"""``fn.slice``: a box of each sample, from anchors and shapes given as arguments or as inputs.

The box arithmetic is ``fn.readers.numpy``'s region of interest (``jaxdali.ops.readers.region``);
``decoders.image_slice`` plans its decode window with the same ``SliceBox``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from jaxdali.ops.convert import convert
from jaxdali.ops.crop_plan import window_slices
from jaxdali.ops.operator import ArgValues, Operator
from jaxdali.ops.readers.region import check_roi_args, roi_box
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import to_numpy_type

__all__ = ["SLICE", "SLICE_ARGS", "SliceBox"]

#: slice's argument -> the region-of-interest name it stands for.
_ROI_NAME = {"start": "roi_start", "rel_start": "rel_roi_start", "end": "roi_end", "rel_end": "rel_roi_end",
             "shape": "roi_shape", "rel_shape": "rel_roi_shape"}


class SliceBox:
    """Resolves the slice arguments (named or positional) of one operator into boxes per sample."""

    def __init__(self, op: str, node, policy: str):
        self.op = op
        self.policy = policy
        self.positional = len(node.inputs) > 1
        if len(node.inputs) == 2:
            raise OpArgumentError(f"fn.{op}: give both the anchor and the shape inputs, or neither")
        given = {k for k in _ROI_NAME if k in node.arg_inputs or node.args.get(k) is not None}
        if self.positional and given:
            raise OpArgumentError(f"fn.{op}: the anchor and shape are given as inputs; do not also give "
                                  f"{sorted(given)}")
        check_roi_args(op, lambda name: any(_ROI_NAME[k] == name for k in given))
        self.given = given
        self.axes_given = "axes" in node.arg_inputs or node.args.get("axes") is not None
        self.normalized = (bool(node.args.get("normalized_anchor", True)), bool(node.args.get("normalized_shape", True)))

    def axes(self, args: ArgValues, i: int, layout: str, ndim: int) -> list[int]:
        if self.axes_given:
            return [int(a) for a in np.asarray(args.sample_value("axes", i)).reshape(-1)]
        names = args["axis_names"] if args.given("axis_names") else "WH"
        if layout:
            missing = [c for c in names if c not in layout]
            if missing:
                raise OpArgumentError(f"fn.{self.op}: 'axis_names' {names!r} are not all in the layout {layout!r}; "
                                      "give 'axes' or 'axis_names'")
            return [layout.index(c) for c in names]
        return [1, 0][:ndim] if names == "WH" else _no_layout(self.op, names)

    def box(self, shape: Sequence[int], layout: str, args: ArgValues, i: int,
            anchor: Any = None, size: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """``(start, end)`` over every axis of a sample of ``shape``."""
        values: dict[str, Any] = {}
        if self.positional:  # as in DALI, integer inputs are absolute whatever normalized_* say
            relative = [flag and np.asarray(v).dtype.kind == "f" for flag, v in zip(self.normalized, (anchor, size))]
            values["rel_roi_start" if relative[0] else "roi_start"] = anchor
            values["rel_roi_shape" if relative[1] else "roi_shape"] = size
        else:
            for k in self.given:
                values[_ROI_NAME[k]] = args.sample_value(k, i)
        axes = self.axes(args, i, layout, len(shape))
        try:
            return roi_box(shape, values, axes, self.policy, f"sample {i}")
        except ValueError as e:
            raise OpArgumentError(f"fn.{self.op}: {e}") from None


def _no_layout(op: str, names: str):
    raise OpArgumentError(f"fn.{op}: 'axis_names' {names!r} need an input with a layout; give 'axes' instead")


class Slice(Operator):
    """Copies the box of each sample; ``pad`` fills the part outside the sample with ``fill_values``."""

    def __init__(self, node, build):
        super().__init__(node, build)
        self.planner = SliceBox("slice", node, self.args["out_of_bounds_policy"])
        dtype = self.args.get("dtype")
        self.dtype = np.dtype(to_numpy_type(dtype)) if dtype is not None else None

    def run(self, ctx, inputs, args):
        x = inputs[0]
        layout = x.layout()
        samples = x.samples()
        anchors = inputs[1].samples() if len(inputs) > 1 else [None] * len(samples)
        sizes = inputs[2].samples() if len(inputs) > 2 else [None] * len(samples)
        dtype = self.dtype or x.np_dtype
        boxes = [self.planner.box(s.shape, layout, args, i, anchors[i], sizes[i]) for i, s in enumerate(samples)]
        fill = self._fill(layout, x.ndim(), samples, dtype)
        out: list = [None] * len(samples)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                start, end = boxes[i]
                out[i] = _copy_box(samples[i], start, end, fill, dtype)

        ctx.parallel_for(work, len(samples))
        return TensorListCPU(out, layout)

    def _fill(self, layout: str, ndim: int, samples, dtype) -> np.ndarray:
        values = np.asarray(self.args["fill_values"], np.float32)
        if values.size == 1:
            return convert(values.reshape(()), dtype)
        channel = layout.find("C")
        if channel < 0 or any(s.shape[channel] != values.size for s in samples):
            raise OpArgumentError(f"fn.slice: {values.size} 'fill_values' need a channel axis 'C' with as many "
                                  f"channels (layout {layout!r})")
        shape = [1] * ndim
        shape[channel] = values.size
        return convert(values, dtype).reshape(shape)


def _copy_box(src: np.ndarray, start: np.ndarray, end: np.ndarray, fill: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The box ``[start, end)`` of ``src`` as a new array of ``dtype``; the part outside ``src`` is ``fill``."""
    size = tuple(int(v) for v in end - start)
    src_sl, dst_sl, outside = window_slices(start.tolist(), size, src.shape)
    if not outside:
        return convert(src[src_sl], dtype).copy() if dtype == src.dtype else convert(src[src_sl], dtype)
    dst = np.empty(size, dtype)
    dst[...] = fill
    region = src[src_sl]
    if region.size:
        dst[dst_sl] = convert(region, dtype)
    return dst


SLICE_ARGS = (
    Arg("start", "ints", None, "Box start per axis of `axes`.", tensor=True),
    Arg("rel_start", "floats", None, "Box start relative to the extents.", tensor=True),
    Arg("end", "ints", None, "Box end (exclusive).", tensor=True),
    Arg("rel_end", "floats", None, "Box end relative to the extents.", tensor=True),
    Arg("shape", "ints", None, "Box shape.", tensor=True),
    Arg("rel_shape", "floats", None, "Box shape relative to the extents.", tensor=True),
    Arg("axes", "ints", None, "Axes the box arguments describe (default: [1, 0], i.e. W then H, or "
                              "`axis_names`).", tensor=True),
    Arg("axis_names", "str", None, "Axes the box arguments describe, by layout name (default 'WH')."),
    Arg("normalized_anchor", "bool", True, "A float anchor input is relative to the extents (integers are absolute)."),
    Arg("normalized_shape", "bool", True, "A float shape input is relative to the extents (integers are absolute)."),
)

SLICE = register(OpSchema(
    name="slice", impl=Slice, devices=("cpu", "gpu"), min_inputs=1, max_inputs=3,
    doc="Extracts a box of each sample. The box comes from `start`/`rel_start` and "
        "`end`/`rel_end`/`shape`/`rel_shape` over `axes`, or from two more inputs (anchor and shape, "
        "relative unless `normalized_anchor`/`normalized_shape` is False). Relative coordinates are scaled and "
        "rounded half away from zero. `out_of_bounds_policy`: 'error', 'trim_to_shape' or 'pad' (with "
        "`fill_values`, one value or one per channel).",
    args=SLICE_ARGS + (
        Arg("out_of_bounds_policy", "str", "error", "What a box leaving the sample does.",
            choices=("error", "trim_to_shape", "pad")),
        Arg("fill_values", "floats", (0.0,), "Padding value(s) of out_of_bounds_policy='pad'."),
        Arg("dtype", "dtype", None, "Output type (default: the input's)."),
        Arg("image_type", "image_type", None, "Deprecated in DALI; no effect.", hint=True)),
    rejected={"output_dtype": "deprecated alias of 'dtype'; use dtype"}))
