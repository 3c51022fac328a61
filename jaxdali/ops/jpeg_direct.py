"""JPEG decoding with libjpeg-turbo called directly (``_jpeg_kernel.c``), with nvImageCodec's pixels.

nvImageCodec decodes JPEG on the CPU with its libjpeg-turbo extension, which writes each decoded row to
a row buffer, copies it out, and copies the whole image again into the image it returns; each call also
crosses its Python layer (a code stream, a sub-stream for a window, an image object). The kernel makes
the same libjpeg-turbo calls with the same settings and writes each row once, into the array it is
given, without the GIL. For a window it returns a view whose rows keep the decoded row's stride: the
resize kernel reads such rows as they are.

It takes the usual photos: 8-bit baseline or progressive JPEGs with one or three components, decoded
to RGB or BGR. Anything else (CMYK, 12-bit, arithmetic coding), and any image in which libjpeg-turbo
finds corrupt or truncated data, is left to nvImageCodec (``decode`` returns None), so that such images
are reported as they always are.

``kernel_status()`` says whether the kernel is built and enabled (config ``disable_kernel``,
``JAXDALI_DISABLE_KERNEL=1``, turns it off with the other kernels). Before the decoders first use it in
a process they decode a small generated JPEG, whole and a window, both ways (``decoders.jpeg_status``):
a libjpeg-turbo whose pixels differ from nvImageCodec's is not used.
"""

from __future__ import annotations

import pathlib

import numpy as np

from jaxdali.core import options
from jaxdali.ops.kernel_loader import load_kernel

__all__ = ["kernel_status", "jpeg_size", "decode"]

_KERNEL, _KERNEL_REASON = load_kernel("jaxdali.ops._jpeg_kernel", pathlib.Path(__file__).with_name("_jpeg_kernel.c"),
                                      "JPEG decoder")
#: Columns a window's buffer has beyond the window: the kernel aligns the first decoded column to the
#: JPEG's blocks (up to 32 columns to the left) and decodes one more column on the right.
_ALIGN_ROOM = 33


def kernel_status() -> tuple[str, str]:
    """Whether the kernel can decode, ``"compiled kernel"`` or ``"not in use"``, and why (whether it gives
    nvImageCodec's pixels on this machine is ``decoders.jpeg_status``'s question)."""
    if options.get("disable_kernel"):
        return "not in use", "disabled by config 'disable_kernel' (JAXDALI_DISABLE_KERNEL)"
    if _KERNEL is None:
        return "not in use", f"compiled JPEG kernel {_KERNEL_REASON}"
    return "compiled kernel", _KERNEL_REASON


def jpeg_size(data: np.ndarray) -> tuple[int, int, int] | None:
    """(height, width, EXIF orientation) of a JPEG the kernel decodes (from its markers; the orientation
    is ``decoders.exif_orientation``'s, 1 when there is none), or None."""
    return _KERNEL.jpeg_size(data)


def decode(data: np.ndarray, height: int, width: int, window, bgr: bool, fast_idct: bool) -> np.ndarray | None:
    """The (H, W, 3) uint8 RGB (BGR) pixels of the encoded JPEG ``data`` (1-D uint8, C-contiguous) of
    ``height`` x ``width`` (``jpeg_size``), or of its ``window`` (y, x, h, w) of the stored image; None where
    nvImageCodec is to decode it instead (corrupt data, a kind of JPEG the kernel leaves to it). A
    window's rows are strided (each row is contiguous)."""
    if window is None:
        out = np.empty((height, width, 3), np.uint8)
        return out if _KERNEL.decode(data, out, 0, 0, height, width, False, bgr, fast_idct) >= 0 else None
    y, x, h, w = window
    out = np.empty((h, w + _ALIGN_ROOM, 3), np.uint8)
    first = _KERNEL.decode(data, out, y, x, h, w, True, bgr, fast_idct)
    return out[:, first:first + w] if first >= 0 else None
