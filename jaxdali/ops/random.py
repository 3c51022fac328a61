"""``fn.random.*``: counter-based random values, one draw per (seed, iteration, sample, element).

The same pipeline seed gives the same values whatever ``num_threads``, ``prefetch_queue_depth``
or restarts from a checkpoint. Values follow DALI's distributions, not its exact streams.
"""

from __future__ import annotations

import math

import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, to_numpy_type

__all__ = ["COIN_FLIP", "UNIFORM", "NORMAL", "CHOICE"]

_SHAPE_ARGS = (
    Arg("shape", "ints", None, "Shape of each sample; by default a scalar, or the shape of the input.",
        tensor=True, min=0),
)


class _RandomOp(Operator):
    """Shared shape handling: output shape from ``shape``, the optional ``shape_like`` input, or ()."""

    default_dtype = DALIDataType.FLOAT
    input_is_data = False  # choice's first input holds the values, not a shape reference
    row_wise = True

    def _shapes(self, inputs, args, n: int) -> list[tuple[int, ...]]:
        if args.is_per_sample("shape"):
            return [tuple(int(x) for x in np.asarray(args.sample_value("shape", i)).reshape(-1)) for i in range(n)]
        if args.given("shape"):
            return [tuple(args["shape"])] * n
        ref = inputs[-1] if inputs and (not self.input_is_data or len(inputs) > 1) else None
        if ref is not None:
            return ref.shape()
        return [()] * n

    def _dtype(self):
        dtype = self.args.get("dtype")
        return to_numpy_type(dtype if dtype is not None else self.default_dtype)

    def run(self, ctx, inputs, args):
        n = ctx.batch_size
        shapes = self._shapes(inputs, args, n)
        counts = [math.prod(s) for s in shapes]
        width = max(counts, default=0)
        keys = ctx.sample_keys(self.seed)
        values = self.draw_batch(ctx, keys, width, inputs, args, n)
        dtype = self._dtype()
        if len(set(shapes)) <= 1:
            shape = shapes[0] if shapes else ()
            return TensorListCPU(_to_dtype(values[:, : counts[0] if counts else 0], dtype).reshape((n,) + shape))
        return TensorListCPU([_to_dtype(values[i, :c], dtype).reshape(s) for i, (c, s) in enumerate(zip(counts, shapes))])

    def draw_batch(self, ctx, keys, width, inputs, args, n) -> np.ndarray:
        """The (n, width) values of the batch: ``draw``, unless a subclass shares the work out on
        ``ctx.parallel_for``."""
        return self.draw(keys, width, inputs, args, n)

    def draw(self, keys, width, inputs, args, n) -> np.ndarray:
        raise NotImplementedError


def _to_dtype(values: np.ndarray, dtype) -> np.ndarray:
    if np.issubdtype(dtype, np.integer) and values.dtype.kind == "f":
        info = np.iinfo(dtype)
        return np.clip(np.rint(values), info.min, info.max).astype(dtype)
    return values.astype(dtype)


class CoinFlip(_RandomOp):
    default_dtype = DALIDataType.INT32

    def draw(self, keys, width, inputs, args, n):
        p = args.per_sample("probability", np.float64)
        return (rng.uniform(keys, width) < p[:, None]).astype(np.float64)


class Uniform(_RandomOp):
    """Uniform in [lo, hi), or one of ``values``.

    For an integer ``dtype`` the bounds are first truncated toward zero and the drawn value is then
    rounded to the nearest integer, as in DALI: ``range=[0, 3]`` gives 1 and 2 twice as often as
    0 and 3.
    """

    def __init__(self, node, build):
        super().__init__(node, build)
        lo_hi = node.args.get("range")
        if "range" not in node.arg_inputs and lo_hi is not None and len(lo_hi) != 2:
            raise OpArgumentError(f"fn.random.uniform: argument 'range' must be [lo, hi], got {list(lo_hi)}")

    def draw(self, keys, width, inputs, args, n):
        u = rng.uniform(keys, width)
        if args.given("values"):
            if args.is_per_sample("values"):
                rows = [np.asarray(args.sample_value("values", i), np.float64).reshape(-1) for i in range(n)]
                idx = np.floor(u * np.array([len(r) for r in rows])[:, None]).astype(np.int64)
                return np.stack([rows[i][idx[i]] for i in range(n)]) if n else u
            vals = np.asarray(args["values"], np.float64)
            return vals[np.floor(u * len(vals)).astype(np.int64)]
        rng_range = args.per_sample("range", np.float64, (2,))
        bad = np.flatnonzero(rng_range[:, 1] < rng_range[:, 0])
        if bad.size:
            lo, hi = rng_range[bad[0]]
            raise OpArgumentError(f"fn.random.uniform: invalid range [{lo:g}, {hi:g}) for sample {int(bad[0])}: "
                                  "the end must not be below the start")
        if np.issubdtype(self._dtype(), np.integer):
            rng_range = np.trunc(rng_range)
        lo, hi = rng_range[:, :1], rng_range[:, 1:]
        return lo + u * (hi - lo)


class Normal(_RandomOp):
    def draw(self, keys, width, inputs, args, n):
        mean = args.per_sample("mean", np.float64)[:, None]
        std = args.per_sample("stddev", np.float64)[:, None]
        return mean + std * rng.normal(keys, width)


class Choice(_RandomOp):
    """Random elements of ``a`` along its first axis (an integer n means ``range(n)``), optionally
    with probabilities ``p`` (which must sum to 1). Each output sample has the shape
    ``shape + a.shape[1:]`` and the type of ``a``."""

    input_is_data = True

    def run(self, ctx, inputs, args):
        n = ctx.batch_size
        shapes = self._shapes(inputs, args, n)
        counts = [math.prod(s) for s in shapes]
        u = rng.uniform(ctx.sample_keys(self.seed), max(counts, default=0))
        out = []
        for i in range(n):
            a = np.asarray(inputs[0].at(i))
            elements = np.arange(a.reshape(()), dtype=a.dtype) if a.ndim == 0 else a
            if len(elements) == 0:
                raise OpArgumentError(f"fn.random.choice: sample {i} has nothing to choose from (input {a!r})")
            idx = self._indices(u[i, :counts[i]], len(elements), args, i)
            out.append(elements[idx].reshape(shapes[i] + elements.shape[1:]))
        return TensorListCPU(out)

    @staticmethod
    def _indices(u: np.ndarray, count: int, args, i: int) -> np.ndarray:
        if not args.given("p"):
            return np.floor(u * count).astype(np.int64)
        p = np.asarray(args.sample_value("p", i), np.float64).reshape(-1)
        if len(p) != count:
            raise OpArgumentError(f"fn.random.choice: 'p' has {len(p)} entries for {count} elements (sample {i})")
        if abs(p.sum() - 1.0) >= 1e-4:
            raise OpArgumentError(f"fn.random.choice: the probabilities 'p' must sum to 1, got {p.sum():g} "
                                  f"(sample {i})")
        return np.minimum(np.searchsorted(np.cumsum(p), u, side="right"), count - 1)


_DTYPE = Arg("dtype", "dtype", None, "Output type.")

COIN_FLIP = register(OpSchema(
    name="random.coin_flip", impl=CoinFlip, devices=("cpu", "gpu"), min_inputs=0, max_inputs=1,
    doc="Random 0/1 values: 1 with probability `probability` (int32 by default).",
    args=(Arg("probability", "float", 0.5, "Probability of 1.", tensor=True, min=0, max=1), _DTYPE) + _SHAPE_ARGS))

UNIFORM = register(OpSchema(
    name="random.uniform", impl=Uniform, devices=("cpu", "gpu"), min_inputs=0, max_inputs=1,
    doc="Uniformly distributed values in [range[0], range[1]), or drawn from the discrete `values`.",
    args=(Arg("range", "floats", (-1.0, 1.0), "[lo, hi) interval.", tensor=True),
          Arg("values", "floats", None, "Discrete set of values to draw from.", tensor=True), _DTYPE) + _SHAPE_ARGS))

NORMAL = register(OpSchema(
    name="random.normal", impl=Normal, devices=("cpu", "gpu"), min_inputs=0, max_inputs=1,
    doc="Normally distributed values with `mean` and `stddev`.",
    args=(Arg("mean", "float", 0.0, "Mean.", tensor=True), Arg("stddev", "float", 1.0, "Standard deviation.",
                                                                  tensor=True, min=0), _DTYPE) + _SHAPE_ARGS))

CHOICE = register(OpSchema(
    name="random.choice", impl=Choice, min_inputs=1, max_inputs=2,
    doc="Random elements of the input sample (a scalar n means range(n)), with optional probabilities `p`.",
    args=(Arg("p", "floats", None, "Probability of each element.", tensor=True),) + _SHAPE_ARGS))
