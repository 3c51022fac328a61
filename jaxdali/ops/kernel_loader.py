"""Loading an optional compiled kernel and checking that it was built from the source beside it.

setup.py compiles each kernel's C source with its SHA-256 (line endings normalised) as the module
constant ``SOURCE_SHA256``. A module built from another version of the source (a stale editable
install) is ignored with a warning, so the caller runs its NumPy path instead of a kernel whose
interface or results may differ.
"""

from __future__ import annotations

import hashlib
import importlib
import pathlib
import types
import warnings

__all__ = ["load_kernel"]


def load_kernel(module_name: str, source: pathlib.Path, what: str) -> tuple[types.ModuleType | None, str]:
    """The compiled module ``module_name`` built from ``source`` and why it is used, or None and why not;
    ``what`` names the kernel in the warning about a stale build (e.g. "protobuf parser")."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        return None, f"not built ({e}); a C compiler at install time builds it"
    if not source.is_file():  # an installation without the source: nothing to compare with
        return module, f"{module.__file__} (source not installed, not checked)"
    expected = "0x" + hashlib.sha256(source.read_bytes().replace(b"\r\n", b"\n")).hexdigest()
    if getattr(module, "SOURCE_SHA256", None) != expected:
        reason = (f"{module.__file__} was built from another version of {source.name}; rebuild it with "
                  "`pip install -e .` (or `python setup.py build_ext --inplace`)")
        warnings.warn(f"jaxdali ignores its compiled {what}: {reason}. It runs the NumPy path instead (same results, "
                      "slower).", RuntimeWarning, stacklevel=3)
        return None, f"stale: {reason}"
    return module, f"{module.__file__}, built from this source"
