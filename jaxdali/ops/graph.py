"""The pipeline graph: DataNode, operator instances, tracing of ``fn.*`` calls, pruning and ordering."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from jaxdali.ops.schema import REQUIRED, OpArgumentError, OpSchema
from jaxdali.types import ScalarConstant

if TYPE_CHECKING:
    from jaxdali.pipeline.pipeline import Pipeline

__all__ = ["DataNode", "OpNode", "add_op", "current_graph", "GraphScope", "reachable_ops", "constant_node", "default_constant_array"]

_DEVICES = ("cpu", "gpu", "mixed")


class _ScopeStack(threading.local):
    def __init__(self):
        self.stack: list["Pipeline"] = []


_scopes = _ScopeStack()


class GraphScope:
    """Context manager that makes a pipeline the target of ``fn.*`` calls on this thread."""

    def __init__(self, pipeline: "Pipeline"):
        self._pipeline = pipeline

    def __enter__(self):
        _scopes.stack.append(self._pipeline)
        return self._pipeline

    def __exit__(self, *exc):
        _scopes.stack.pop()


def current_graph() -> "Pipeline | None":
    """The pipeline whose graph is being defined on this thread, or None."""
    return _scopes.stack[-1] if _scopes.stack else None


class DataNode:
    """A symbolic batch: one output of an operator instance.

    Supports arithmetic with numbers and other nodes (``+ - * / // % **``, comparisons, ``& | ^``),
    indexing and slicing per sample (bounds may be nodes), ``.gpu()`` and ``.cpu()``.
    """

    __array_priority__ = 1000  # NumPy scalars on the left defer to our reflected operators

    def __init__(self, name: str, device: str, source: "OpNode", index: int = 0):
        self.name = name
        self.device = device
        self.source = source
        self.index = index

    def __repr__(self) -> str:
        return f"DataNode(name={self.name!r}, device={self.device!r})"

    def gpu(self) -> "DataNode":
        """This batch on the pipeline's JAX device."""
        if self.device == "gpu":
            return self
        from jaxdali.ops import transfer

        return add_op(transfer.TO_DEVICE, [self], {})[0]

    def cpu(self) -> "DataNode":
        """This batch in host memory."""
        if self.device == "cpu":
            return self
        from jaxdali.ops import transfer

        return add_op(transfer.TO_HOST, [self], {})[0]

    def __bool__(self):
        raise TypeError(
            "A DataNode has no truth value at graph-definition time: per-sample conditionals "
            "(`if node:` with enable_conditionals=True) are not supported by jaxdali; use arithmetic "
            "or argument inputs instead (e.g. `mirror=coin`).")

    def __iter__(self):
        raise TypeError(f"DataNode {self.name!r} is not iterable; index it per sample with node[i]")

    def __getitem__(self, index: Any) -> "DataNode":
        from jaxdali.ops import arithmetic

        return arithmetic.subscript(self, index)

    # Arithmetic: each maps to one elementwise operator.
    def _binary(self, other: Any, op: str, reflected: bool = False) -> "DataNode":
        from jaxdali.ops import arithmetic

        return arithmetic.binary(other, self, op) if reflected else arithmetic.binary(self, other, op)

    def __add__(self, o): return self._binary(o, "add")
    def __radd__(self, o): return self._binary(o, "add", True)
    def __sub__(self, o): return self._binary(o, "sub")
    def __rsub__(self, o): return self._binary(o, "sub", True)
    def __mul__(self, o): return self._binary(o, "mul")
    def __rmul__(self, o): return self._binary(o, "mul", True)
    def __truediv__(self, o): return self._binary(o, "fdiv")
    def __rtruediv__(self, o): return self._binary(o, "fdiv", True)
    def __floordiv__(self, o): return self._binary(o, "div")
    def __rfloordiv__(self, o): return self._binary(o, "div", True)
    def __mod__(self, o): return self._binary(o, "mod")
    def __rmod__(self, o): return self._binary(o, "mod", True)
    def __pow__(self, o): return self._binary(o, "pow")
    def __rpow__(self, o): return self._binary(o, "pow", True)
    def __and__(self, o): return self._binary(o, "bitand")
    def __rand__(self, o): return self._binary(o, "bitand", True)
    def __or__(self, o): return self._binary(o, "bitor")
    def __ror__(self, o): return self._binary(o, "bitor", True)
    def __xor__(self, o): return self._binary(o, "bitxor")
    def __rxor__(self, o): return self._binary(o, "bitxor", True)
    def __eq__(self, o): return self._binary(o, "eq")  # type: ignore[override]
    def __ne__(self, o): return self._binary(o, "neq")  # type: ignore[override]
    def __lt__(self, o): return self._binary(o, "lt")
    def __le__(self, o): return self._binary(o, "leq")
    def __gt__(self, o): return self._binary(o, "gt")
    def __ge__(self, o): return self._binary(o, "geq")

    def __lshift__(self, o): return self._binary(o, "lshift")
    def __rlshift__(self, o): return self._binary(o, "lshift", True)
    def __rshift__(self, o): return self._binary(o, "rshift")
    def __rrshift__(self, o): return self._binary(o, "rshift", True)

    def _unary(self, op: str) -> "DataNode":
        from jaxdali.ops import arithmetic

        return arithmetic.unary(self, op)

    def __neg__(self): return self._unary("neg")
    def __abs__(self): return self._unary("abs")
    def __invert__(self): return self._unary("invert")

    def __pos__(self):
        return self

    __hash__ = object.__hash__


class OpNode:
    """One operator instance in a pipeline graph.

    ``id`` is its position among all operators of the graph; ``seed_index`` its position among the
    seeded ones (``OpSchema.seeded``), from which an operator without a ``seed`` derives its seed.
    """

    def __init__(self, schema: OpSchema, op_id: int, name: str, device: str, inputs: list[DataNode],
                 args: dict[str, Any], arg_inputs: dict[str, DataNode], preserve: bool, seed_index: int):
        self.schema = schema
        self.id = op_id
        self.seed_index = seed_index
        self.name = name
        self.device = device
        self.inputs = inputs
        self.args = args
        self.arg_inputs = arg_inputs
        self.preserve = preserve
        self.outputs: list[DataNode] = []

    @property
    def display_name(self) -> str:
        return f"fn.{self.schema.name} (instance {self.name!r})"

    def fingerprint(self) -> dict:
        """Plain-data description used to recognise the same graph in a checkpoint."""
        return {
            "op": self.schema.name,
            "name": self.name,
            "device": self.device,
            "inputs": [n.name for n in self.inputs],
            "args": {k: _plain(v) for k, v in sorted(self.args.items())
                     if not (self.schema.arg_map[k].hint or self.schema.arg_map[k].placement)},
            "arg_inputs": {k: n.name for k, n in sorted(self.arg_inputs.items())},
        }

    def __repr__(self) -> str:
        return f"OpNode({self.display_name}, device={self.device!r})"


def _plain(v: Any) -> Any:
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, np.ndarray):
        return {"array": v.tolist(), "dtype": str(v.dtype)}
    if hasattr(v, "name") and hasattr(v, "value"):  # enums
        return f"{type(v).__name__}.{v.name}"
    if callable(v):
        return f"<callable {getattr(v, '__qualname__', type(v).__name__)}>"
    return repr(v)


def _as_input_node(op: str, i: int, value: Any) -> DataNode:
    if isinstance(value, DataNode):
        return value
    if isinstance(value, (ScalarConstant, int, float, bool, np.ndarray, list, tuple, np.number)):
        arr = value.as_array() if isinstance(value, ScalarConstant) else default_constant_array(value)
        return constant_node(arr)
    raise OpArgumentError(f"fn.{op}: input {i} must be a DataNode (an output of another operator), got {value!r}")


def default_constant_array(value: Any) -> np.ndarray:
    """A constant as an array with DALI's default types: Python ints are int32, floats float32."""
    arr = np.asarray(value)
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype == np.int64:
        arr = arr.astype(np.int32)
    return arr


def _require_graph(op: str) -> "Pipeline":
    pipe = current_graph()
    if pipe is None:
        raise RuntimeError(
            f"fn.{op} was called outside a pipeline definition. Call operators inside a function "
            "decorated with @pipeline_def, or inside `with pipe:` for a Pipeline object.")
    return pipe


def add_op(schema: OpSchema, inputs: Sequence[Any], kwargs: dict[str, Any]) -> list[DataNode]:
    """Adds one instance of ``schema`` to the current pipeline graph; returns its output nodes."""
    op = schema.name
    pipe = _require_graph(op)
    kwargs = dict(kwargs)
    device = kwargs.pop("device", None)
    name = kwargs.pop("name", None)
    if len(inputs) < schema.min_inputs or len(inputs) > schema.max_inputs:
        expected = (str(schema.min_inputs) if schema.min_inputs == schema.max_inputs
                    else f"{schema.min_inputs} to {schema.max_inputs}")
        raise OpArgumentError(f"fn.{op}: expected {expected} inputs, got {len(inputs)}")
    in_nodes = [_as_input_node(op, i, v) for i, v in enumerate(inputs)]
    on_gpu = any(n.device == "gpu" for n in in_nodes)
    if device is None:
        device = "gpu" if on_gpu else ("cpu" if "cpu" in schema.devices else schema.devices[0])
    if device not in _DEVICES:
        raise OpArgumentError(f"fn.{op}: argument 'device' must be one of {list(_DEVICES)}, got {device!r}")
    if device not in schema.devices:
        raise OpArgumentError(
            f"fn.{op}: device={device!r} is not supported; supported: {list(schema.devices)}")
    if device in ("cpu", "mixed"):
        for i, n in enumerate(in_nodes):
            if n.device == "gpu":
                raise OpArgumentError(
                    f"fn.{op}: input {i} ({n.name!r}) is on the GPU but the operator runs on "
                    f"device={device!r}; move the data with .cpu() first or run the operator with device='gpu'")

    arg_map = schema.arg_map
    args: dict[str, Any] = {}
    arg_inputs: dict[str, DataNode] = {}
    for key, value in kwargs.items():
        if key in schema.rejected:
            raise OpArgumentError(f"fn.{op}: argument '{key}' is not supported: {schema.rejected[key]}")
        spec = arg_map.get(key)
        if spec is None:
            raise OpArgumentError(
                f"fn.{op}: unknown argument '{key}'. Known arguments: {', '.join(sorted(arg_map))}")
        if isinstance(value, DataNode):
            if not spec.tensor:
                raise OpArgumentError(
                    f"fn.{op}: argument '{key}' does not accept per-sample data (a DataNode); pass a constant")
            arg_inputs[key] = value
        else:
            args[key] = spec.convert(op, value)
    for spec in schema.all_args:
        if spec.name in args or spec.name in arg_inputs:
            continue
        if spec.default is REQUIRED:
            raise OpArgumentError(f"fn.{op}: argument '{spec.name}' is required")
        args[spec.name] = spec.default
    preserve = bool(args.get("preserve"))
    node = pipe._graph_add(schema, device, name, in_nodes, args, arg_inputs, preserve)
    return node.outputs


def constant_node(array: np.ndarray, layout: str = "", device: str = "cpu") -> DataNode:
    """A node whose every sample is ``array``."""
    from jaxdali.ops import arithmetic

    out = add_op(arithmetic.CONSTANT, [], {"value": array, "layout": layout})[0]
    return out.gpu() if device == "gpu" else out


def reachable_ops(outputs: Iterable[DataNode], preserved: Iterable[OpNode]) -> list[OpNode]:
    """Operators needed for ``outputs`` and the preserved ones, in creation (= topological) order."""
    seen: dict[int, OpNode] = {}
    stack: list[OpNode] = [n.source for n in outputs] + list(preserved)
    while stack:
        op = stack.pop()
        if op.id in seen:
            continue
        seen[op.id] = op
        stack.extend(n.source for n in op.inputs)
        stack.extend(n.source for n in op.arg_inputs.values())
    return [seen[k] for k in sorted(seen)]
