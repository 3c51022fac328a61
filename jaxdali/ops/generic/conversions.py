"""Type and value conversions: ``cast_like``, ``copy``, ``reinterpret``, ``lookup_table``."""

from __future__ import annotations

import numpy as np

from jaxdali.ops.geometry import convert
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import OpSchema, register
from jaxdali.pipeline.tensors import TensorListCPU

__all__ = ["CAST_LIKE", "COPY"]


def _jnp():
    import jax.numpy as jnp

    return jnp


def convert_samples(ctx, data: TensorListCPU, dtype: np.dtype) -> TensorListCPU:
    """Every sample converted to ``dtype`` (``convert``'s rules), sample by sample on the worker pool."""
    samples = data.samples()
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
