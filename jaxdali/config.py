"""Process-wide options, each declared once with its environment variable, default and help text.

Read an option with ``config.get("max_image_pixels")``; change it with
``config.update("max_image_pixels", 10_000_000)``. Environment variables are read once, at import.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

__all__ = ["Option", "OPTIONS", "get", "update", "runtime_info"]


@dataclasses.dataclass(frozen=True)
class Option:
    name: str
    env: str
    default: Any
    parse: Callable[[str], Any]
    help: str


OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("max_image_pixels", "JAXDALI_MAX_IMAGE_PIXELS", 1 << 28, int,
           "Decoders refuse images whose header declares more pixels (width x height) than this, before "
           "allocating anything."),
    Option("recycle_device_outputs", "JAXDALI_RECYCLE_DEVICE_OUTPUTS", True, lambda v: v.lower() not in ("0", "false", "no"),
           "Framework iterators let the fused device program write large outputs into the memory of earlier "
           "outputs that nothing holds any more (see docs/performance.md). Arrays derived from a batch outside "
           "the iterator (e.g. `.addressable_shards[i].data`) must not outlive the batch while this is on."),
)}

_values: dict[str, Any] = {}
for _opt in OPTIONS.values():
    _raw = os.environ.get(_opt.env)
    try:
        _values[_opt.name] = _opt.default if _raw is None else _opt.parse(_raw)
    except ValueError:
        raise ValueError(f"environment variable {_opt.env}={_raw!r} is not valid: {_opt.help}") from None


def get(name: str) -> Any:
    """The current value of option ``name``."""
    if name not in OPTIONS:
        raise KeyError(f"unknown jaxdali option {name!r}; options: {sorted(OPTIONS)}")
    return _values[name]


def update(name: str, value: Any) -> None:
    """Sets option ``name`` for this process."""
    if name not in OPTIONS:
        raise KeyError(f"unknown jaxdali option {name!r}; options: {sorted(OPTIONS)}")
    _values[name] = value


def runtime_info() -> dict[str, str]:
    """What this process runs with, for bug reports and ``jaxdali info``: a flat ``{name: text}``."""
    import jax

    import jaxdali
    from jaxdali.ops import decoders, resample  # noqa: F401  (resample's import fails without its kernel)

    devices = jax.devices()
    return {
        "jaxdali": jaxdali.__version__,
        "jax": jax.__version__,
        "jax backend": jax.default_backend(),
        "jax devices": f"{len(devices)}: " + ", ".join(str(d) for d in devices[:8]) + (" ..." if len(devices) > 8 else ""),
        "image decoder": f"nvimgcodec {getattr(decoders._nvimgcodec_module(), '__version__', '')}".strip(),
        "resize": "compiled kernel (jaxdali.ops._resample_kernel)",
    }
