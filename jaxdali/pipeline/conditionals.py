"""``enable_conditionals=True``: ``if``/``elif``/``else``, ``and``/``or``/``not`` and ``x if c else y``
on per-sample DataNodes inside pipeline definitions.

``convert`` rewrites the pipeline function's source once: each ``if`` first evaluates its test; a
plain Python value takes the ordinary path, a DataNode runs *both* branches at graph-definition
time, each inside a branch scope. Every operator created in a scope gets only the samples of its
branch: its inputs from outside the ``if`` are split by the predicate (``_conditional.split``), and
it runs with the branch's batch size. After the branches, each variable either branch assigned is
merged back in sample order (``_conditional.merge``); Python values that differ between the
branches become constants first. A variable assigned in one branch only and used after the ``if``
is an error that names it. Functions the pipeline function calls are converted the same way when
they are called (except library code).

The split and merge operators are stateless and unseeded, so conditionals change neither
checkpoints nor the random streams of the other operators.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import os
import sys
import textwrap
import threading
import types
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from jaxdali.ops.branch_scope import AtScope, Branch, current_scope, route
from jaxdali.ops.graph import DataNode, add_op, constant_node, default_constant_array

__all__ = ["convert", "converted_call", "Condition"]


# -- the runtime of converted code --------------------------------------------------------------------------

class _Undefined:
    """The value of a variable that only one branch assigned; any use names it."""

    def __init__(self, name: str, origin: str):
        self.name, self.origin = name, origin

    def _fail(self, *args: Any, **kwargs: Any):
        raise NameError(f"variable {self.name!r} is assigned in only one branch of the `if` at {self.origin} (or in "
                        "neither); assign it in both branches, or before the `if`, to use it afterwards")

    __call__ = __getattr__ = __getitem__ = __iter__ = __bool__ = _fail

    def __repr__(self) -> str:
        return f"<undefined {self.name!r}: assigned in only one branch of the `if` at {self.origin}>"


class _Unbound:
    """Marks a variable that had no value when captured."""


_UNBOUND = _Unbound()


def is_data(value: Any) -> bool:
    return isinstance(value, DataNode)


def _capture(getters: Sequence[Callable[[], Any]]) -> list:
    values = []
    for get in getters:
        try:
            values.append(get())
        except NameError:  # UnboundLocalError and free variables not bound yet
            values.append(_UNBOUND)
    return values


class Condition:
    """One ``if`` on a DataNode: its predicate (on the host), its branch scopes and the splits made."""

    def __init__(self, predicate: DataNode, origin: str):
        self.origin = origin
        self.scope = current_scope()
        if predicate.device != "cpu":
            predicate = predicate.cpu()
        self.predicate = route(predicate, self.scope)
        self.branches = (Branch(self, True), Branch(self, False))
        self._splits: dict[int, tuple[DataNode, DataNode, DataNode]] = {}
        self.sides = self.split(self.predicate)
        self._before: list = []

    def split(self, node: DataNode) -> tuple[DataNode, DataNode]:
        """``node`` (of this condition's scope) split into its true and false samples, made once."""
        made = self._splits.get(id(node))
        if made is None:
            with AtScope(self.scope):
                true_part, false_part = add_op(_split_schema(), [node, self.predicate], {"origin": self.origin})
            true_part.scope = self.scope + (self.branches[0],)
            false_part.scope = self.scope + (self.branches[1],)
            made = self._splits[id(node)] = (true_part, false_part, node)  # keeps node alive: ids stay unique
        return made[0], made[1]

    def branch(self, side: bool) -> AtScope:
        return AtScope(self.scope + (self.branches[0 if side else 1],))

    def save(self, getters: Sequence[Callable[[], Any]]) -> None:
        self._before = _capture(getters)

    def before(self, i: int) -> Any:
        """Variable ``i``'s value before the ``if`` (``_UNBOUND`` if it had none)."""
        return self._before[i]

    def merge(self, names: Sequence[str], true_values: Sequence[Any], false_values: Sequence[Any]) -> list:
        return [self.merge_one(name, t, f) for name, t, f in zip(names, true_values, false_values)]

    def merge_one(self, name: str, true_value: Any, false_value: Any) -> Any:
        if true_value is _UNBOUND or false_value is _UNBOUND or isinstance(true_value, _Undefined) \
                or isinstance(false_value, _Undefined):
            return _Undefined(name, self.origin)
        if true_value is false_value:
            return true_value
        if not is_data(true_value) and not is_data(false_value) and _same_python_value(true_value, false_value):
            return true_value
        parts = [self._as_branch_node(name, v, side) for v, side in ((true_value, True), (false_value, False))]
        if parts[0].device != parts[1].device:
            with self.branch(parts[0].device == "cpu"):
                k = 0 if parts[0].device == "cpu" else 1
                parts[k] = parts[k].gpu()
        with AtScope(self.scope, merging=True):
            return add_op(_merge_schema(), [parts[0], parts[1], self.predicate],
                          {"origin": self.origin, "variable": name})[0]

    def _as_branch_node(self, name: str, value: Any, side: bool) -> DataNode:
        scope = self.scope + (self.branches[0 if side else 1],)
        if is_data(value):
            return route(value, scope)
        try:
            array = default_constant_array(value)
        except Exception:
            array = None
        if array is None or array.dtype == object:
            raise TypeError(f"variable {name!r} is {value!r} in one branch of the `if` at {self.origin} and differs "
                            "in the other; only DataNodes and numbers or arrays can differ between the branches of "
                            "an `if` on a DataNode")
        with AtScope(scope):
            return constant_node(array)


def _same_python_value(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(np.all(a == b))
    except Exception:
        return False


def _split_schema():
    from jaxdali.ops import conditional

    return conditional.SPLIT


def _merge_schema():
    from jaxdali.ops import conditional

    return conditional.MERGE


def if_exp(test: Any, body: Callable[[], Any], orelse: Callable[[], Any], origin: str) -> Any:
    """``body() if test else orelse()``."""
    if not is_data(test):
        return body() if test else orelse()
    condition = Condition(test, origin)
    with condition.branch(True):
        true_value = body()
    with condition.branch(False):
        false_value = orelse()
    return condition.merge_one("<expression>", true_value, false_value)


def not_(value: Any) -> Any:
    return value == 0 if is_data(value) else not value


def _as_bool(value: DataNode) -> DataNode:
    return value if _is_bool(value) else value != 0


_COMPARISONS = frozenset({"eq", "neq", "lt", "leq", "gt", "geq"})


def _is_bool(node: DataNode) -> bool:
    from jaxdali.ops import arithmetic, conditional

    source = node.source
    return (source.schema is arithmetic.BINARY and source.args.get("op") in _COMPARISONS) or \
        source.schema is conditional.MERGE and source.args.get("variable") == "<logical expression>"


def and_(origin: str, *operands: Callable[[], Any]) -> Any:
    """``a and b and ...``: per sample, later operands are computed only where the earlier are true."""
    return _logical(origin, operands, stop_on=False)


def or_(origin: str, *operands: Callable[[], Any]) -> Any:
    """``a or b or ...``: per sample, later operands are computed only where the earlier are false."""
    return _logical(origin, operands, stop_on=True)


def _logical(origin: str, operands: Sequence[Callable[[], Any]], stop_on: bool) -> Any:
    value = operands[0]()
    if len(operands) == 1:
        return _as_bool(value) if is_data(value) else value
    if not is_data(value):
        return value if bool(value) == stop_on else _logical(origin, operands[1:], stop_on)
    value = _as_bool(value)
    condition = Condition(value, origin)
    with condition.branch(not stop_on):
        rest = _logical(origin, operands[1:], stop_on)
        rest = _as_bool(rest) if is_data(rest) else bool(rest)
    decided = condition.sides[1 if not stop_on else 0]  # the samples whose value is already the answer
    parts = (rest, decided) if not stop_on else (decided, rest)
    return condition.merge_one("<logical expression>", *parts)


# -- converting functions ---------------------------------------------------------------------------------

_RUNTIME = "__jaxdali_conditionals__"
# Calls that must stay in the caller's frame.
_FRAME_BUILTINS = frozenset({"super", "locals", "globals", "vars", "eval", "exec", "dir"})
_counter = itertools.count()
_converted: "weakref.WeakKeyDictionary[types.CodeType, types.CodeType]" = weakref.WeakKeyDictionary()
_LIBRARY_ROOTS = tuple({os.path.dirname(os.path.dirname(os.__file__)), os.path.dirname(os.path.dirname(__file__)),
                        sys.prefix, sys.exec_prefix, getattr(sys, "base_prefix", sys.prefix)})


def convert(func: Callable) -> Callable:
    """``func`` with its ``if`` statements, logical operators and conditional expressions made able to
    test DataNodes (see the module docstring). Raises TypeError when its source is not available."""
    code = _converted_code(func)
    cells = dict(zip(func.__code__.co_freevars, func.__closure__ or ()))
    runtime_cell = types.CellType(sys.modules[__name__])
    closure = tuple(runtime_cell if name == _RUNTIME else cells[name] for name in code.co_freevars)
    converted = types.FunctionType(code, func.__globals__, func.__name__, func.__defaults__, closure or None)
    converted.__kwdefaults__ = func.__kwdefaults__
    functools.update_wrapper(converted, func)
    return converted


def converted_call(func: Any, *args: Any, **kwargs: Any) -> Any:
    """Calls ``func``, converted first when it is a user's Python function (not library code)."""
    if isinstance(func, types.FunctionType) and _is_user_code(func):
        try:
            func = convert(func)
        except TypeError:
            pass  # no source (e.g. defined in a REPL): called as it is
    return func(*args, **kwargs)


def _is_user_code(func: types.FunctionType) -> bool:
    filename = os.path.abspath(func.__code__.co_filename)
    return os.path.exists(filename) and not filename.startswith(_LIBRARY_ROOTS) and "site-packages" not in filename


def _converted_code(func: Callable) -> types.CodeType:
    if not isinstance(func, types.FunctionType):
        raise TypeError(f"enable_conditionals=True needs a Python function, got {func!r}")
    cached = _converted.get(func.__code__)
    if cached is not None:
        return cached
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as e:
        raise TypeError(f"enable_conditionals=True needs the source code of {func.__qualname__} to convert its "
                        f"`if` statements, and it is not available ({e})") from None
    tree = ast.parse(source)
    definition = tree.body[0]
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise TypeError(f"enable_conditionals=True cannot convert {func.__qualname__}: define it with `def`")
    definition.decorator_list = []
    ast.increment_lineno(definition, func.__code__.co_firstlineno - 1)
    filename = func.__code__.co_filename
    _Converter(filename).visit(definition)
    # The function is defined inside a factory whose local variable is the runtime module, so the
    # converted code reaches it as a closure cell instead of through the user's module globals.
    factory = ast.parse("def __jaxdali_factory__():\n    pass").body[0]
    factory.body = [*ast.parse("\n".join(f"{name} = None" for name in (_RUNTIME, *func.__code__.co_freevars))).body,
                    definition, ast.Return(ast.Name(definition.name, ast.Load()))]
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    namespace: dict = {}
    exec(compile(module, filename, "exec"), dict(func.__globals__), namespace)
    code = namespace["__jaxdali_factory__"]().__code__
    _converted[func.__code__] = code
    return code


def _assigned_names(statements: Sequence[ast.stmt]) -> list[str]:
    """Local names the statements assign (nested functions, classes and lambdas excluded)."""
    names: dict[str, None] = {}

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = None
            return
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and not node.id.startswith("__jd_"):
            names[node.id] = None
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in statements:
        visit(statement)
    return list(names)


def _exits(statements: Sequence[ast.stmt]) -> bool:
    """Whether the statements leave the ``if`` early (return, break, continue, raise aside)."""
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(node, (ast.Return, ast.Break, ast.Continue)):
                return True
    return False


def _parse_statements(text: str) -> list[ast.stmt]:
    return ast.parse(textwrap.dedent(text)).body


class _Converter(ast.NodeTransformer):
    def __init__(self, filename: str):
        self._filename = filename

    def _origin(self, node: ast.AST) -> str:
        return f"{self._filename}:{node.lineno}"

    def _runtime(self, attr: str) -> ast.Attribute:
        return ast.Attribute(ast.Name(_RUNTIME, ast.Load()), attr, ast.Load())

    def _lambda(self, body: ast.expr) -> ast.Lambda:
        return ast.Lambda(ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]), body)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _FRAME_BUILTINS:
            return node
        return ast.copy_location(ast.Call(self._runtime("converted_call"), [node.func, *node.args], node.keywords),
                                 node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        helper = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.copy_location(ast.Call(self._runtime(helper), [
            ast.Constant(self._origin(node)), *[self._lambda(v) for v in node.values]], []), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        return ast.copy_location(ast.Call(self._runtime("not_"), [node.operand], []), node)

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(ast.Call(self._runtime("if_exp"), [
            node.test, self._lambda(node.body), self._lambda(node.orelse), ast.Constant(self._origin(node))], []),
            node)

    def visit_If(self, node: ast.If) -> list[ast.stmt]:
        self.generic_visit(node)
        k = next(_counter)
        test, cond = f"__jd_test{k}", f"__jd_cond{k}"
        names = _assigned_names(node.body + node.orelse)
        getters = "(" + "".join(f"lambda: {n}, " for n in names) + ")"
        plain = ast.If(ast.Name(test, ast.Load()), node.body, node.orelse or [])
        if _exits(node.body + node.orelse):
            data_path = _parse_statements(
                f"raise NotImplementedError('the `if` at {self._origin(node)} tests a DataNode and one of its "
                "branches returns, breaks or continues; assign variables in both branches and leave after the `if`')")
        else:
            restore = []
            for i, n in enumerate(names):
                restore += _parse_statements(f"""
                    if {cond}.before({i}) is {_RUNTIME}._UNBOUND:
                        try:
                            del {n}
                        except NameError:
                            pass
                    else:
                        {n} = {cond}.before({i})
                """)
            true_with = ast.With([ast.withitem(_parse_statements(f"{cond}.branch(True)")[0].value)],
                                 node.body)
            false_with = ast.With([ast.withitem(_parse_statements(f"{cond}.branch(False)")[0].value)],
                                  node.orelse or [ast.Pass()])
            targets = ", ".join(names) + ("," if len(names) == 1 else "")
            merge = _parse_statements(
                f"{targets} = {cond}.merge({tuple(names)!r}, __jd_true{k}, {_RUNTIME}._capture({getters}))"
            ) if names else []
            data_path = [
                *_parse_statements(f"{cond} = {_RUNTIME}.Condition({test}, {self._origin(node)!r})"),
                *_parse_statements(f"{cond}.save({getters})"),
                true_with,
                *_parse_statements(f"__jd_true{k} = {_RUNTIME}._capture({getters})"),
                *restore,
                false_with,
                *merge,
            ]
        statements = [
            ast.Assign([ast.Name(test, ast.Store())], node.test),
            ast.If(ast.UnaryOp(ast.Not(), ast.Call(self._runtime("is_data"), [ast.Name(test, ast.Load())], [])),
                   [plain], data_path),
        ]
        for statement in statements:
            ast.copy_location(statement, node)
        return statements
