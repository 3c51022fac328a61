"""Adding and removing unit axes: ``expand_dims`` and ``squeeze`` (views, no copies)."""

from __future__ import annotations

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["EXPAND_DIMS", "SQUEEZE"]


class ExpandDims(Operator):
    """Inserts unit axes at ``axes`` (indices into the output's axes)."""

    def __init__(self, node, build):
        super().__init__(node, build)
        axes = self.args["axes"]
        if any(a < 0 for a in axes):
            raise OpArgumentError(f"fn.expand_dims: argument 'axes' must not be negative, got {list(axes)}")
        if len(set(axes)) != len(axes):
            raise OpArgumentError(f"fn.expand_dims: argument 'axes' has a duplicated axis: {list(axes)}")
        names = self.args["new_axis_names"]
        if names and len(names) != len(axes):
            raise OpArgumentError(f"fn.expand_dims: 'new_axis_names' {names!r} must name each of the "
                                  f"{len(axes)} new axes")
        self._axes = sorted(axes)
        self._names = "".join(n for _, n in sorted(zip(axes, names))) if names else ""

    def _out_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        out_ndim = len(shape) + len(self._axes)
        if self._axes and self._axes[-1] >= out_ndim:
            raise OpArgumentError(f"fn.expand_dims: axis {self._axes[-1]} is out of range for {len(shape)}-D input "
                                  f"(the output has {out_ndim} axes)")
        dims = iter(shape)
        return tuple(1 if d in self._axes else next(dims) for d in range(out_ndim))

    def out_layout(self, layout: str) -> str:
        if self._names and not layout:
            raise OpArgumentError("fn.expand_dims: 'new_axis_names' needs an input with a layout")
        if not self._names or not layout:
            return ""
        chars, names = iter(layout), iter(self._names)
        return "".join(next(names) if d in self._axes else next(chars) for d in range(len(layout) + len(self._axes)))

    def run(self, ctx, inputs, args):
        (x,) = inputs
        layout = self.out_layout(x.layout())
        return TensorListCPU([s.reshape(self._out_shape(s.shape)) for s in x.samples()], layout)  # views

    def run_jax(self, inputs, args):
        (x,) = inputs
        return [x.reshape((x.shape[0],) + self._out_shape(x.shape[1:]))]

    def output_layouts(self, input_layouts):
        return [self.out_layout(input_layouts[0])]


class Squeeze(Operator):
    """Removes the unit axes given by ``axes`` or ``axis_names``."""

    def __init__(self, node, build):
        super().__init__(node, build)
        if (self.args.get("axes") is None and "axes" not in node.arg_inputs) == (self.args.get("axis_names") is None):
            raise OpArgumentError("fn.squeeze: give exactly one of 'axes' and 'axis_names'")

    def _axes(self, layout: str, ndim: int, args, i: int = 0) -> list[int]:
        names = self.args.get("axis_names")
        if names is not None:
            missing = [n for n in names if n not in layout]
            if missing:
                raise OpArgumentError(f"fn.squeeze: 'axis_names' {names!r} are not all in the layout {layout!r}")
            return sorted(layout.index(n) for n in names)
        axes = [int(a) for a in np.asarray(args.sample_value("axes", i) if args is not None else self.args["axes"])
                .reshape(-1)]
        for a in axes:
            if not 0 <= a < ndim:  # DALI silently ignores every axis when one is negative
                raise OpArgumentError(f"fn.squeeze: axis {a} in 'axes' is out of range for {ndim}-D input; "
                                      f"valid axes are 0 to {ndim - 1}")
        return sorted(set(axes))

    def _squeezed(self, shape: tuple[int, ...], axes: list[int], i: int) -> tuple[int, ...]:
        for a in axes:
            if shape[a] != 1:
                raise OpArgumentError(f"fn.squeeze: axis {a} of sample {i} has extent {shape[a]}, not 1 "
                                      f"(shape {list(shape)})")
        return tuple(e for d, e in enumerate(shape) if d not in axes)

    def run(self, ctx, inputs, args):
        (x,) = inputs
        layout = x.layout()
        ndim = x.ndim()
        per_sample = [self._axes(layout, ndim, args, i) for i in range(len(x))] if args.is_per_sample("axes") \
            else [self._axes(layout, ndim, args)] * len(x)
        out_layout = "".join(c for d, c in enumerate(layout) if d not in per_sample[0]) if layout else ""
        samples = x.samples()
        return TensorListCPU([s.reshape(self._squeezed(s.shape, a, i))
                              for i, (s, a) in enumerate(zip(samples, per_sample))], out_layout)

    @property
    def run_jax(self):
        constant_axes = self.args.get("axes") is not None and "axes" not in self.node.arg_inputs
        return self._run_jax if constant_axes else None  # names need the layout, per-sample axes the host

    def _run_jax(self, inputs, args):
        (x,) = inputs
        axes = self._axes("", x.ndim - 1, None)
        return [x.reshape((x.shape[0],) + self._squeezed(tuple(x.shape[1:]), axes, 0))]

    def output_layouts(self, input_layouts):
        layout = input_layouts[0]
        if not layout:
            return [""]
        axes = self._axes(layout, len(layout), None) if self.args.get("axis_names") is not None else \
            self._axes(layout, len(layout), None)
        return ["".join(c for d, c in enumerate(layout) if d not in axes)]


EXPAND_DIMS = register(OpSchema(
    name="expand_dims", impl=ExpandDims, devices=("cpu", "gpu"),
    doc="Inserts unit axes at the `axes` of the output; `new_axis_names` names them in the layout (without "
        "it the output has no layout).",
    args=(Arg("axes", "ints", REQUIRED, "Indices of the new axes in the output.", min=0),
          Arg("new_axis_names", "str", "", "Layout names of the new axes."))))

SQUEEZE = register(OpSchema(
    name="squeeze", impl=Squeeze, devices=("cpu", "gpu"),
    doc="Removes unit axes, given by index (`axes`) or by layout name (`axis_names`).",
    args=(Arg("axes", "ints", None, "Indices of the axes to remove.", tensor=True),
          Arg("axis_names", "str", None, "Layout names of the axes to remove."))))
