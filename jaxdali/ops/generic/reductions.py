"""``fn.reductions.*``: sum, mean, mean_square, rms, min, max, std_dev and variance over chosen axes.

Each sample is reduced on its own (the batch is never mixed), with NumPy's reductions, sample by sample
on the worker pool. Types follow DALI: ``sum`` accumulates integers in 64 bits (unsigned stays
unsigned), ``min``/``max`` keep the input type, the others give float32; an integer ``dtype`` for
``mean``/``rms`` truncates the result.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import to_numpy_type

__all__ = ["REDUCTIONS"]

_INPUT_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64,
                                           np.int64, np.float32))


def _wide(dtype: np.dtype) -> np.dtype:
    """The 64-bit accumulator of an integer type; float32 for float32."""
    return np.dtype(np.uint64 if dtype.kind == "u" else np.int64) if dtype.kind in "iu" else np.dtype(np.float32)


class _Reduction(Operator):
    """Shared axes, layout and type handling; subclasses compute ``reduce(sample, axes)``."""

    kind = ""

    def __init__(self, node, build):
        super().__init__(node, build)
        if self.args.get("axes") is not None and self.args.get("axis_names") is not None:
            raise OpArgumentError(f"fn.reductions.{self.kind}: give 'axes' or 'axis_names', not both")

    @property
    def op(self) -> str:
        return f"reductions.{self.kind}"

    def _axes(self, layout: str, ndim: int) -> tuple[int, ...]:
        names = self.args.get("axis_names")
        if names is not None:
            missing = [c for c in names if c not in layout]
            if missing:
                raise OpArgumentError(f"fn.{self.op}: 'axis_names' {names!r} are not all in the input layout "
                                      f"{layout!r}")
            return tuple(sorted(layout.index(c) for c in names))
        axes = self.args.get("axes")
        if axes is None:
            return tuple(range(ndim))
        for a in axes:
            if not -ndim <= a < ndim:
                raise OpArgumentError(f"fn.{self.op}: axis {a} in 'axes' is out of range for {ndim}-D input "
                                      f"(accepted: {-ndim} to {ndim - 1})")
        resolved = [a % ndim for a in axes]
        if len(set(resolved)) != len(resolved):
            raise OpArgumentError(f"fn.{self.op}: argument 'axes' has a duplicated axis: {list(axes)}")
        return tuple(sorted(resolved))

    def _out_dtype(self, dtype: np.dtype) -> np.dtype:
        if dtype not in _INPUT_TYPES:
            raise OpArgumentError(f"fn.{self.op}: unsupported input type {dtype}; expected one of "
                                  f"{[str(t) for t in _INPUT_TYPES]}")
        allowed = self.allowed_types(dtype)
        given = self.args.get("dtype")
        if given is None:
            return allowed[0]
        out = np.dtype(to_numpy_type(given))
        if out not in allowed:
            raise OpArgumentError(f"fn.{self.op}: argument 'dtype' cannot be {out} for {dtype} input; allowed: "
                                  f"{[str(t) for t in allowed]}")
        return out

    def allowed_types(self, dtype: np.dtype) -> list[np.dtype]:
        """Output types for an input type; the first is the default."""
        return [np.dtype(np.float32)] + ([dtype] if dtype.kind in "iu" else [])

    def run(self, ctx, inputs, args):
        x = inputs[0]
        ndim, layout = x.ndim(), x.layout()
        axes = self._axes(layout, ndim)
        out_dtype = self._out_dtype(x.np_dtype)
        keep = self.args["keep_dims"]
        out_layout = layout if keep else "".join(c for d, c in enumerate(layout) if d not in axes)
        samples = x.samples()
        extra = [tl.samples() for tl in inputs[1:]]
        out: list = [None] * len(samples)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                r = self.reduce(samples[i], axes, out_dtype, [e[i] for e in extra], i)
                out[i] = np.asarray(r if keep else np.squeeze(r, axis=axes)).astype(out_dtype, copy=False)

        ctx.parallel_for(work, len(samples))
        return TensorListCPU(out, out_layout)

    def reduce(self, x: np.ndarray, axes: tuple[int, ...], out_dtype: np.dtype, extra: list, i: int) -> np.ndarray:
        """The reduction of one sample over ``axes``, with the reduced axes kept (extent 1)."""
        raise NotImplementedError


#: Element types OpenCV sums exactly in float64 (integers up to 2**53), with the most elements that keeps it so.
_CV_SUM_LIMIT = {np.dtype(np.uint8): 1 << 44, np.dtype(np.int8): 1 << 44, np.dtype(np.uint16): 1 << 36,
                 np.dtype(np.int16): 1 << 36, np.dtype(np.int32): 1 << 21, np.dtype(np.float32): 1 << 62}
_CV_REDUCE_TYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int16), np.dtype(np.float32))


def _opencv_sum(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray | None:
    """The float64 sum over ``axes`` (kept with extent 1) by OpenCV's vectorised, GIL-free kernels when the
    axes are leading or trailing ones and the sum is exact in float64; None otherwise (use NumPy).

    NumPy's sum with a widening type runs a per-element cast loop, about 20x slower on images."""
    if not axes or x.size == 0 or _count(x, axes) >= _CV_SUM_LIMIT.get(x.dtype, 0):
        return None
    import cv2

    ndim, n = x.ndim, _count(x, axes)
    kept = tuple(1 if d in axes else e for d, e in enumerate(x.shape))
    x = np.ascontiguousarray(x)
    rows = x.shape[0] if ndim > 1 else 1  # a wide matrix: OpenCV walks a one-column one row at a time
    if axes == tuple(range(ndim)):
        return np.full(kept, cv2.sumElems(x.reshape(rows, -1))[0])
    if axes == tuple(range(ndim - 1)) and x.shape[-1] <= 4:  # per channel
        rows = x.shape[0] if ndim > 2 else 1
        return np.asarray(cv2.sumElems(x.reshape(rows, n // rows, -1))[: x.shape[-1]]).reshape(kept)
    if x.dtype not in _CV_REDUCE_TYPES:
        return None
    if axes == tuple(range(len(axes))):
        return cv2.reduce(x.reshape(n, -1), 0, cv2.REDUCE_SUM, dtype=cv2.CV_64F).reshape(kept)
    if axes == tuple(range(ndim - len(axes), ndim)):
        return cv2.reduce(x.reshape(-1, n), 1, cv2.REDUCE_SUM, dtype=cv2.CV_64F).reshape(kept)
    return None


def _count(x: np.ndarray, axes: tuple[int, ...]) -> int:
    return int(np.prod([x.shape[a] for a in axes], dtype=np.int64))


def _mean_of(values: np.ndarray, axes, count: int, out_dtype: np.dtype) -> np.ndarray:
    """``values`` summed over ``axes`` (64-bit) and divided by ``count``: float, or truncated integer."""
    with np.errstate(invalid="ignore", divide="ignore"):
        fast = _opencv_sum(values, axes)
        if out_dtype.kind in "iu":
            total = fast.astype(_wide(values.dtype)) if fast is not None else \
                np.sum(values, axis=axes, keepdims=True, dtype=_wide(values.dtype))
            return total // max(count, 1) if count else np.zeros_like(total)
        total = fast if fast is not None else np.sum(values, axis=axes, keepdims=True, dtype=np.float64)
        return total / count


class Sum(_Reduction):
    kind = "sum"

    def allowed_types(self, dtype):
        return [_wide(dtype), dtype, np.dtype(np.float32)] if dtype.kind in "iu" else [np.dtype(np.float32)]

    def reduce(self, x, axes, out_dtype, extra, i):
        acc = np.float64 if out_dtype.kind == "f" else _wide(x.dtype)
        fast = _opencv_sum(x, axes)
        if fast is not None:
            return fast.astype(acc)
        return np.sum(x, axis=axes, keepdims=True, dtype=acc)  # narrower integer outputs wrap, as in DALI


class Mean(_Reduction):
    kind = "mean"

    def reduce(self, x, axes, out_dtype, extra, i):
        return _mean_of(x, axes, _count(x, axes), out_dtype)


class MeanSquare(_Reduction):
    kind = "mean_square"

    def allowed_types(self, dtype):
        return [np.dtype(np.float32)] + ([_wide(dtype)] if dtype.kind in "iu" else [])

    def reduce(self, x, axes, out_dtype, extra, i):
        wide = x.astype(np.float64 if out_dtype.kind == "f" else _wide(x.dtype))
        return _mean_of(wide * wide, axes, _count(x, axes), out_dtype)


class Rms(_Reduction):
    kind = "rms"

    def reduce(self, x, axes, out_dtype, extra, i):
        wide = x.astype(np.float64)
        root = np.sqrt(_mean_of(wide * wide, axes, _count(x, axes), np.dtype(np.float64)))
        return np.trunc(root) if out_dtype.kind in "iu" else root


class _Extreme(_Reduction):
    """min/max: the input type; an empty extent gives the reduction's identity (the type's limit)."""

    func: Callable = np.min
    float_identity = 0.0

    def allowed_types(self, dtype):
        return [dtype]

    def reduce(self, x, axes, out_dtype, extra, i):
        if x.dtype.kind == "f":
            identity = self.float_identity * np.finfo(x.dtype).max
        else:
            info = np.iinfo(x.dtype)
            identity = info.max if self.float_identity > 0 else info.min
        if axes and axes == tuple(range(len(axes))) and x.size and x.size // _count(x, axes) < _FOLD_ELEMENTS:
            return _folded_extreme(type(self).func, x, axes, identity)
        return type(self).func(x, axis=axes, keepdims=True, initial=identity)


#: Width of the rows a leading-axes min/max folds its input into (see ``_folded_extreme``).
_FOLD_ELEMENTS = 1024


def _folded_extreme(func: Callable, x: np.ndarray, axes: tuple[int, ...], identity) -> np.ndarray:
    """min/max over leading axes of a sample with few trailing elements (e.g. per channel of HWC).

    NumPy reduces (n, 3) along n three elements at a time; viewed as rows of about ``_FOLD_ELEMENTS``
    elements (whole groups of the trailing ones), the reduction runs along long rows, then over the
    groups of one row. The extreme does not depend on the grouping, so the values are the same."""
    n = _count(x, axes)
    width = x.size // n
    rows = np.ascontiguousarray(x).reshape(n, width)
    groups = max(1, _FOLD_ELEMENTS // width)
    whole = n - n % groups
    folded = func(rows[:whole].reshape(-1, groups * width), axis=0, initial=identity).reshape(groups, width)
    result = func(np.concatenate([folded, rows[whole:]]), axis=0, initial=identity)
    return result.reshape(tuple(1 if d in axes else e for d, e in enumerate(x.shape)))


class Min(_Extreme):
    kind = "min"
    func = np.min
    float_identity = 1.0


class Max(_Extreme):
    kind = "max"
    func = np.max
    float_identity = -1.0


class Variance(_Reduction):
    """Sum of squared deviations from the given mean (second input), divided by (count - ddof)."""

    kind = "variance"

    def allowed_types(self, dtype):
        return [np.dtype(np.float32)]

    def run(self, ctx, inputs, args):
        if inputs[1].np_dtype != np.float32:
            raise OpArgumentError(f"fn.{self.op}: the mean (input 1) must be float32, got {inputs[1].np_dtype}")
        return super().run(ctx, inputs, args)

    def reduce(self, x, axes, out_dtype, extra, i):
        (mean,) = extra
        reduced = tuple(1 if d in axes else e for d, e in enumerate(x.shape))
        if mean.size != int(np.prod(reduced)):
            raise OpArgumentError(f"fn.{self.op}: the mean of sample {i} has shape {list(mean.shape)}; expected the "
                                  f"reduced shape {[e for d, e in enumerate(x.shape) if d not in axes]}")
        deviation = x.astype(np.float64) - mean.astype(np.float64).reshape(reduced)
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.finish(np.sum(deviation * deviation, axis=axes, keepdims=True)
                               / (_count(x, axes) - self.args["ddof"]))

    @staticmethod
    def finish(variance: np.ndarray) -> np.ndarray:
        return variance


class StdDev(Variance):
    kind = "std_dev"

    @staticmethod
    def finish(variance):
        with np.errstate(invalid="ignore"):
            return np.sqrt(variance)


_AXES = (Arg("axes", "ints", None, "Axes to reduce (negative: from the back); default: all, [] : none."),
         Arg("axis_names", "str", None, "Axes to reduce, by layout name."),
         Arg("keep_dims", "bool", False, "Keep the reduced axes with extent 1."))
_DTYPE = (Arg("dtype", "dtype", None, "Output type (see the operator's description for the allowed ones)."),)
_DDOF = (Arg("ddof", "int", 0, "Delta degrees of freedom: the divisor is count - ddof."),)


def _register(kind: str, impl: type, doc: str, args: tuple, inputs: int = 1) -> OpSchema:
    return register(OpSchema(name=f"reductions.{kind}", impl=impl, min_inputs=inputs, max_inputs=inputs,
                             devices=("cpu", "gpu"), doc=doc, args=_AXES + args))


REDUCTIONS = [
    _register("sum", Sum, "Sum over `axes`. Integers accumulate in 64 bits (uint64 for unsigned); `dtype` "
                          "may also be the input type (wrapping, as DALI) or FLOAT.", _DTYPE),
    _register("mean", Mean, "Mean over `axes` (float32; `dtype` may be the input type: truncated).", _DTYPE),
    _register("mean_square", MeanSquare, "Mean of the squares over `axes` (float32, or the 64-bit integer type).",
              _DTYPE),
    _register("rms", Rms, "Root mean square over `axes` (float32; `dtype` may be the input type: truncated).",
              _DTYPE),
    _register("min", Min, "Minimum over `axes`, in the input type.", ()),
    _register("max", Max, "Maximum over `axes`, in the input type.", ()),
    _register("variance", Variance, "Variance over `axes` around the given mean (input 1, float32, shaped as the "
                                    "reduced output).", _DDOF, inputs=2),
    _register("std_dev", StdDev, "Standard deviation over `axes` around the given mean (input 1, float32, shaped "
                                 "as the reduced output).", _DDOF, inputs=2),
]
