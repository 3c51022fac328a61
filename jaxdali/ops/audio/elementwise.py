"""Per-sample elementwise audio operators: ``fn.preemphasis_filter`` and ``fn.to_decibels``."""

from __future__ import annotations

import numpy as np

from jaxdali.core.buffers import owned_empty
from jaxdali.ops.convert import convert
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, to_numpy_type

__all__ = ["PREEMPHASIS_FILTER", "TO_DECIBELS", "decibels"]


class PreemphasisFilter(Operator):
    """``y[t] = x[t] - coeff * x[t - 1]`` over each sample's flattened values, in float32."""

    def run(self, ctx, inputs, args):
        (x,) = inputs
        coeff = args.per_sample("preemph_coeff", np.float32)
        border = self.args["border"]
        dtype = np.dtype(to_numpy_type(self.args["dtype"]))
        samples = x.samples()
        out: list = [None] * len(samples)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                s = samples[i].astype(np.float32, copy=False).reshape(-1)
                y = np.empty_like(s)
                if s.size:
                    np.subtract(s[1:], coeff[i] * s[:-1], out=y[1:])
                    if border == "zero":
                        y[0] = s[0]
                    else:
                        prev = s[0] if border == "clamp" or s.size == 1 else s[1]
                        y[0] = s[0] - coeff[i] * prev
                out[i] = convert(y, dtype).reshape(samples[i].shape)

        ctx.parallel_for(work, len(samples))
        return TensorListCPU(out, x.layout())


def decibels(x: np.ndarray, multiplier: float, reference: float | None, cutoff_db: float,
             out: np.ndarray | None = None) -> np.ndarray:
    """``multiplier * log10(max(x / reference, 10 ** (cutoff_db / multiplier)))`` in float32 for a batch
    ``x`` (samples first), into ``out`` when given; the reference defaults to each sample's maximum (1 when
    that is not positive)."""
    x = x.astype(np.float32, copy=False)
    if reference is None:
        flat = x.reshape(len(x), -1)
        peak = flat.max(axis=1) if flat.shape[1] else np.zeros(len(x), np.float32)
        scale = (np.float32(1) / np.where(peak > 0, peak, np.float32(1))).reshape((-1,) + (1,) * (x.ndim - 1))
    else:
        scale = np.float32(1.0 / reference)
    floor = np.float32(10.0 ** (cutoff_db / multiplier))
    ratio = np.multiply(x, scale, out=out)
    np.maximum(ratio, floor, out=ratio)
    np.log10(ratio, out=ratio)
    ratio *= np.float32(multiplier)
    return ratio


class ToDecibels(Operator):
    """``decibels`` of each sample, its own maximum as reference unless ``reference`` is given."""

    def run(self, ctx, inputs, args):
        (x,) = inputs
        if x.np_dtype != np.float32:
            raise TypeError(f"fn.to_decibels: the input must be FLOAT (float32), got {x.np_dtype}")
        reference = self.args["reference"] or None
        multiplier, cutoff = self.args["multiplier"], self.args["cutoff_db"]
        dense = x.dense()
        if dense is not None:  # chunks of the batch at once, into one output batch
            result = owned_empty(dense.shape, np.float32)

            def work(lo: int, hi: int) -> None:
                decibels(dense[lo:hi], multiplier, reference, cutoff, out=result[lo:hi])

            ctx.parallel_for(work, len(dense))
            return TensorListCPU(result, x.layout())
        samples = x.samples()
        out: list = [None] * len(samples)

        def each(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                out[i] = decibels(samples[i][None], multiplier, reference, cutoff)[0]

        ctx.parallel_for(each, len(samples))
        return TensorListCPU(out, x.layout())


PREEMPHASIS_FILTER = register(OpSchema(
    name="preemphasis_filter", impl=PreemphasisFilter, devices=("cpu", "gpu"),
    doc="Pre-emphasis filter `y[t] = x[t] - coeff * x[t-1]`; the first sample's predecessor follows `border` "
        "(\"clamp\": x[0], \"reflect\": x[1], \"zero\": 0).\n\n.. note:: Bit-exact with DALI 2.4. With "
        "device='gpu' it runs on the host.",
    args=(Arg("preemph_coeff", "float", 0.97, "Pre-emphasis coefficient.", tensor=True),
          Arg("border", "str", "clamp", "Value before the first sample.", choices=("zero", "clamp", "reflect")),
          Arg("dtype", "dtype", DALIDataType.FLOAT, "Output type.")),
))

TO_DECIBELS = register(OpSchema(
    name="to_decibels", impl=ToDecibels, devices=("cpu", "gpu"),
    doc="Converts magnitudes to decibels: `multiplier * log10(max(x / reference, 10^(cutoff_db / multiplier)))`; "
        "the reference is each sample's maximum unless `reference` is given.\n\n.. note:: Within float32 "
        "log10 rounding of DALI 2.4 (1e-5 dB). With device='gpu' it runs on the host.",
    args=(Arg("multiplier", "float", 10.0, "Factor of the logarithm (10 for power, 20 for amplitude)."),
          Arg("reference", "float", 0.0, "Reference magnitude (0: each sample's maximum)."),
          Arg("cutoff_db", "float", -200.0, "Lowest output in dB.")),
))
