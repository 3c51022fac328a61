"""Type and value conversions: ``cast_like``, ``copy``, ``lookup_table``."""

from __future__ import annotations

import numpy as np

from jaxdali.core.buffers import owned_empty
from jaxdali.ops.convert import convert
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, to_numpy_type

__all__ = ["CAST_LIKE", "COPY", "LOOKUP_TABLE"]


def _jnp():
    import jax.numpy as jnp

    return jnp


def convert_samples(ctx, data: TensorListCPU, dtype: np.dtype) -> TensorListCPU:
    """Every sample converted to ``dtype`` (``convert``'s rules), sample by sample on the worker pool.

    A batch already of ``dtype`` is returned as it is; a conversion that is exact
    (``np.can_cast(..., "safe")``) writes straight into one dense output."""
    if data.np_dtype == dtype:  # nothing to convert: the same batch, no copy
        return data
    samples = data.samples()
    shapes = data.shape()
    if samples and len(set(shapes)) == 1 and np.can_cast(data.np_dtype, dtype, "safe"):
        dense = owned_empty((len(samples),) + shapes[0], dtype)

        def copy(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                np.copyto(dense[i], samples[i], casting="safe")

        ctx.parallel_for(copy, len(samples))
        return TensorListCPU(dense, data.layout())
    out: list = [None] * len(samples)

    def work(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            out[i] = convert(samples[i], dtype)

    ctx.parallel_for(work, len(samples))
    return TensorListCPU(out, data.layout())


class CastLike(Operator):
    """Converts the first input to the second input's type (as ``cast``: rounding, saturation)."""

    def run(self, ctx, inputs, args):
        data, like = inputs
        return convert_samples(ctx, data, like.np_dtype)

    def run_jax(self, inputs, args):
        data, like = inputs
        return [convert(data, np.dtype(like.dtype), _jnp())]


class Copy(Operator):
    """A copy of the input, sample by sample on the worker pool (device: the same values, no work)."""

    def run(self, ctx, inputs, args):
        (data,) = inputs
        samples = data.samples()
        out: list = [None] * len(samples)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                out[i] = np.array(samples[i])

        ctx.parallel_for(work, len(samples))
        return TensorListCPU(out, data.layout())

    def run_jax(self, inputs, args):
        return [inputs[0]]


CAST_LIKE = register(OpSchema(
    name="cast_like", impl=CastLike, devices=("cpu", "gpu"), min_inputs=2, max_inputs=2,
    doc="Casts the first input to the type of the second (float -> integer rounds half away from zero and "
        "saturates, as `cast`)."))

COPY = register(OpSchema(
    name="copy", impl=Copy, devices=("cpu", "gpu"), doc="Copies the input."))


#: Table types OpenCV's LUT keeps (it narrows 64-bit integers).
_CV_LUT_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.float32,
                                            np.float64))


def _opencv_lut(sample: np.ndarray, table: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = table[sample]`` for a uint8 sample and a 256-entry table, by ``cv2.LUT`` on
    one-channel views (``out``: contiguous)."""
    import cv2

    rows = sample.shape[0] if sample.ndim > 1 else 1
    cv2.LUT(np.ascontiguousarray(sample).reshape(rows, -1), table, dst=out.reshape(rows, -1))


class LookupTable(Operator):
    """Maps integer keys to values: ``values[k]`` where ``keys[k]`` equals the input, else ``default_value``."""

    max_key = 65535

    def __init__(self, node, build):
        super().__init__(node, build)
        keys, values = self.args["keys"], self.args["values"]
        if len(keys) != len(values):
            raise OpArgumentError(f"fn.lookup_table: 'keys' has {len(keys)} entries and 'values' {len(values)}; "
                                  "they must match")
        if keys and (min(keys) < 0 or max(keys) > self.max_key):
            raise OpArgumentError(f"fn.lookup_table: 'keys' must be in [0, {self.max_key}], got {list(keys)}")
        dtype = np.dtype(to_numpy_type(self.args["dtype"]))
        table = np.full(max(keys, default=-1) + 2, self.args["default_value"], np.float64)
        table[list(keys)] = values
        self._table = convert(table, dtype)  # the last entry is the default, for keys outside the table

    def run(self, ctx, inputs, args):
        (x,) = inputs
        if x.np_dtype.kind not in "iu":
            raise OpArgumentError(f"fn.lookup_table: the input must be of an integer type, got {x.np_dtype}")
        table, last = self._table, len(self._table) - 1
        direct = x.np_dtype.kind == "u" and x.np_dtype.itemsize <= 2  # every value indexes a full-size table
        if direct:
            table = np.concatenate([table, np.repeat(table[-1:], max(0, (1 << 8 * x.np_dtype.itemsize) - last))])
        opencv = x.np_dtype == np.uint8 and table.dtype in _CV_LUT_TYPES
        samples, shapes = x.samples(), x.shape()
        # one dense output when the samples share a shape (reused memory: see core.buffers)
        dense = owned_empty((len(shapes),) + shapes[0], table.dtype) if shapes and shapes.count(shapes[0]) == len(
            shapes) else None
        out = list(dense) if dense is not None else [np.empty(s, table.dtype) for s in shapes]

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                s = samples[i]
                if opencv and s.size:  # OpenCV's vectorised LUT, about 3x NumPy's gather
                    _opencv_lut(s, table[:256], out[i])
                else:
                    np.take(table, s if direct else np.where((s >= 0) & (s < last), s, last), out=out[i])

        ctx.parallel_for(work, len(samples))
        return TensorListCPU(dense if dense is not None else out, x.layout())

    def run_jax(self, inputs, args):
        jnp = _jnp()
        (x,) = inputs
        last = len(self._table) - 1
        index = jnp.where((x >= 0) & (x < last), x, last)
        return [jnp.asarray(self._table)[index]]


LOOKUP_TABLE = register(OpSchema(
    name="lookup_table", impl=LookupTable, devices=("cpu", "gpu"),
    doc="Maps integer inputs through a table: an input equal to `keys[k]` becomes `values[k]` (converted to "
        "`dtype` with rounding and saturation), any other input `default_value`.",
    args=(Arg("keys", "ints", (), "Input values to map, in [0, 65535]."),
          Arg("values", "floats", (), "The value of each key."),
          Arg("default_value", "float", 0.0, "The value of inputs that are not keys."),
          Arg("dtype", "dtype", DALIDataType.FLOAT, "Output type.")),
    rejected={"output_dtype": "deprecated alias of 'dtype'; use dtype"}))
