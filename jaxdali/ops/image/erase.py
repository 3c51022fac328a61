"""``fn.erase``: fills rectangular regions (any number per sample, any axes) with a value.

Each region's bounds along an axis are ``floor(anchor)`` and ``floor(anchor + shape)`` (after the
optional normalisation by the extent and centring), clipped to the sample, as in DALI 2.4. The copy
and the fills run per sample on the worker pool.
"""

from __future__ import annotations

import math

import numpy as np

from jaxdali.ops.geometry import convert, sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU

__all__ = ["ERASE"]

_OP = "erase"


class Erase(Operator):
    """Copies the input and fills the regions given by ``anchor``/``shape`` with ``fill_value``."""

    def __init__(self, node, build):
        super().__init__(node, build)
        if self.args.get("axes") is not None and self.args.get("axis_names") is not None:
            raise OpArgumentError(f"fn.{_OP}: arguments 'axes' and 'axis_names' are mutually exclusive")

    def _axes(self, layout: str, ndim: int) -> list[int]:
        axes = self.args.get("axes")
        if axes is not None:
            bad = [a for a in axes if not -ndim <= a < ndim]
            if bad:
                raise ValueError(f"fn.{_OP}: argument 'axes' has {bad}, out of range for {ndim}-D input")
            return [a % ndim for a in axes]
        names = self.args.get("axis_names") or "HW"
        missing = [c for c in names if c not in layout]
        if missing:
            raise ValueError(f"fn.{_OP}: argument 'axis_names' {names!r} names axes {missing} absent from the "
                             f"input layout {layout!r}")
        return [layout.index(c) for c in names]

    def _regions(self, args, i: int, shape: tuple, axes: list[int], who: str) -> list[tuple[slice, ...]]:
        """The index tuples of sample ``i``'s regions (clipped; empty ones dropped)."""
        shape_arg = np.asarray(args.sample_value("shape", i), np.float64).reshape(-1)
        anchor_arg = np.asarray(args.sample_value("anchor", i), np.float64).reshape(-1)
        if anchor_arg.size == 0:
            anchor_arg = np.zeros_like(shape_arg)
        k = len(axes)
        if anchor_arg.size != shape_arg.size or shape_arg.size % k:
            raise ValueError(f"fn.{_OP}: 'anchor' ({anchor_arg.size} values) and 'shape' ({shape_arg.size} values) "
                             f"must hold the same number of values, a multiple of the {k} erased axes, for {who}")
        extent = np.array([shape[a] for a in axes], np.float64)
        regions = []
        for anchor, size in zip(anchor_arg.reshape(-1, k), shape_arg.reshape(-1, k)):
            if self.args["normalized"] or self.args["normalized_anchor"]:
                anchor = anchor * extent
            if self.args["normalized"] or self.args["normalized_shape"]:
                size = size * extent
            if self.args["centered_anchor"]:
                anchor = anchor - size / 2
            index = [slice(None)] * len(shape)
            for axis, a, s, e in zip(axes, anchor, size, extent):
                lo, hi = max(math.floor(a), 0), min(math.floor(a + s), int(e))
                index[axis] = slice(lo, max(lo, hi))
            regions.append(tuple(index))
        return regions

    def _fill(self, args, i: int, shape: tuple, layout: str, dtype: np.dtype, who: str) -> np.ndarray:
        value = np.asarray(args.sample_value("fill_value", i), np.float64).reshape(-1)
        if value.size == 1:
            return convert(value, dtype).reshape(())
        c_axis = layout.find("C") if layout else len(shape) - 1
        if c_axis < 0 or shape[c_axis] != value.size:
            channels = shape[c_axis] if c_axis >= 0 else "no"
            raise ValueError(f"fn.{_OP}: 'fill_value' has {value.size} values but {who} has {channels} channels")
        fill_shape = [1] * len(shape)
        fill_shape[c_axis] = value.size
        return convert(value, dtype).reshape(fill_shape)

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        layout = x.layout()
        shapes = [tuple(s) for s in x.shape()]
        axes = self._axes(layout, x.ndim()) if n else []
        who = [sample_name(x, i) for i in range(n)]
        regions = [self._regions(args, i, shapes[i], axes, who[i]) for i in range(n)]
        fills = [self._fill(args, i, shapes[i], layout, x.np_dtype, who[i]) for i in range(n)]
        dense = owned_empty((n,) + shapes[0], x.np_dtype) if n and len(set(shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, x.np_dtype) for i, s in enumerate(shapes)]
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                np.copyto(outs[i], samples[i])
                for index in regions[i]:
                    outs[i][index] = fills[i]

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


ERASE = register(OpSchema(
    name=_OP, impl=Erase, devices=("cpu", "gpu"),
    doc="Erases regions: every `len(axes)` values of `anchor` and `shape` describe one region (in the order of "
        "`axis_names`/`axes`), filled with `fill_value` (one value, or one per channel). Bounds along each axis "
        "are floor(anchor) and floor(anchor + shape), after scaling by the extent (`normalized*`) and centring "
        "(`centered_anchor`), clipped to the sample. Without `shape` nothing is erased.\n\n"
        ".. note:: With device='gpu' it runs on the host.",
    args=(Arg("anchor", "floats", (), "Start of each region (default: 0).", tensor=True),
          Arg("shape", "floats", (), "Extent of each region.", tensor=True),
          Arg("axes", "ints", None, "Erased axes by index (instead of `axis_names`)."),
          Arg("axis_names", "str", None, "Erased axes by layout name; default 'HW'."),
          Arg("fill_value", "floats", (0.0,), "Value of the erased elements: one, or one per channel.", tensor=True),
          Arg("normalized_anchor", "bool", False, "`anchor` is relative to the extent (0..1)."),
          Arg("normalized_shape", "bool", False, "`shape` is relative to the extent (0..1)."),
          Arg("normalized", "bool", False, "Both `anchor` and `shape` are relative."),
          Arg("centered_anchor", "bool", False, "`anchor` is the centre of the region.")),
))
