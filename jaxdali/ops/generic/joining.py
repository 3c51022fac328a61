"""Joining inputs sample by sample: ``cat`` (along an existing axis) and ``stack`` (along a new one)."""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["CAT", "STACK"]


def _jnp():
    import jax.numpy as jnp

    return jnp


#: Element types ``cv2.merge`` joins as they are, and its limit on channels.
_MERGE_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.float32, np.float64))
_MERGE_MAX_CHANNELS = 512


def _merge_channels(arrays: list[np.ndarray]) -> np.ndarray | None:
    """HWC arrays joined along C by ``cv2.merge`` (GIL-free, fast on interleaved channels, where
    ``np.concatenate`` copies a few bytes at a time); None when OpenCV cannot take them."""
    first = arrays[0]
    if first.ndim != 3 or first.dtype not in _MERGE_TYPES or first.size == 0 or \
            sum(a.shape[2] for a in arrays) > _MERGE_MAX_CHANNELS or any(a.size == 0 for a in arrays):
        return None
    h, w = first.shape[:2]
    return cv2.merge([np.ascontiguousarray(a) for a in arrays]).reshape(h, w, -1)


class _Join(Operator):
    """Shared checks: same type and rank everywhere; the axis from ``axis`` or ``axis_name``."""

    new_axis = False

    def _axis(self, layout: str, ndim: int) -> int:
        op = self.node.schema.name
        name = self.args.get("axis_name")
        if name is not None and not self.new_axis:
            if name not in layout:
                raise OpArgumentError(f"fn.{op}: argument 'axis_name' is {name!r}, but the input layout is "
                                      f"{layout!r}")
            return layout.index(name)
        out_ndim = ndim + self.new_axis
        axis = self.args["axis"]
        if not -out_ndim <= axis < out_ndim:
            raise OpArgumentError(f"fn.{op}: argument 'axis' is {axis} for {ndim}-D inputs; accepted range is "
                                  f"[{-out_ndim}, {out_ndim - 1}]")
        return axis % out_ndim

    def _layout(self, layouts: list[str], ndim: int, axis: int) -> str:
        layout = next((lay for lay in layouts if lay), "")
        if not self.new_axis:
            return layout
        name = self.args.get("axis_name")
        if name is None or not layout:
            return ""
        return layout[:axis] + name + layout[axis:]

    def _check(self, inputs: list[TensorListCPU]) -> tuple[int, str]:
        op = self.node.schema.name
        first = inputs[0]
        for k, tl in enumerate(inputs[1:], 1):
            if tl.np_dtype != first.np_dtype or tl.ndim() != first.ndim():
                raise OpArgumentError(f"fn.{op}: all inputs must have the same type and number of dimensions; "
                                      f"input 0: {first.np_dtype}, {first.ndim()}-D, input {k}: {tl.np_dtype}, "
                                      f"{tl.ndim()}-D")
            if len(tl) != len(first):
                raise OpArgumentError(f"fn.{op}: input {k} has {len(tl)} samples, input 0 has {len(first)}")
        ndim = first.ndim()
        axis = self._axis(next((tl.layout() for tl in inputs if tl.layout()), ""), ndim)
        return axis, self._layout([tl.layout() for tl in inputs], ndim, axis)

    def run(self, ctx, inputs, args):
        axis, layout = self._check(inputs)
        shapes = [tl.shape() for tl in inputs]
        for i in range(len(inputs[0])):
            self._check_shapes([s[i] for s in shapes], axis, i)
        samples = [tl.samples() for tl in inputs]
        out: list = [None] * len(inputs[0])

        merge = not self.new_axis and axis == 2  # the channels of HWC-like samples

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                arrays = [s[i] for s in samples]
                joined = _merge_channels(arrays) if merge else None
                out[i] = joined if joined is not None else self._join(arrays, axis, np)

        ctx.parallel_for(work, len(out))
        return TensorListCPU(out, layout)

    def _join(self, arrays, axis: int, xp):
        return xp.stack(arrays, axis) if self.new_axis else xp.concatenate(arrays, axis)

    def _check_shapes(self, shapes: list[tuple[int, ...]], axis: int, sample: int) -> None:
        ref = shapes[0]
        for k, shape in enumerate(shapes[1:], 1):
            same = shape == ref if self.new_axis else all(a == b for d, (a, b) in enumerate(zip(shape, ref))
                                                         if d != axis)
            if not same:
                rule = "must have equal shapes" if self.new_axis else f"may differ only in the axis {axis}"
                raise OpArgumentError(f"fn.{self.node.schema.name}: the inputs {rule}; sample {sample} has shape "
                                      f"{list(ref)} in input 0 and {list(shape)} in input {k}")

    @property
    def run_jax(self):
        by_name = self.args.get("axis_name") is not None and not self.new_axis
        return None if by_name else self._run_jax  # the axis name needs the layout: on the host

    def _run_jax(self, inputs, args):
        axis = self._axis("", inputs[0].ndim - 1)
        return [self._join(list(inputs), axis + 1, _jnp())]

    def output_layouts(self, input_layouts):
        layout = next((lay for lay in input_layouts if lay), "")
        if not self.new_axis or not layout:
            return [layout if not self.new_axis else ""]
        return [self._layout(input_layouts, len(layout), self._axis(layout, len(layout)))]


class Cat(_Join):
    new_axis = False


class Stack(_Join):
    new_axis = True


_ARGS = (Arg("axis", "int", 0, "The axis (negative: counted from the back)."),)

CAT = register(OpSchema(
    name="cat", impl=Cat, devices=("cpu", "gpu"), min_inputs=1, max_inputs=999,
    doc="Concatenates the inputs sample by sample along an existing axis; the inputs may differ in size only "
        "along that axis.",
    args=_ARGS + (Arg("axis_name", "str", None, "The axis by its layout name (instead of `axis`)."),)))

STACK = register(OpSchema(
    name="stack", impl=Stack, devices=("cpu", "gpu"), min_inputs=1, max_inputs=999,
    doc="Stacks the inputs sample by sample along a new axis; the inputs must have equal shapes.",
    args=_ARGS + (Arg("axis_name", "str", None, "Layout name of the new axis (the output has a layout only "
                                                "when this is given)."),)))
