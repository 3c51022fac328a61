"""``fn.random.beta``: Beta-distributed values from the counter-based generator (``jaxdali.ops.rng``)."""

from __future__ import annotations

import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.random import _SHAPE_ARGS, _RandomOp
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.types import DALIDataType

__all__ = ["BETA"]

_GAMMA_STREAMS = 1 << 16  # stream ids of the second gamma variable start here


def gamma(keys: np.ndarray, width: int, shape: np.ndarray, first_stream: int) -> np.ndarray:
    """Gamma(shape, 1) values, (len(keys), width), by Marsaglia and Tsang's method.

    Every element tries candidates from its own numbered streams until one is accepted, so its value
    depends only on (key, element), whatever the other elements need. Shapes below 1 use
    Gamma(shape + 1) * U ** (1 / shape).
    """
    boosted = np.where(shape < 1, shape + 1, shape)
    d = boosted - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    out = np.full((len(keys), width), np.nan)
    attempt = 0
    while np.isnan(out).any():
        stream = first_stream + 2 * attempt
        z = rng.normal(keys, width, stream)
        u = rng.uniform(keys, width, stream + 1)
        v = (1.0 + c * z) ** 3
        with np.errstate(invalid="ignore", divide="ignore"):
            accept = (v > 0) & (np.log(u) < 0.5 * z * z + d - d * v + d * np.log(v))
        take = np.isnan(out) & accept
        out[take] = (d * v)[take]
        attempt += 1
    small = np.broadcast_to(shape < 1, out.shape)
    if small.any():
        u = rng.uniform(keys, width, first_stream - 1)
        with np.errstate(divide="ignore"):
            out = np.where(small, out * u ** (1.0 / shape), out)
    return out


class Beta(_RandomOp):
    """Beta(alpha, beta) as X / (X + Y) with X ~ Gamma(alpha), Y ~ Gamma(beta)."""

    def __init__(self, node, build):
        super().__init__(node, build)
        dtype = self.args.get("dtype")
        if dtype is not None and dtype not in (DALIDataType.FLOAT, DALIDataType.FLOAT64):
            raise OpArgumentError(f"fn.random.beta: argument 'dtype' must be FLOAT or FLOAT64, got {dtype!r}")

    def draw(self, keys, width, inputs, args, n):
        alpha = args.per_sample("alpha", np.float64)
        beta = args.per_sample("beta", np.float64)
        for name, values in (("alpha", alpha), ("beta", beta)):
            bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
            if bad.size:
                raise OpArgumentError(f"fn.random.beta: '{name}' must be a positive finite number, got "
                                      f"{values[bad[0]]:g} for sample {int(bad[0])}")
        x = gamma(keys, width, alpha[:, None], 1)
        y = gamma(keys, width, beta[:, None], _GAMMA_STREAMS)
        with np.errstate(invalid="ignore"):
            out = x / (x + y)
        # both gammas can underflow to 0 for tiny shapes: the limit picks 0 or 1 with odds alpha : beta
        tie = ~np.isfinite(out)
        if tie.any():
            coin = rng.uniform(keys, width, 2 * _GAMMA_STREAMS) < (alpha / (alpha + beta))[:, None]
            out = np.where(tie, coin.astype(np.float64), out)
        return out


BETA = register(OpSchema(
    name="random.beta", impl=Beta, min_inputs=0, max_inputs=1,
    doc="Beta-distributed values in [0, 1] with shape parameters `alpha` and `beta` (float32 by default).",
    args=(Arg("alpha", "float", 1.0, "First shape parameter (> 0).", tensor=True),
          Arg("beta", "float", 1.0, "Second shape parameter (> 0).", tensor=True),
          Arg("dtype", "dtype", None, "Output type: FLOAT or FLOAT64.")) + _SHAPE_ARGS))
