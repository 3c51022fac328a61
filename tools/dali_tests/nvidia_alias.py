"""Makes ``import nvidia.dali...`` load ``jaxdali...``: the one-line port, done for code we may not edit.

Installed by ``sitecustomize.py`` (this folder on PYTHONPATH), so that spawned worker processes get
it too. Only the ``nvidia.dali`` subtree is redirected; every other ``nvidia.*`` package is untouched.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
import types

DALI_PREFIX = "nvidia.dali"
PORT_PREFIX = "jaxdali"


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self._target = target

    def create_module(self, spec):
        return None  # a placeholder; exec_module swaps in the real module

    def exec_module(self, module) -> None:
        # The import system reads the module back from sys.modules after exec_module, so the alias
        # and the real module are the same object (one registry, one set of classes).
        sys.modules[module.__name__] = importlib.import_module(self._target)


class _PlaceholderLoader(importlib.abc.Loader):
    """An empty module for a DALI module jaxdali lacks: importing it works, using it fails."""

    def create_module(self, spec):
        module = _Placeholder(spec.name)
        module.__path__ = []  # a package, so that its submodules import too
        return module

    def exec_module(self, module) -> None:
        pass


class _Placeholder(types.ModuleType):
    def __getattr__(self, attr: str):
        raise AttributeError(f"{self.__name__}.{attr}: jaxdali has no such module (placeholder for a diagnostic run)")


def _find(name: str):
    try:
        return importlib.util.find_spec(name)
    except ModuleNotFoundError:  # its parent package is missing
        return None


def _placeholder_prefixes() -> tuple[str, ...]:
    # Diagnostic only (see docs/dali_tests.md): lets a test file whose module-level import names a
    # missing DALI module load, so that its other tests run; the tests using it still fail.
    return tuple(p for p in os.environ.get("DALI_ALIAS_PLACEHOLDERS", "").split(",") if p)


class NvidiaDaliAlias(importlib.abc.MetaPathFinder):
    """Finds ``nvidia.dali[.x.y]`` as ``jaxdali[.x.y]``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != DALI_PREFIX and not fullname.startswith(DALI_PREFIX + "."):
            return None
        ported = PORT_PREFIX + fullname[len(DALI_PREFIX):]
        if _find(ported) is None:
            if any(fullname == p or fullname.startswith(p + ".") for p in _placeholder_prefixes()):
                return importlib.util.spec_from_loader(fullname, _PlaceholderLoader(), is_package=True)
            return None  # reported as the ModuleNotFoundError a port would meet
        is_package = hasattr(importlib.import_module(ported), "__path__")
        return importlib.util.spec_from_loader(fullname, _AliasLoader(ported), is_package=is_package)


def install() -> None:
    if not any(isinstance(f, NvidiaDaliAlias) for f in sys.meta_path):
        sys.meta_path.insert(0, NvidiaDaliAlias())
