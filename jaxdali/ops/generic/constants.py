"""Batches of one value: ``constant``, ``full``, ``zeros``, ``ones`` and their ``_like`` forms."""

from __future__ import annotations

import numpy as np

from jaxdali.ops.generic.shapes import sample_shapes
from jaxdali.ops.geometry import convert
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, to_numpy_type

__all__ = ["CONSTANT", "FULL", "ZEROS", "ONES", "FULL_LIKE", "ZEROS_LIKE", "ONES_LIKE"]


def _batch_of(value: np.ndarray, n: int, layout: str) -> TensorListCPU:
    """``n`` samples equal to ``value`` as one dense batch (a read-only broadcast view, no copy)."""
    return TensorListCPU(np.broadcast_to(value, (n,) + value.shape), layout)


class Constant(Operator):
    """Every sample is ``fdata`` or ``idata``, reshaped to ``shape`` (a single value is repeated)."""

    def __init__(self, node, build):
        super().__init__(node, build)
        fdata, idata = self.args.get("fdata"), self.args.get("idata")
        if (fdata is None) == (idata is None):
            raise OpArgumentError("fn.constant: give exactly one of 'fdata' and 'idata'")
        data = np.asarray(fdata, np.float32) if fdata is not None else np.asarray(idata, np.int64)
        shape = self.args.get("shape")
        shape = tuple(shape) if shape is not None else data.shape
        if data.size != 1 and data.size != int(np.prod(shape)):
            raise OpArgumentError(f"fn.constant: {data.size} values of '{'fdata' if fdata is not None else 'idata'}' "
                                  f"do not fill 'shape' {list(shape)} (give 1 value or {int(np.prod(shape))})")
        dtype = self.args.get("dtype")
        target = to_numpy_type(dtype) if dtype is not None else (np.float32 if fdata is not None else np.int32)
        data = convert(data, np.dtype(target))
        self._value = np.ascontiguousarray(np.broadcast_to(data.reshape(()), shape)) if data.size == 1 else \
            data.reshape(shape)

    def run(self, ctx, inputs, args):
        return _batch_of(self._value, ctx.batch_size, self.args["layout"])


class Full(Operator):
    """Each sample is its ``fill_value`` sample broadcast (NumPy rules) to ``shape``."""

    def run(self, ctx, inputs, args):
        (fill,) = inputs
        n = len(fill)
        shapes = sample_shapes("full", args, n)
        layout = self.args.get("layout") or ""
        dense = fill.dense()
        if shapes is None:
            return TensorListCPU(dense.copy() if dense is not None else [np.array(s) for s in fill.samples()], layout)
        if dense is not None and len(set(shapes)) == 1:
            target = (n,) + shapes[0]
            return TensorListCPU(_broadcast("full", dense, target, "fill_value", slice(1, None)), layout)
        return TensorListCPU([_broadcast("full", np.asarray(f), s, "fill_value", slice(None), i)
                              for i, (f, s) in enumerate(zip(fill.samples(), shapes))], layout)


def _broadcast(op: str, value: np.ndarray, shape: tuple, what: str, sample_axes: slice,
               sample: int | None = None) -> np.ndarray:
    """``value`` broadcast to ``shape`` as a new array; OpArgumentError when NumPy's rules do not allow it."""
    given = value.shape[sample_axes]
    if sample_axes.start:  # a batch: align the sample axes, broadcast within each sample
        extra = len(shape) - value.ndim
        value = value.reshape(value.shape[:1] + (1,) * extra + value.shape[1:]) if extra > 0 else value
    try:
        return np.array(np.broadcast_to(value, shape))
    except ValueError:
        where = f" (sample {sample})" if sample is not None else ""
        raise OpArgumentError(f"fn.{op}: {what} of shape {list(given)} cannot be broadcast to "
                              f"the shape {list(shape[sample_axes])}{where}") from None


def _filled(shape: tuple, value: int, dtype) -> np.ndarray:
    """A new array of ``shape`` filled with 0 or 1 (zeros come from the allocator, already cleared)."""
    return np.zeros(shape, dtype) if value == 0 else np.ones(shape, dtype)


class _Filled(Operator):
    """``zeros``/``ones``: every sample is ``shape`` filled with one value of ``dtype``."""

    value = 0

    def run(self, ctx, inputs, args):
        n = ctx.batch_size
        shapes = sample_shapes(self.node.schema.name, args, n) or [()] * n
        dtype = to_numpy_type(self.args["dtype"])
        layout = self.args.get("layout") or ""
        if len(set(shapes)) == 1:
            return TensorListCPU(_filled((n,) + shapes[0], self.value, dtype), layout)
        return TensorListCPU([_filled(s, self.value, dtype) for s in shapes], layout)


class Zeros(_Filled):
    value = 0


class Ones(_Filled):
    value = 1


class FullLike(Operator):
    """Samples shaped and typed like ``data``'s, filled with ``fill_value`` broadcast to them."""

    def run(self, ctx, inputs, args):
        data, fill = inputs
        dtype = data.np_dtype
        shapes = data.shape()
        fill_dense = fill.dense()
        if len(set(shapes)) == 1 and fill_dense is not None:
            target = (len(data),) + shapes[0]
            out = _broadcast("full_like", convert(fill_dense, dtype), target, "fill_value", slice(1, None))
            return TensorListCPU(out, data.layout())
        return TensorListCPU([_broadcast("full_like", convert(np.asarray(f), dtype), s, "fill_value", slice(None), i)
                              for i, (f, s) in enumerate(zip(fill.samples(), shapes))], data.layout())


class _FilledLike(Operator):
    """``zeros_like``/``ones_like``: samples shaped like the input's, of ``dtype`` (default: the input's)."""

    value = 0

    def run(self, ctx, inputs, args):
        (data,) = inputs
        dtype = to_numpy_type(self.args["dtype"]) if self.args.get("dtype") is not None else data.np_dtype
        shapes = data.shape()
        if len(set(shapes)) == 1:
            return TensorListCPU(_filled((len(data),) + shapes[0], self.value, dtype), data.layout())
        return TensorListCPU([_filled(s, self.value, dtype) for s in shapes], data.layout())


class ZerosLike(_FilledLike):
    value = 0


class OnesLike(_FilledLike):
    value = 1


_SHAPE = Arg("shape", "ints", None, "Shape of each sample (default: a scalar).", tensor=True)
_LAYOUT = Arg("layout", "str", None, "Layout of each sample.")
_FILLED_DTYPE = Arg("dtype", "dtype", DALIDataType.INT32, "Output type.")
_LIKE_DTYPE = Arg("dtype", "dtype", None, "Output type (default: the input's type).")

CONSTANT = register(OpSchema(
    name="constant", impl=Constant, devices=("cpu", "gpu"), min_inputs=0, max_inputs=0,
    doc="A constant batch: every sample holds `fdata` (float32 by default) or `idata` (int32 by default), "
        "reshaped to `shape`; a single value fills the whole shape.",
    args=(Arg("fdata", "floats", None, "Floating-point contents."),
          Arg("idata", "ints", None, "Integer contents."),
          Arg("shape", "ints", None, "Shape of each sample (default: the length of the data).", min=0),
          Arg("dtype", "dtype", None, "Output type (converted with saturation and rounding)."),
          Arg("layout", "str", "", "Layout of each sample."))))

FULL = register(OpSchema(
    name="full", impl=Full, min_inputs=1, max_inputs=1,
    doc="Samples of `shape` filled with the input `fill_value` (broadcast with NumPy's rules); the type is "
        "the fill value's. Without `shape` each sample is a copy of its fill value.",
    args=(_SHAPE, _LAYOUT)))

ZEROS = register(OpSchema(
    name="zeros", impl=Zeros, min_inputs=0, max_inputs=0,
    doc="Samples of `shape` filled with 0.", args=(_SHAPE, _FILLED_DTYPE, _LAYOUT)))

ONES = register(OpSchema(
    name="ones", impl=Ones, min_inputs=0, max_inputs=0,
    doc="Samples of `shape` filled with 1.", args=(_SHAPE, _FILLED_DTYPE, _LAYOUT)))

FULL_LIKE = register(OpSchema(
    name="full_like", impl=FullLike, min_inputs=2, max_inputs=2,
    doc="Samples with the shape, type and layout of the first input, filled with the second input "
        "(broadcast; converted to the type with rounding and saturation)."))

ZEROS_LIKE = register(OpSchema(
    name="zeros_like", impl=ZerosLike, min_inputs=1, max_inputs=1,
    doc="Samples with the shape and layout of the input, filled with 0.", args=(_LIKE_DTYPE,)))

ONES_LIKE = register(OpSchema(
    name="ones_like", impl=OnesLike, min_inputs=1, max_inputs=1,
    doc="Samples with the shape and layout of the input, filled with 1.", args=(_LIKE_DTYPE,)))
