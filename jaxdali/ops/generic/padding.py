"""``fn.pad``: pads samples at the end of chosen axes, to the batch's largest extent, a given shape
and/or a multiple of ``align``."""

from __future__ import annotations

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["PAD"]


class Pad(Operator):
    """Output extent per padded axis: ``shape`` (or the batch's largest extent where unset or -1), never
    below the sample's own, then rounded up to a multiple of ``align``."""

    def __init__(self, node, build):
        super().__init__(node, build)
        if (self.args.get("axes") is not None or "axes" in node.arg_inputs) and self.args.get("axis_names"):
            raise OpArgumentError("fn.pad: give 'axes' or 'axis_names', not both")

    def _axes(self, args, i: int, layout: str, ndim: int) -> list[int]:
        names = self.args.get("axis_names")
        if names:
            missing = [c for c in names if c not in layout]
            if missing:
                raise OpArgumentError(f"fn.pad: 'axis_names' {names!r} are not all in the layout {layout!r}")
            return [layout.index(c) for c in names]
        if not args.given("axes"):
            return list(range(ndim))
        axes = [int(a) for a in np.asarray(args.sample_value("axes", i)).reshape(-1)]
        for a in axes:
            if not -ndim <= a < ndim:
                raise OpArgumentError(f"fn.pad: axis {a} in 'axes' is out of range for {ndim}-D input")
        return [a % ndim for a in axes]

    @staticmethod
    def _per_axis(name: str, args, i: int, count: int) -> np.ndarray | None:
        if not args.given(name):
            return None
        v = np.asarray(args.sample_value(name, i), np.int64).reshape(-1)
        if v.size == 1:
            return np.repeat(v, count)
        if v.size != count:
            raise OpArgumentError(f"fn.pad: '{name}' has {v.size} values for {count} padded axes (sample {i})")
        return v

    def run(self, ctx, inputs, args):
        (x,) = inputs
        layout, ndim = x.layout(), x.ndim()
        samples = x.samples()
        batch_max = np.max(np.array(x.shape(), np.int64).reshape(len(samples), ndim), axis=0) if samples else None
        fills = args.per_sample("fill_value", np.float32)
        targets = []
        for i, s in enumerate(samples):
            axes = self._axes(args, i, layout, ndim)
            out = np.array(s.shape, np.int64)
            shape = self._per_axis("shape", args, i, len(axes))
            align = self._per_axis("align", args, i, len(axes))
            for k, a in enumerate(axes):
                want = batch_max[a] if shape is None or shape[k] < 0 else shape[k]
                extent = max(int(want), s.shape[a])
                if align is not None:
                    if align[k] < 1:
                        raise OpArgumentError(f"fn.pad: 'align' must be positive, got {int(align[k])} (sample {i})")
                    extent = -(-extent // int(align[k])) * int(align[k])
                out[a] = extent
            targets.append(tuple(int(v) for v in out))
        result: list = [None] * len(samples)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                s = samples[i]
                dst = np.empty(targets[i], s.dtype)
                dst[...] = _c_cast(fills[i], s.dtype)
                dst[tuple(slice(0, e) for e in s.shape)] = s
                result[i] = dst

        ctx.parallel_for(work, len(samples))
        return TensorListCPU(result, layout)


def _c_cast(value: np.floating, dtype: np.dtype):
    """``value`` in ``dtype`` as C's cast gives it (DALI converts the fill value so): integers truncate and
    wrap around (300.0 -> 44 in uint8)."""
    if np.dtype(dtype).kind in "iu":
        return np.array(np.trunc(value), np.int64).astype(dtype)
    return np.array(value).astype(dtype)


PAD = register(OpSchema(
    name="pad", impl=Pad, devices=("cpu", "gpu"),
    doc="Pads each sample at the end of the chosen axes with `fill_value`: to the largest extent in the "
        "batch, or to `shape` (per axis; -1: the largest extent; never shrinks a sample), then up to a "
        "multiple of `align`.",
    args=(Arg("fill_value", "float", 0.0, "The padding value (converted to the input type).", tensor=True),
          Arg("axes", "ints", None, "Axes to pad (default: all).", tensor=True),
          Arg("axis_names", "str", None, "Axes to pad, by layout name."),
          Arg("shape", "ints", None, "Extent per padded axis (-1: the batch's largest).", tensor=True),
          Arg("align", "ints", None, "Round each padded extent up to a multiple of this (one value: all axes).",
              tensor=True))))
