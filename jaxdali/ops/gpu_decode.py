"""GPU decoding for ``device="mixed"`` image decoders: whether it runs, and the hand-over to JAX.

``decode_status(device_id)`` decides once per JAX device: decode with nvImageCodec's GPU backends
(the hardware JPEG decoder, then CUDA, then hybrid CPU/GPU, then the CPU; nvImageCodec tries them in
that order for each image) only where config ``gpu_decode`` is ``"auto"``, the device is a CUDA
device, nvImageCodec is the decoding backend and it can create a GPU decoder on that device.
Otherwise the decoders keep the host path, and the reason is reported (``config.runtime_info()``).

``to_jax`` hands a decoded image to JAX without a host round trip: images in device memory go
through DLPack, on the stream JAX reads from (``jax.dlpack.from_dlpack`` passes it to the producer,
which orders its decode before it); host images (the CPU backend's fallbacks, NumPy arrays) are
viewed through ``__array_interface__`` and given to JAX by DLPack too, without a copy on a CPU
device and with one host-to-device copy on a GPU.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Sequence

import numpy as np

from jaxdali.core import options

__all__ = ["DeviceDecoder", "decode_status", "gpu_decoder", "has_cuda_device", "local_device", "to_jax"]

#: nvImageCodec backends of the GPU path, in the order each image tries them.
GPU_BACKENDS = ("HW_GPU_ONLY", "GPU_ONLY", "HYBRID_CPU_GPU", "CPU_ONLY")


def has_cuda_device() -> bool:
    """Whether JAX has a local CUDA device (tests that need one skip otherwise)."""
    import jax

    return any(d.platform == "gpu" for d in jax.local_devices())


def local_device(device_id: int | None):
    """The local JAX device a pipeline's ``device_id`` names (the first when unset), or None."""
    import jax

    devices = jax.local_devices()
    index = 0 if device_id is None or device_id < 0 else device_id
    return devices[index] if index < len(devices) else None


def decode_status(device_id: int | None = None) -> tuple[str, str]:
    """Where ``device="mixed"`` decoders decode for a pipeline with ``device_id``: ``("gpu", why)``
    or ``("host", why)``."""
    if options.get("gpu_decode") == "off":
        return "host", "GPU decoding is off (config 'gpu_decode', JAXDALI_GPU_DECODE=off)"
    device = local_device(device_id)
    if device is None:
        return "host", f"device_id={device_id} names no local JAX device"
    from jaxdali.ops import decoders

    if device.platform != "gpu":
        return "host", f"the pipeline's JAX device {device} is not a CUDA device (platform {device.platform!r})"
    backend, why = decoders.backend_status()
    if backend != "nvimgcodec":
        return "host", f"the decoding backend is {backend} ({why}); the GPU path needs nvImageCodec"
    why_not = _gpu_unavailable(device)
    if why_not is not None:
        return "host", why_not
    return "gpu", f"nvImageCodec GPU decoder on {device} (backends {', '.join(GPU_BACKENDS)})"


@functools.cache
def _gpu_unavailable(device) -> str | None:
    """Why nvImageCodec cannot decode on CUDA ``device``, or None when it can (a decoder is created once
    per process to check)."""
    try:
        gpu_decoder(device, "")
    except RuntimeError as e:
        return f"nvImageCodec could not create a GPU decoder on {device}: {e}"
    return None


class _ThreadGpuDecoders(threading.local):
    """Per-thread GPU decoders keyed by (device id, options): a decoder is not shared between threads."""

    def __init__(self):
        self.by_key: dict[tuple[int, str], Any] = {}


_thread_decoders = _ThreadGpuDecoders()


def gpu_decoder(device, codec_options: str):
    """This thread's nvImageCodec decoder on CUDA ``device`` with the GPU backends (raises RuntimeError
    when nvImageCodec cannot create it)."""
    from jaxdali.ops import decoders

    key = (device.local_hardware_id, codec_options)
    decoder = _thread_decoders.by_key.get(key)
    if decoder is None:
        nvi = decoders._nvimgcodec_module()
        backends = [nvi.Backend(getattr(nvi.BackendKind, kind)) for kind in GPU_BACKENDS]
        decoder = nvi.Decoder(device_id=device.local_hardware_id, backends=backends, options=codec_options)
        _thread_decoders.by_key[key] = decoder
    return decoder


def to_jax(image: Any, device):
    """``image`` (an nvImageCodec image, a NumPy array or any object exposing ``__dlpack__`` or
    ``__array_interface__``) as a ``jax.Array`` on ``device``, sharing its memory where the device can.

    Device images go through DLPack on JAX's stream. Host images are viewed without a copy; on a CPU
    device JAX keeps reading that memory when it is 64-byte aligned (XLA:CPU copies other buffers, and a
    strided view is made contiguous first), on a GPU they are copied to the device once.
    """
    import jax

    if _is_device_image(image):
        return jax.dlpack.from_dlpack(image, device=device)
    host = np.asarray(image)
    if not host.flags.c_contiguous:
        host = np.ascontiguousarray(host)
    return jax.dlpack.from_dlpack(host, device=device)


def _is_device_image(image: Any) -> bool:
    """Whether ``image`` lives in device memory, as its DLPack device says (nvImageCodec's host images
    refuse ``__cuda_array_interface__`` with an error rather than lacking it)."""
    where = getattr(image, "__dlpack_device__", None)
    if where is None:
        return False
    kind, _ = where()
    return int(kind) not in (1, 3)  # DLPack kDLCPU, kDLCUDAHost: host memory


class DeviceDecoder:
    """Decodes a batch with the nvImageCodec decoder ``thread_decoder()`` returns (one per thread) and
    hands each image to JAX on ``device``.

    The operators pass ``gpu_decoder``; any nvImageCodec decoder works (the tests run this path with
    the CPU backend and JAX's CPU device).
    """

    def __init__(self, thread_decoder: Callable[[], Any], device):
        self.thread_decoder = thread_decoder
        self.device = device

    def decode(self, streams: Sequence[Any], params) -> list:
        """One ``jax.Array`` (HWC) per code stream, or None where every backend failed on it."""
        images = self.thread_decoder().decode(list(streams), params=params) if streams else []
        out = []
        for image in images:
            if image is None:
                out.append(None)
                continue
            array = to_jax(image, self.device)
            out.append(array if array.ndim == 3 else array.reshape(array.shape[0], array.shape[1], -1))
        return out
