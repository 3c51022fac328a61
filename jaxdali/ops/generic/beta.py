"""``fn.random.beta``: Beta-distributed values, each sample from its own counter-based generator.

A sample's values come from NumPy's Philox generator keyed by the sample's key (``jaxdali.ops.rng``:
a pure function of seed, iteration and sample index), so they do not depend on thread scheduling or
on the other samples, and a checkpoint needs only the iteration index. The gamma variates are drawn
by NumPy in C (Marsaglia and Tsang), in the output type, with the GIL released.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.random import _SHAPE_ARGS, _RandomOp
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.types import DALIDataType

__all__ = ["BETA"]

_BETA_STREAM = 0xBE7A  # second half of each sample's 128-bit Philox key
_PHILOX_START = {"bit_generator": "Philox", "buffer": np.zeros(4, np.uint64), "buffer_pos": 4, "has_uint32": 0,
                 "uinteger": 0}


def _start(bit_generator: np.random.Philox, key: np.uint64) -> None:
    """Puts the generator at the start of the stream of the sample with ``key``."""
    bit_generator.state = dict(_PHILOX_START, state={"counter": np.zeros(4, np.uint64),
                                                     "key": np.array([key, _BETA_STREAM], np.uint64)})


def beta_rows(keys: np.ndarray, alpha: np.ndarray, beta: np.ndarray, out: np.ndarray) -> None:
    """Fills row ``i`` of ``out`` (float32 or float64) with Beta(alpha[i], beta[i]) values of the sample
    with ``keys[i]``, as X / (X + Y), X ~ Gamma(alpha), Y ~ Gamma(beta)."""
    bit_generator = np.random.Philox(key=0)
    generator = np.random.Generator(bit_generator)
    width, dtype = out.shape[1], out.dtype
    for i, key in enumerate(keys):
        _start(bit_generator, key)
        x = generator.standard_gamma(alpha[i], width, dtype)
        y = generator.standard_gamma(beta[i], width, dtype)
        with np.errstate(invalid="ignore"):
            np.divide(x, x + y, out=out[i])
        # both gammas can underflow to 0 for tiny shapes: the limit picks 0 or 1 with odds alpha : beta
        tie = np.isnan(out[i])
        if tie.any():
            out[i, tie] = generator.random(int(tie.sum())) < alpha[i] / (alpha[i] + beta[i])


class Beta(_RandomOp):
    """Beta(alpha, beta) values; sample rows shared out on the worker pool."""

    def __init__(self, node, build):
        super().__init__(node, build)
        dtype = self.args.get("dtype")
        if dtype is not None and dtype not in (DALIDataType.FLOAT, DALIDataType.FLOAT64):
            raise OpArgumentError(f"fn.random.beta: argument 'dtype' must be FLOAT or FLOAT64, got {dtype!r}")

    def draw_batch(self, ctx, keys, width, inputs, args, n):
        alpha = args.per_sample("alpha", np.float64)
        beta = args.per_sample("beta", np.float64)
        for name, values in (("alpha", alpha), ("beta", beta)):
            bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
            if bad.size:
                raise OpArgumentError(f"fn.random.beta: '{name}' must be a positive finite number, got "
                                      f"{values[bad[0]]:g} for sample {int(bad[0])}")
        out = np.empty((n, width), self._dtype())

        def work(lo: int, hi: int) -> None:
            beta_rows(keys[lo:hi], alpha[lo:hi], beta[lo:hi], out[lo:hi])

        ctx.parallel_for(work, n)
        return out


BETA = register(OpSchema(
    name="random.beta", impl=Beta, min_inputs=0, max_inputs=1,
    doc="Beta-distributed values in [0, 1] with shape parameters `alpha` and `beta` (float32 by default).",
    args=(Arg("alpha", "float", 1.0, "First shape parameter (> 0).", tensor=True),
          Arg("beta", "float", 1.0, "Second shape parameter (> 0).", tensor=True),
          Arg("dtype", "dtype", None, "Output type: FLOAT or FLOAT64.")) + _SHAPE_ARGS))
