"""Pickling of ``external_source`` callbacks for worker processes started with ``spawn``/``forkserver``.

The standard pickler stores a function as a reference (module and qualified name) that the worker
imports again, so lambdas, functions defined inside other functions and closures cannot cross into
a spawned process. ``dumps`` stores such functions by value instead: their code, the globals they
read, their defaults and the contents of their closure cells, each pickled the same way (so a
closure over another local function works). Importable functions, classes and modules stay
references. Callbacks must therefore be picklable as values: local *classes* are not (use a
module-level class, or pass a third-party pickler such as ``cloudpickle`` through the pipeline's
``py_callback_pickler``).

``pickle_by_value`` marks a module-level function to be stored by value too — useful for a
function defined in a script whose ``__main__`` guard keeps the worker from re-creating it.
"""

from __future__ import annotations

import builtins
import importlib
import io
import marshal
import pickle
import sys
import types
from typing import Any, Callable

__all__ = ["dumps", "loads", "pickle_by_value", "resolve_pickler"]

_BY_VALUE_ATTR = "__jaxdali_pickle_by_value__"


def pickle_by_value(fn: Callable) -> Callable:
    """Marks ``fn`` to be pickled by value even though it could be imported by name."""
    setattr(fn, _BY_VALUE_ATTR, True)
    return fn


def _importable(fn: types.FunctionType) -> bool:
    """Whether ``fn`` can be found again by module and qualified name (pickle's by-reference rule)."""
    if getattr(fn, _BY_VALUE_ATTR, False) or "<locals>" in fn.__qualname__ or fn.__name__ == "<lambda>":
        return False
    module = sys.modules.get(fn.__module__)
    target: Any = module
    for part in fn.__qualname__.split("."):
        target = getattr(target, part, None)
    return target is fn


def _global_names(code: types.CodeType) -> set[str]:
    """Names ``code`` and the code objects nested in it may read as globals."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _make_cell() -> types.CellType:
    return types.CellType()


def _skeleton(code_bytes: bytes, name: str, n_cells: int) -> types.FunctionType:
    """An empty function of the right code; ``_fill`` gives it globals, defaults and cell contents.

    Building it in two steps lets a function reach itself through its globals or cells."""
    code = marshal.loads(code_bytes)
    closure = tuple(_make_cell() for _ in range(n_cells)) or None
    return types.FunctionType(code, {"__builtins__": builtins}, name, None, closure)


def _fill(fn: types.FunctionType, state: dict) -> None:
    fn.__globals__.update(state["globals"])
    fn.__defaults__ = state["defaults"]
    fn.__kwdefaults__ = state["kwdefaults"]
    fn.__qualname__ = state["qualname"]
    fn.__module__ = state["module"]
    fn.__dict__.update(state["dict"])
    for cell, (filled, value) in zip(fn.__closure__ or (), state["cells"]):
        if filled:
            cell.cell_contents = value


def _function_by_value(fn: types.FunctionType) -> tuple:
    wanted = _global_names(fn.__code__)
    state = {
        "globals": {k: v for k, v in fn.__globals__.items() if k in wanted},
        "defaults": fn.__defaults__,
        "kwdefaults": fn.__kwdefaults__,
        "qualname": fn.__qualname__,
        "module": fn.__module__,
        "dict": dict(fn.__dict__),
        "cells": [_cell_state(c) for c in fn.__closure__ or ()],
    }
    args = (marshal.dumps(fn.__code__), fn.__name__, len(fn.__closure__ or ()))
    return _skeleton, args, state, None, None, _fill


def _cell_state(cell: types.CellType) -> tuple[bool, Any]:
    try:
        return True, cell.cell_contents
    except ValueError:  # a cell not assigned yet
        return False, None


class _ByValuePickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType) and not _importable(obj):
            return _function_by_value(obj)
        if isinstance(obj, types.ModuleType):
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, types.CodeType):
            return marshal.loads, (marshal.dumps(obj),)
        return NotImplemented


def dumps(obj: Any, protocol: int | None = None, **kwargs: Any) -> bytes:
    """Pickles ``obj``, storing local functions, lambdas and closures by value."""
    buffer = io.BytesIO()
    _ByValuePickler(buffer, protocol or pickle.DEFAULT_PROTOCOL, **kwargs).dump(obj)
    return buffer.getvalue()


def loads(data: bytes, **kwargs: Any) -> Any:
    """Unpickles what ``dumps`` wrote."""
    return pickle.loads(data, **kwargs)


def resolve_pickler(py_callback_pickler: Any) -> tuple[Any, dict, dict]:
    """``Pipeline(py_callback_pickler=...)`` as ``(pickler, dumps_kwargs, loads_kwargs)``.

    ``None`` means this module; else an object (usually a module such as ``cloudpickle`` or ``dill``)
    with ``dumps`` and ``loads``, or a tuple of it and optional keyword arguments for ``dumps`` and
    for ``loads``.
    """
    if py_callback_pickler is None:
        return sys.modules[__name__], {}, {}
    if isinstance(py_callback_pickler, tuple):
        if not 1 <= len(py_callback_pickler) <= 3:
            raise ValueError("Pipeline: py_callback_pickler as a tuple must be (pickler, dumps_kwargs, loads_kwargs) "
                             f"with the kwargs optional; got {len(py_callback_pickler)} items")
        pickler, *kwargs = py_callback_pickler
        dumps_kwargs, loads_kwargs = (list(kwargs) + [{}, {}])[:2]
    else:
        pickler, dumps_kwargs, loads_kwargs = py_callback_pickler, {}, {}
    if not (callable(getattr(pickler, "dumps", None)) and callable(getattr(pickler, "loads", None))):
        raise TypeError(f"Pipeline: py_callback_pickler must have 'dumps' and 'loads' methods (e.g. the cloudpickle "
                        f"module), got {pickler!r}")
    return pickler, dict(dumps_kwargs or {}), dict(loads_kwargs or {})
