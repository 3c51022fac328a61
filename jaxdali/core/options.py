"""Process-wide options, each declared once with its environment variable, default and help text.

The store below the operators; users reach it through ``jaxdali.config`` (``config.get``,
``config.update``). Environment variables are read once, at import.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

__all__ = ["Option", "OPTIONS", "get", "update"]


def _choice(value: str, choices: tuple[str, ...]) -> str:
    value = value.strip().lower()
    if value not in choices:
        raise ValueError(f"{value!r} is not one of {list(choices)}")
    return value


@dataclasses.dataclass(frozen=True)
class Option:
    name: str
    env: str
    default: Any
    parse: Callable[[str], Any]
    help: str


OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("max_image_pixels", "JAXDALI_MAX_IMAGE_PIXELS", 178_956_970, int,
           "Decoders refuse images whose header declares this many pixels (width x height) or more, before "
           "allocating anything, and warn (LargeImageWarning) from half of it. The default is Pillow's "
           "decompression-bomb error threshold (2 x 89,478,485); the decoders' max_image_pixels argument "
           "overrides it per operator."),
    Option("disable_kernel", "JAXDALI_DISABLE_KERNEL", False, lambda v: v.lower() not in ("", "0", "false", "no"),
           "Resize and parse protobuf records with the NumPy paths even where the compiled kernels are built (same "
           "results, slower); CI runs the tests once this way."),
    Option("decoder", "JAXDALI_DECODER", "auto", lambda v: _choice(v, ("auto", "nvimgcodec", "opencv")),
           "Image decoding backend: 'auto' (nvImageCodec where it is installed, else OpenCV), 'nvimgcodec' "
           "or 'opencv' (OpenCV, Pillow where OpenCV cannot decode a file)."),
    Option("gpu_decode", "JAXDALI_GPU_DECODE", "auto", lambda v: _choice(v, ("auto", "off")),
           "device='mixed' image decoders: 'auto' decodes with nvImageCodec's GPU backends (hardware decoder, CUDA, "
           "hybrid, then CPU per image) where the pipeline's JAX device is a CUDA device and nvImageCodec can create a "
           "GPU decoder, else on the host; 'off' always decodes on the host (jaxdali.ops.gpu_decode)."),
    Option("gpu_ops_on_cpu_device", "JAXDALI_GPU_OPS_ON_CPU_DEVICE", "host", lambda v: _choice(v, ("host", "jax")),
           "device='mixed' and device='gpu' operators of a pipeline whose JAX device is a CPU (no GPU here): 'host' "
           "runs them as host operators, with the host's fusions (a decoder decodes only the windows its resize "
           "reads); 'jax' runs the JAX implementations of the dense ones on the CPU device (how the tests check "
           "those on a machine without a GPU). The values are the same; outputs placed on 'gpu' stay device batches."),
    Option("recycle_device_outputs", "JAXDALI_RECYCLE_DEVICE_OUTPUTS", True, lambda v: v.lower() not in ("0", "false", "no"),
           "Framework iterators let the fused device program write large outputs into the memory of earlier "
           "outputs that nothing holds any more (see docs/performance.md). Arrays derived from a batch outside "
           "the iterator (e.g. `.addressable_shards[i].data`) must not outlive the batch while this is on."),
    Option("reader_read_ahead", "JAXDALI_READER_READ_AHEAD", "remote", str.lower,
           "Where readers read their next batches ahead on I/O threads (jaxdali.ops.readers.read_ahead): "
           "'remote' (data behind a URL such as s3://), 'always' or 'never'."),
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
