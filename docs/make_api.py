"""Writes docs/api.md, the API reference, from the docstrings and signatures of the public objects.

Run ``python docs/make_api.py`` after changing a public docstring or signature; the test suite
(``tests/test_api_docs.py``) fails while docs/api.md is out of date.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import pathlib
import sys
import types as pytypes

REPO = pathlib.Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "api.md"

#: The public modules, in reading order; each documents the names in its ``__all__``.
MODULES = [
    "jaxdali",
    "jaxdali.fn",
    "jaxdali.types",
    "jaxdali.plugin.jax",
    "jaxdali.plugin.jax.fn",
    "jaxdali.plugin.jax.orbax",
    "jaxdali.plugin.jax.clu",
    "jaxdali.plugin.pytorch",
    "jaxdali.config",
    "jaxdali.datasets",
    "jaxdali.ops.schema",
    "jaxdali.ops.operator",
    "jaxdali.ops.decoders",
    "jaxdali.cli",
]


def _signature(obj) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""


def _doc(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip()


def _entry(module: str, name: str, obj) -> list[str]:
    if isinstance(obj, pytypes.ModuleType):
        if obj.__name__.startswith("jaxdali.fn."):  # an operator namespace: fn.readers, fn.random, ...
            return [line for leaf in sorted(vars(obj)) if not leaf.startswith("_")
                    for line in _entry(f"{module}.{name}", leaf, getattr(obj, leaf))]
        lines = [f"### `{module}.{name}` (module)", ""]
        first = _doc(obj).split("\n\n")[0]
        return lines + ([first, ""] if first else [])
    if inspect.isclass(obj):
        kind = "enum" if issubclass(obj, enum.Enum) else "class"
        lines = [f"### `{module}.{name}` ({kind})", ""]
        if kind == "enum":
            lines += [_doc(obj), "", "Members: " + ", ".join(f"`{m.name}`" for m in obj), ""]
            return lines
        lines += [f"```text\n{name}{_signature(obj)}\n```", "", _doc(obj), ""]
        for attr, member in sorted(vars(obj).items()):
            if attr.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property)):
                continue
            if not _doc(member):
                continue
            shown = f"{attr}{_signature(member)}" if inspect.isfunction(member) else f"{attr} (property)"
            lines += [f"* `{shown}`: " + _doc(member).replace("\n", "\n  "), ""]
        return lines
    if callable(obj):
        return [f"### `{module}.{name}`", "", f"```text\n{name}{_signature(obj)}\n```", "", _doc(obj), ""]
    return [f"### `{module}.{name}`", "", f"`{obj!r}`" if isinstance(obj, (int, str, float)) else type(obj).__name__, ""]


def render() -> str:
    """The text of docs/api.md."""
    lines = ["# API reference", "",
             "Generated from the docstrings by `python docs/make_api.py`; do not edit by hand.", ""]
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        lines += [f"## `{module_name}`", "", _doc(module), ""]
        for name in module.__all__:
            lines += _entry(module_name, name, getattr(module, name))
    text = "\n".join(lines)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.rstrip() + "\n"


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))  # this checkout's jaxdali, installed or not
    OUT.write_text(render())
    print(f"wrote {OUT}")
