"""The operators behind constants, elementwise arithmetic on DataNodes and per-sample indexing/slicing
(``node[a:b, i]``); ``jaxdali.ops.graph`` turns the Python operators on nodes into them.

Type promotion follows DALI: Python ints are int32 and floats float32 (NumPy scalars keep their
type); mixing integers and floats gives the float type; ``/`` of integers gives float32; comparisons
give bool. As in DALI (C++ semantics), ``//`` of integers rounds toward zero and of floats is plain
division, and ``%`` takes the sign of the dividend. Two booleans may only meet in ``*``, bitwise
operators and comparisons; bitwise operators and shifts need integers.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["CONSTANT", "BINARY", "UNARY", "SUBSCRIPT", "SYMBOLS", "MAX_SUBSCRIPT_AXES", "NODE_BOUND"]

_BINARY_FUNCS = {
    "add": "add", "sub": "subtract", "mul": "multiply", "fdiv": "true_divide", "div": None, "mod": "fmod",
    "pow": "power", "bitand": "bitwise_and", "bitor": "bitwise_or", "bitxor": "bitwise_xor",
    "lshift": "left_shift", "rshift": "right_shift",
    "eq": "equal", "neq": "not_equal", "lt": "less", "leq": "less_equal", "gt": "greater", "geq": "greater_equal",
}
#: The Python operator behind each operation, for messages.
SYMBOLS = {
    "add": "+", "sub": "-", "mul": "*", "fdiv": "/", "div": "//", "mod": "%", "pow": "**", "bitand": "&",
    "bitor": "|", "bitxor": "^", "lshift": "<<", "rshift": ">>", "eq": "==", "neq": "!=", "lt": "<",
    "leq": "<=", "gt": ">", "geq": ">=", "neg": "-", "abs": "abs", "invert": "~",
}
_COMPARISONS = {"eq", "neq", "lt", "leq", "gt", "geq"}
_BITWISE = {"bitand", "bitor", "bitxor", "lshift", "rshift", "invert"}
_BOOL_ALLOWED = _COMPARISONS | _BITWISE | {"mul"}
_FLOAT_RANK = {np.dtype(np.float16): 0, np.dtype(np.float32): 1, np.dtype(np.float64): 2}


def _promote(op: str, a: np.dtype, b: np.dtype) -> tuple[np.dtype, np.dtype]:
    """(computation dtype, result dtype) for a binary operation."""
    floats = [d for d in (a, b) if d.kind == "f"]
    if floats:
        compute = max(floats, key=lambda d: _FLOAT_RANK[d])
    elif op == "fdiv":
        compute = np.dtype(np.float32)
    elif a == b:
        compute = a
    else:
        compute = np.result_type(a, b)
        if compute.kind == "f":  # uint64 with a signed type: NumPy would go to float64
            compute = np.dtype(np.int64)
    return compute, (np.dtype(np.bool_) if op in _COMPARISONS else compute)


def _check_types(op: str, dtypes: tuple[np.dtype, ...]) -> None:
    """DALI's type rules that are errors rather than promotions (checked when the batch arrives)."""
    symbol = SYMBOLS[op]
    if op in _BITWISE and any(d.kind not in "iub" for d in dtypes):
        raise TypeError(f"inputs to the bitwise operator `{symbol}` must be integers or booleans, got "
                        f"{' and '.join(str(d) for d in dtypes)}")
    if op not in _BOOL_ALLOWED and all(d.kind == "b" for d in dtypes):
        both = "both inputs" if len(dtypes) == 2 else "the input"
        raise TypeError(f"arithmetic operator `{symbol}` cannot take booleans as {both}; use the bitwise "
                        "operators `|`, `&`, `^`, `~`, or make one input numeric to promote the booleans "
                        "(`*` does accept two booleans)")


def _numpy_binary(op: str):
    """The NumPy function computing ``op`` in the computation type."""
    if op != "div":
        return getattr(np, _BINARY_FUNCS[op])

    def divide(a, b):
        if a.dtype.kind == "f":  # DALI's `//` of floats is ordinary division
            return np.true_divide(a, b)
        q = np.floor_divide(a, b)  # round toward zero instead of toward -inf
        return q + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0))).astype(q.dtype)

    return divide


def _jax_binary(op: str):
    import jax
    import jax.numpy as jnp

    if op == "div":
        return lambda a, b: a / b if jnp.issubdtype(a.dtype, jnp.floating) else jax.lax.div(a, b)
    return getattr(jnp, _BINARY_FUNCS[op])


def _align(x, rank: int, xp):
    """Inserts singleton axes after the batch axis so per-sample shapes broadcast NumPy-style."""
    missing = rank - (x.ndim - 1)
    if missing <= 0:
        return x
    return xp.reshape(x, (x.shape[0],) + (1,) * missing + tuple(x.shape[1:]))


class Constant(Operator):
    """Every sample is the same array."""

    row_wise = True

    def __init__(self, node, build):
        super().__init__(node, build)
        self._value = np.asarray(node.args["value"])

    def run(self, ctx, inputs, args):
        n = ctx.batch_size
        return TensorListCPU(np.broadcast_to(self._value, (n,) + self._value.shape), self.args["layout"])


CONSTANT = register(OpSchema(
    name="_constant", impl=Constant, min_inputs=0, max_inputs=0,
    doc="A constant batch: every sample equals `value`.",
    args=(Arg("value", "any", REQUIRED, "The value of every sample."),
          Arg("layout", "str", "", "Layout of each sample."))))


#: Dense operands at least this large are computed in chunks of samples on the worker pool.
_SPLIT_BYTES = 1 << 20


class Binary(Operator):
    """Elementwise binary arithmetic with per-sample NumPy broadcasting."""

    row_wise = True

    def __init__(self, node, build):
        super().__init__(node, build)
        self._op = node.args["op"]
        self._func = _numpy_binary(self._op)

    def run(self, ctx, inputs, args):
        a, b = inputs
        _check_types(self._op, (a.np_dtype, b.np_dtype))
        compute, result = _promote(self._op, a.np_dtype, b.np_dtype)
        func = self._func
        layout = a.layout() if a.ndim() >= b.ndim() else b.layout()
        da, db = a.dense(), b.dense()
        # Like DALI, division by zero gives inf/nan (floats) instead of a warning.
        with np.errstate(divide="ignore", invalid="ignore"):
            if da is not None and db is not None:
                rank = max(da.ndim, db.ndim) - 1
                da, db = _align(da, rank, np), _align(db, rank, np)
                if max(da.nbytes, db.nbytes) < _SPLIT_BYTES or len(da) != len(db):
                    out = func(da.astype(compute, copy=False), db.astype(compute, copy=False))
                    return TensorListCPU(out.astype(result, copy=False), layout)
                out = np.empty(np.broadcast_shapes(da.shape, db.shape), result)

                def work(lo: int, hi: int) -> None:  # NumPy releases the GIL: the threads share the batch
                    with np.errstate(divide="ignore", invalid="ignore"):
                        part = func(da[lo:hi].astype(compute, copy=False), db[lo:hi].astype(compute, copy=False))
                        np.copyto(out[lo:hi], part, casting="unsafe")

                ctx.parallel_for(work, len(out))
                return TensorListCPU(out, layout)
            if len(a) != len(b):
                raise ValueError(f"fn.{self.node.schema.name}: operands have {len(a)} and {len(b)} samples")
            samples = [func(x.astype(compute, copy=False), y.astype(compute, copy=False)).astype(result, copy=False)
                       for x, y in zip(a.samples(), b.samples())]
        return TensorListCPU(samples, layout)

    def run_jax(self, inputs, args):
        import jax.numpy as jnp

        a, b = inputs
        _check_types(self._op, (np.dtype(a.dtype), np.dtype(b.dtype)))
        compute, result = _promote(self._op, np.dtype(a.dtype), np.dtype(b.dtype))
        rank = max(a.ndim, b.ndim) - 1
        out = _jax_binary(self._op)(_align(a, rank, jnp).astype(compute), _align(b, rank, jnp).astype(compute))
        return [out.astype(result)]

    def output_layouts(self, input_layouts):
        return [max(input_layouts, key=len)]


BINARY = register(OpSchema(
    name="_arithmetic", impl=Binary, devices=("cpu", "gpu"), min_inputs=2, max_inputs=2,
    doc="Elementwise arithmetic between two batches (what `a + b`, `a < b`, ... create).",
    args=(Arg("op", "str", REQUIRED, "The operation.", choices=tuple(_BINARY_FUNCS)),)))


_UNARY_FUNCS = {"neg": "negative", "abs": "abs", "invert": "invert"}


class Unary(Operator):
    """Elementwise ``-a``, ``abs(a)`` or ``~a``; the type is kept (unsigned negation wraps around)."""

    row_wise = True

    def __init__(self, node, build):
        super().__init__(node, build)
        self._op = node.args["op"]

    def run(self, ctx, inputs, args):
        (a,) = inputs
        _check_types(self._op, (a.np_dtype,))
        func = getattr(np, _UNARY_FUNCS[self._op])
        d = a.dense()
        if d is not None:
            return TensorListCPU(func(d), a.layout())
        return TensorListCPU([func(s) for s in a.samples()], a.layout())

    def run_jax(self, inputs, args):
        import jax.numpy as jnp

        _check_types(self._op, (np.dtype(inputs[0].dtype),))
        return [getattr(jnp, _UNARY_FUNCS[self._op])(inputs[0])]


UNARY = register(OpSchema(
    name="_arithmetic_unary", impl=Unary, devices=("cpu", "gpu"),
    doc="Elementwise negation, absolute value or bitwise not (what `-a`, `abs(a)`, `~a` create).",
    args=(Arg("op", "str", "neg", "The operation.", choices=tuple(_UNARY_FUNCS)),)))


# -- subscripts -----------------------------------------------------------------------------------------

#: Axes a subscript may index.
MAX_SUBSCRIPT_AXES = 8
#: Marks a subscript bound given per sample by a node (an argument input).
NODE_BOUND = "node"


class Subscript(Operator):
    """Per-sample indexing: integers remove an axis, slices keep it (bounds clamp as in Python)."""

    row_wise = True

    def __init__(self, node, build):
        super().__init__(node, build)
        self._spec = node.args["spec"]
        self._dynamic = bool(node.arg_inputs)

    def _index_for(self, args, i: int | None) -> tuple:
        index = []
        for axis, entry in enumerate(self._spec):
            if entry[0] == "at":
                v = entry[1] if entry[1] != NODE_BOUND else int(np.asarray(args.sample_value(f"at_{axis}", i)).reshape(()))
                index.append(v)
            else:
                bounds = []
                for key, v in zip(("lo", "hi", "step"), entry[1:]):
                    bounds.append(int(np.asarray(args.sample_value(f"{key}_{axis}", i)).reshape(()))
                                  if v == NODE_BOUND else v)
                index.append(slice(*bounds))
        return tuple(index)

    def _check(self, shape: tuple, index: tuple, i: int) -> None:
        if len(index) > len(shape):
            raise IndexError(f"fn.{self.node.schema.name}: {len(index)} indices for a sample of shape {shape}")
        for axis, (v, extent) in enumerate(zip(index, shape)):
            if isinstance(v, int) and not -extent <= v < extent:
                raise IndexError(f"fn.{self.node.schema.name}: index {v} out of range for axis {axis} of "
                                 f"extent {extent} in sample {i}")

    def run(self, ctx, inputs, args):
        (a,) = inputs
        layout = self._out_layout(a.layout())
        dense = a.dense()
        if dense is not None and not self._dynamic:
            index = self._index_for(args, None)
            self._check(dense.shape[1:], index, 0)
            return TensorListCPU(dense[(slice(None),) + index], layout)
        out = []
        for i, s in enumerate(a.samples()):
            index = self._index_for(args, i)
            self._check(s.shape, index, i)
            out.append(s[index])
        return TensorListCPU(out, layout)

    def _out_layout(self, layout: str) -> str:
        if not layout:
            return ""
        kept = [c for c, entry in zip(layout, self._spec) if entry[0] != "at"]
        return "".join(kept) + layout[len(self._spec):]

    def output_layouts(self, input_layouts):
        return [self._out_layout(input_layouts[0])]

    @property
    def run_jax(self):
        return None if self._dynamic else self._run_jax

    def _run_jax(self, inputs, args):
        index = self._index_for(args, None)
        return [inputs[0][(slice(None),) + index]]


SUBSCRIPT = register(OpSchema(
    name="_subscript", impl=Subscript, devices=("cpu", "gpu"),
    doc="Per-sample indexing and slicing (what `node[...]` creates).",
    args=(Arg("spec", "any", REQUIRED, "Per-axis index description."),)
    + tuple(Arg(f"{k}_{axis}", "int", None, f"Per-sample {k} bound of axis {axis}.", tensor=True)
            for axis in range(MAX_SUBSCRIPT_AXES) for k in ("at", "lo", "hi", "step"))))
