"""Process-wide options, each declared once with its environment variable, default and help text.

Read an option with ``config.get("max_image_pixels")``; change it with
``config.update("max_image_pixels", 10_000_000)``. Environment variables are read once, at import.
The options live in ``jaxdali.core.options`` (below the operators, which read them); this module adds
``runtime_info``, which asks the operators which paths they run.
"""

from __future__ import annotations

from jaxdali.core.options import OPTIONS, Option, get, update

__all__ = ["Option", "OPTIONS", "get", "update", "runtime_info"]


def runtime_info() -> dict[str, str]:
    """What this installation runs: jaxdali's version, the resize, normalisation, protobuf-parsing, FITS Rice, decode and
    JPEG decode paths (and why; ``mixed_decode``: where ``device="mixed"`` decoders decode for device 0, ``gpu`` or
    ``host``), nvImageCodec's version, JAX's backend and devices. A flat ``str -> str`` dict (``python -m jaxdali info``
    prints it)."""
    import importlib.metadata

    import jax

    import jaxdali
    from jaxdali.ops import decoders, gpu_decode, image_kernels, resample
    from jaxdali.ops.readers import fits_tiles, protowire

    path, reason = resample.kernel_status()
    parser, parser_reason = protowire.parser_status()
    rice, rice_reason = fits_tiles.decoder_status()
    normalize, normalize_reason = image_kernels.normalize_kernel_status()
    backend, why = decoders.backend_status()
    jpeg, jpeg_reason = decoders.jpeg_status()
    decode_place, decode_place_reason = gpu_decode.decode_status(None)
    try:
        nvimgcodec = importlib.metadata.version("nvidia-nvimgcodec-cu12")
    except importlib.metadata.PackageNotFoundError:
        nvimgcodec = "absent"
    devices = jax.devices()
    return {
        "jaxdali": jaxdali.__version__,
        "resize": path,
        "resize_reason": reason,
        "protobuf_parser": parser,
        "protobuf_parser_reason": parser_reason,
        "rice_decoder": rice,
        "rice_decoder_reason": rice_reason,
        "normalize": normalize,
        "normalize_reason": normalize_reason,
        "decoder": backend,
        "decoder_reason": why,
        "jpeg_decoder": jpeg,
        "jpeg_decoder_reason": jpeg_reason,
        "mixed_decode": decode_place,
        "mixed_decode_reason": decode_place_reason,
        "nvimgcodec": nvimgcodec,
        "jax": jax.__version__,
        "jax_backend": jax.default_backend(),
        "jax_devices": f"{len(devices)} x {devices[0].device_kind}" if devices else "none",
    }
