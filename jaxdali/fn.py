"""The ``fn`` namespace: ``fn.readers.file``, ``fn.decoders.image``, ``fn.random.coin_flip``, ...

Every function is generated from an operator schema (``jaxdali.ops.schema``); calling it inside a
pipeline definition adds an operator instance and returns its output DataNode(s).
"""

from __future__ import annotations

import inspect
import sys
import types as _pytypes
from typing import Any, Callable

import jaxdali.ops  # noqa: F401  (registers the operators)
from jaxdali.ops.readers.external_source import external_source
from jaxdali.ops.schema import REQUIRED, OpSchema, on_register, registry
from jaxdali.ops.graph import add_op

__all__ = ["external_source"]


def _make_function(schema: OpSchema) -> Callable:
    def operator_function(*inputs: Any, **kwargs: Any):
        outputs = add_op(schema, inputs, kwargs)
        if schema.output_names is not None:
            return dict(zip(schema.output_names(kwargs), outputs))
        return outputs[0] if len(outputs) == 1 else outputs

    leaf = schema.name.rsplit(".", 1)[-1]
    operator_function.__name__ = leaf
    operator_function.__qualname__ = leaf
    operator_function.__module__ = "jaxdali.fn"
    operator_function.__doc__ = schema.docstring()
    params = [inspect.Parameter("inputs", inspect.Parameter.VAR_POSITIONAL),
              inspect.Parameter("device", inspect.Parameter.KEYWORD_ONLY, default=None),
              inspect.Parameter("name", inspect.Parameter.KEYWORD_ONLY, default=None)]
    params += [inspect.Parameter(a.name, inspect.Parameter.KEYWORD_ONLY,
                                 default=inspect.Parameter.empty if a.default is REQUIRED else a.default)
               for a in schema.all_args]
    operator_function.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return operator_function


def _namespace(path: str) -> _pytypes.ModuleType:
    """The (sub)module ``jaxdali.fn.<path>``, created on first use so ``import jaxdali.fn.readers`` works."""
    module = sys.modules[__name__]
    full = __name__
    for part in path.split(".") if path else []:
        full = f"{full}.{part}"
        child = getattr(module, part, None)
        if child is None:
            child = _pytypes.ModuleType(full, f"jaxdali.fn.{full.split('.', 2)[-1]} operators")
            sys.modules[full] = child
            setattr(module, part, child)
            if module is sys.modules[__name__]:
                __all__.append(part)
        module = child
    return module


def _publish(schema: OpSchema) -> None:
    """Makes ``fn.<schema.name>`` call the operator."""
    if schema.name.startswith("_") or schema.name == "external_source":
        return
    parent, _, leaf = schema.name.rpartition(".")
    setattr(_namespace(parent), leaf, _make_function(schema))
    if not parent:
        __all__.append(leaf)


for _schema in registry().values():
    _publish(_schema)
on_register(_publish)
