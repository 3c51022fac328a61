"""The operator graph a pipeline definition builds: DataNode, operator instances (OpNode), the graph
that holds them, tracing of ``fn.*`` calls and of arithmetic on nodes, pruning and ordering."""

from __future__ import annotations

import threading
import weakref
from typing import Any, Iterable, Sequence

import numpy as np

from jaxdali import types
from jaxdali.ops import arithmetic, transfer
from jaxdali.ops.schema import REQUIRED, OpArgumentError, OpSchema
from jaxdali.ops import branch_scope
from jaxdali.types import ScalarConstant

__all__ = ["DataNode", "OpNode", "Graph", "add_op", "current_graph", "GraphScope", "reachable_ops", "constant_node",
           "default_constant_array", "binary", "unary", "subscript"]

_DEVICES = ("cpu", "gpu", "mixed")


class _ScopeStack(threading.local):
    def __init__(self):
        self.stack: list["Graph"] = []


_scopes = _ScopeStack()


class GraphScope:
    """Context manager that makes ``graph`` the target of ``fn.*`` calls on this thread."""

    def __init__(self, graph: "Graph"):
        self._graph = graph

    def __enter__(self) -> "Graph":
        _scopes.stack.append(self._graph)
        return self._graph

    def __exit__(self, *exc):
        _scopes.stack.pop()


def current_graph() -> "Graph | None":
    """The graph being defined on this thread, or None."""
    return _scopes.stack[-1] if _scopes.stack else None


class DataNode:
    """A symbolic batch: one output of an operator instance.

    Supports arithmetic with numbers and other nodes (``+ - * / // % **``, comparisons, ``& | ^``),
    indexing and slicing per sample (bounds may be nodes), ``.gpu()`` and ``.cpu()``.
    """

    __array_priority__ = 1000  # NumPy scalars on the left defer to our reflected operators
    #: The conditional branches this node was computed in (see ``jaxdali.pipeline.conditionals``).
    scope: tuple = ()

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
        return add_op(transfer.TO_DEVICE, [self], {})[0]

    def cpu(self) -> "DataNode":
        """This batch in host memory."""
        if self.device == "cpu":
            return self
        return add_op(transfer.TO_HOST, [self], {})[0]

    def __bool__(self):
        raise TypeError(
            "A DataNode has no truth value at graph-definition time. To branch per sample with `if`, `and`, "
            "`or` or `not`, define the pipeline with @pipeline_def(enable_conditionals=True); or use "
            "arithmetic and argument inputs (e.g. `mirror=coin`).")

    def __iter__(self):
        raise TypeError(f"DataNode {self.name!r} is not iterable; index it per sample with node[i]")

    def __getitem__(self, index: Any) -> "DataNode":
        return subscript(self, index)

    # Arithmetic: each maps to one elementwise operator.
    def _binary(self, other: Any, op: str, reflected: bool = False) -> "DataNode":
        return binary(other, self, op) if reflected else binary(self, other, op)

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
        return unary(self, op)

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
        #: Inside a branch of a conditional: a node whose length is the batch size this operator runs
        #: with (see ``jaxdali.pipeline.conditionals``); None: the pipeline's batch.
        self.batch_node: DataNode | None = None

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


class Graph:
    """The operator instances a pipeline definition added, in creation order.

    ``owner`` is the object the graph belongs to (the ``Pipeline``; ``Pipeline.current()`` returns
    it), held weakly so that dropping the pipeline frees it at once, with no garbage collection.
    ``freeze()`` ends the definition: adding an operator afterwards is an error.
    """

    def __init__(self, owner: object):
        self._owner = weakref.ref(owner)
        self.ops: list[OpNode] = []
        self._names: set[str] = set()
        self._frozen = False

    @property
    def owner(self) -> object:
        return self._owner()

    def freeze(self) -> None:
        self._frozen = True

    def add(self, schema: OpSchema, device: str, name: str | None, inputs: list[DataNode], args: dict,
            arg_inputs: dict, preserve: bool) -> OpNode:
        """Adds one operator instance; returns it with its output nodes."""
        if self._frozen:
            raise RuntimeError(f"fn.{schema.name}: cannot add operators to pipeline after it was built")
        op_id = len(self.ops)
        if name is None:
            name = f"__{schema.name.replace('.', '_')}_{op_id}"
        elif not isinstance(name, str):
            raise TypeError(f"fn.{schema.name}: argument 'name' must be a string, got {name!r}")
        if name in self._names:
            raise RuntimeError(f"fn.{schema.name}: operator name {name!r} is not unique in the pipeline")
        self._names.add(name)
        last = self.ops[-1] if self.ops else None
        seed_index = last.seed_index + last.schema.seeded if last else 0
        node = OpNode(schema, op_id, name, device, inputs, args, arg_inputs, preserve, seed_index)
        out_device = schema.output_device or ("cpu" if device == "cpu" else "gpu")
        n_out = schema.outputs_for(args, len(inputs))
        node.outputs = [DataNode(f"{name}[{i}]" if n_out > 1 else name, out_device, node, i) for i in range(n_out)]
        self.ops.append(node)
        return node


def _require_graph(op: str) -> Graph:
    graph = current_graph()
    if graph is None:
        raise RuntimeError(
            f"fn.{op} was called outside a pipeline definition. Call operators inside a function "
            "decorated with @pipeline_def, or inside `with pipe:` for a Pipeline object.")
    return graph


def add_op(schema: OpSchema, inputs: Sequence[Any], kwargs: dict[str, Any]) -> list[DataNode]:
    """Adds one instance of ``schema`` to the current pipeline graph; returns its output nodes."""
    op = schema.name
    graph = _require_graph(op)
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
            try:
                args[key] = spec.convert(op, value)
            except OpArgumentError:
                if not (spec.tensor and isinstance(value, np.ndarray) and value.ndim):
                    raise
                # As in DALI, a NumPy array that is no constant of the argument's type is every sample's value.
                arg_inputs[key] = constant_node(value)
    for spec in schema.all_args:
        if spec.name in args or spec.name in arg_inputs:
            continue
        if spec.default is REQUIRED:
            raise OpArgumentError(f"fn.{op}: argument '{spec.name}' is required")
        args[spec.name] = spec.default
    preserve = bool(args.get("preserve"))
    scope = branch_scope.current_scope()
    if scope and not branch_scope.merging():  # inside a branch of an `if` on a DataNode: its samples only
        in_nodes = [branch_scope.route(n, scope) for n in in_nodes]
        arg_inputs = {k: branch_scope.route(n, scope) for k, n in arg_inputs.items()}
    node = graph.add(schema, device, name, in_nodes, args, arg_inputs, preserve)
    if scope:
        node.batch_node = branch_scope.batch_node(scope)
        for out in node.outputs:
            out.scope = scope
    return node.outputs


def constant_node(array: np.ndarray, layout: str = "", device: str = "cpu") -> DataNode:
    """A node whose every sample is ``array``."""
    out = add_op(arithmetic.CONSTANT, [], {"value": array, "layout": layout})[0]
    return out.gpu() if device == "gpu" else out


# -- arithmetic and subscripts on nodes (their operators are in jaxdali.ops.arithmetic) -----------------

def _operand(value: Any):
    if isinstance(value, DataNode):
        return value
    if isinstance(value, ScalarConstant):
        return constant_node(value.as_array())
    if isinstance(value, np.generic):  # a NumPy scalar keeps its type, as in DALI
        return constant_node(np.asarray(value))
    arr = default_constant_array(value)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"cannot use {value!r} in pipeline arithmetic: expected a DataNode, a number, a list or array "
                        "of numbers, or types.Constant")
    return constant_node(arr)


def _require_graph_for(what: str, node: Any) -> None:
    if current_graph() is None:
        raise RuntimeError(f"`{what}` on {node!r} was used outside a pipeline definition. Combine DataNodes "
                           "inside the function decorated with @pipeline_def, or inside `with pipe:`.")


def _place(node, device: str):
    return node.gpu() if device == "gpu" else node


def binary(a: Any, b: Any, op: str):
    """``a <op> b`` as a new node; constants are placed next to the node operand."""
    _require_graph_for(arithmetic.SYMBOLS[op], a if isinstance(a, DataNode) else b)
    na, nb = _operand(a), _operand(b)
    device = "gpu" if "gpu" in (na.device, nb.device) else "cpu"
    return add_op(arithmetic.BINARY, [_place(na, device), _place(nb, device)], {"op": op})[0]


def unary(a: Any, op: str):
    """``<op> a`` as a new node."""
    _require_graph_for(arithmetic.SYMBOLS[op], a)
    return add_op(arithmetic.UNARY, [_operand(a)], {"op": op})[0]


def subscript(node, index: Any):
    """``node[index]``: per-sample integer indices and slices; bounds may be DataNodes."""
    _require_graph_for("[]", node)
    entries = index if isinstance(index, tuple) else (index,)
    if len(entries) > arithmetic.MAX_SUBSCRIPT_AXES:
        raise IndexError(f"at most {arithmetic.MAX_SUBSCRIPT_AXES} indices are supported, got {len(entries)}")
    spec = []
    kwargs: dict[str, Any] = {}

    def bound(v: Any, name: str):
        if v is None:
            return None
        if isinstance(v, DataNode):
            kwargs[name] = v.cpu() if v.device == "gpu" else v
            return arithmetic.NODE_BOUND
        if isinstance(v, (int, np.integer)):
            return int(v)
        raise OpArgumentError(f"subscript bounds must be integers or DataNodes, got {v!r}")

    for axis, e in enumerate(entries):
        if isinstance(e, slice):
            spec.append(("slice", bound(e.start, f"lo_{axis}"), bound(e.stop, f"hi_{axis}"),
                         bound(e.step, f"step_{axis}")))
        elif e is Ellipsis or e is None:
            raise IndexError("`...` and `None` are not supported in DataNode subscripts; index each axis")
        else:
            spec.append(("at", bound(e, f"at_{axis}")))
    kwargs["spec"] = tuple(spec)
    return add_op(arithmetic.SUBSCRIPT, [node], kwargs)[0]


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
        if op.batch_node is not None:
            stack.append(op.batch_node.source)
    return [seen[k] for k in sorted(seen)]


types.set_constant_node_builder(constant_node)
