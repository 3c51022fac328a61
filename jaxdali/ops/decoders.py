"""``fn.decoders.image`` and ``fn.decoders.image_random_crop`` (plus the legacy ``fn.image_decoder*``).

Images are decoded on the host through nvImageCodec's CPU backend, one decoder per worker thread,
with the batch split into chunks by ``ctx.parallel_for``; the decode calls run outside the GIL.
``device="mixed"`` decodes the same way and hands the result to the pipeline's JAX device, or, where
``gpu_decode.decode_status`` allows (a CUDA device), decodes with nvImageCodec's GPU backends straight
into device memory (``ImageDecoder._decode_on_device``; docs/decoding.md, "GPU decoding").

Which library decodes what (``FORMAT_DECODERS``; the same table is in docs/decoding.md):

==================  ==============================================================================
format              decoder
==================  ==============================================================================
JPEG                libjpeg-turbo, called directly (``jpeg_direct``) or through nvImageCodec's
                    libjpeg-turbo extension: the same calls, the same pixels
JPEG 2000           nvImageCodec, OpenCV-based extension (OpenJPEG)
PNG                 nvImageCodec, OpenCV-based extension (libpng)
PNM (PBM/PGM/PPM)   nvImageCodec, OpenCV-based extension
WebP                nvImageCodec, OpenCV-based extension (libwebp)
WebP, rejected      ``cv2.imdecode`` (OpenCV) -- nvImageCodec 0.9's WebP parser rejects some valid
by nvImageCodec     extended (VP8X) files, e.g. with an EXIF chunk; ``decode_path()`` says which ran
TIFF                nvImageCodec, libtiff extension
BMP                 nvImageCodec, nvbmp extension
==================  ==============================================================================

EXIF orientation (``adjust_orientation=True``) is read from the file header by this module (JPEG
APP1, PNG eXIf, TIFF IFD0, WebP EXIF chunk) and applied after decoding. Crop windows are drawn in
the oriented image and mapped back into stored coordinates, so only the window is decoded and the
decoder never sees a window that is out of bounds.

Importing nvImageCodec prints warnings about the optional CUDA libraries (nvJPEG, nvJPEG2000,
nvTIFF) that a CPU-only host does not have. They are captured while this module imports the
library and logged at debug level on the ``jaxdali.decoders`` logger; anything else printed then is
passed through to stderr.

Where nvImageCodec is not installed (macOS has no wheel), or config ``decoder`` is ``"opencv"``
(``JAXDALI_DECODER=opencv``), ``jaxdali.ops.decoders_opencv`` decodes instead (OpenCV, Pillow where
OpenCV cannot); ``backend_status()`` says which backend runs and why.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import struct
import sys
import tempfile
import threading
import warnings
from typing import Any

import numpy as np

from jaxdali.core import options
from jaxdali.ops import decoders_opencv, gpu_decode, jpeg_direct, rng
from jaxdali.ops.codec_output import CODEC_OUTPUT
from jaxdali.ops.crop_window import check_ranges, crop_window_draws, random_crop_windows
from jaxdali.ops.error_policy import ERROR_POLICY_ARG, SkipLog, replace_failed
from jaxdali.ops.operator import Operator
from jaxdali.ops.sample_source import SampleSource
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU, TensorListGPU
from jaxdali.types import DALIDataType, DALIImageType, to_numpy_type

__all__ = ["CorruptImageWarning", "FORMAT_DECODERS", "ImageDecodeError", "LargeImageWarning", "IMAGE", "IMAGE_RANDOM_CROP",
           "IMAGE_DECODER", "IMAGE_DECODER_RANDOM_CROP", "backend_status", "decode_image", "decode_path",
           "exif_orientation", "jpeg_status"]

_log = logging.getLogger("jaxdali.decoders")

#: Format -> library that decodes it on the host. ``decode_path(data)`` returns the entry used.
FORMAT_DECODERS: dict[str, str] = {
    "jpeg": "libjpeg-turbo, called directly (jaxdali.ops.jpeg_direct) or by nvImageCodec's libjpeg-turbo extension",
    "jpeg2k": "nvImageCodec (OpenCV-based extension, OpenJPEG)",
    "png": "nvImageCodec (OpenCV-based extension, libpng)",
    "pnm": "nvImageCodec (OpenCV-based extension)",
    "webp": "nvImageCodec (OpenCV-based extension, libwebp)",
    "webp-opencv": "OpenCV cv2.imdecode (WebP files nvImageCodec 0.9's parser rejects, e.g. VP8X with EXIF)",
    "tiff": "nvImageCodec (libtiff extension)",
    "bmp": "nvImageCodec (nvbmp extension)",
    **decoders_opencv.FORMAT_DECODERS,
}

#: Output element types the decoders produce (as DALI: others are refused).
_SUPPORTED_DTYPES = (DALIDataType.UINT8, DALIDataType.INT8, DALIDataType.UINT16, DALIDataType.INT16,
                     DALIDataType.UINT32, DALIDataType.INT32, DALIDataType.FLOAT)

# -- nvImageCodec: quiet import and one decoder per worker thread ------------------------------------

_import_lock = threading.Lock()
_nvimgcodec: Any = None
# Lines nvImageCodec prints when optional CUDA libraries are absent (expected on CPU-only hosts).
_EXPECTED_NOISE = re.compile(r"nvjpeg|nvjpeg2k|nvtiff|nvjpeg2000|nvImageCodec's Python distribution", re.I)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _nvimgcodec_module():
    """``nvidia.nvimgcodec``, imported once with its missing-CUDA-library warnings captured."""
    global _nvimgcodec
    if _nvimgcodec is not None:
        return _nvimgcodec
    with _import_lock:
        if _nvimgcodec is not None:
            return _nvimgcodec
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                import nvidia.nvimgcodec as module
            except ImportError as e:
                module, error = None, e
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            captured.seek(0)
            text = _ANSI.sub("", captured.read().decode("utf-8", "replace"))
        for line in text.splitlines():
            if not line.strip():
                continue
            if _EXPECTED_NOISE.search(line):
                _log.debug("nvImageCodec: %s", line)
            else:
                print(line, file=sys.stderr)
        if module is None:
            raise ImportError("jaxdali's image decoders need nvImageCodec: pip install nvidia-nvimgcodec-cu12") \
                from error
        _nvimgcodec = module
        return module


@functools.cache
def _nvimgcodec_missing() -> str | None:
    """Why nvImageCodec cannot be imported, or None when it can (tried once per process)."""
    try:
        _nvimgcodec_module()
    except ImportError as e:
        return str(e.__cause__ or e)
    return None


def backend_status() -> tuple[str, str]:
    """The image decoding backend in use, ``"nvimgcodec"`` or ``"opencv"``, and why (config ``decoder``)."""
    choice = options.get("decoder")
    if choice == "opencv":
        return "opencv", "chosen by config 'decoder' (JAXDALI_DECODER=opencv)"
    missing = _nvimgcodec_missing()
    if missing is None:
        return "nvimgcodec", "nvImageCodec is installed" + (" (chosen by config 'decoder')" if choice != "auto" else "")
    if choice == "nvimgcodec":
        raise ImportError(f"config 'decoder' is 'nvimgcodec' but nvImageCodec cannot be imported ({missing}): "
                          "pip install nvidia-nvimgcodec-cu12, or use JAXDALI_DECODER=opencv")
    return "opencv", f"nvImageCodec is not installed ({missing})"


class _ThreadDecoders(threading.local):
    """Per-thread nvImageCodec decoders, keyed by their option string.

    One ``Decoder`` used by two threads at once fails inside nvImageCodec, so each worker thread
    owns its own. They hold no results, only codec state, and live as long as their thread.
    """

    def __init__(self):
        self.by_options: dict[str, Any] = {}


_thread_decoders = _ThreadDecoders()


def _decoder(options: str):
    decoder = _thread_decoders.by_options.get(options)
    if decoder is None:
        nvi = _nvimgcodec_module()
        # max_num_cpu_threads=1: we parallelise across samples ourselves; the default would start a
        # pool of (cores - 1) threads per worker thread.
        decoder = nvi.Decoder(device_id=nvi.NVIMGCODEC_DEVICE_CPU_ONLY, max_num_cpu_threads=1,
                              backends=[nvi.Backend(nvi.BackendKind.CPU_ONLY)], options=options)
        _thread_decoders.by_options[options] = decoder
    return decoder


# -- headers: format, size, EXIF orientation -------------------------------------------------------

def _tiff_orientation(buf: memoryview, base: int) -> int:
    """Orientation tag (0x0112) of the first IFD of the TIFF structure at ``base``; 1 when absent."""
    order = bytes(buf[base:base + 2])
    if order == b"II":
        e = "<"
    elif order == b"MM":
        e = ">"
    else:
        return 1
    try:
        if struct.unpack_from(e + "H", buf, base + 2)[0] != 42:
            return 1
        ifd = base + struct.unpack_from(e + "I", buf, base + 4)[0]
        count = struct.unpack_from(e + "H", buf, ifd)[0]
        for k in range(min(count, 512)):
            tag, kind = struct.unpack_from(e + "HH", buf, ifd + 2 + 12 * k)
            if tag == 0x0112:
                value = struct.unpack_from(e + ("I" if kind == 4 else "H"), buf, ifd + 2 + 12 * k + 8)[0]
                return value if 1 <= value <= 8 else 1
    except struct.error:
        return 1
    return 1


def _jpeg_orientation(buf: memoryview) -> int:
    pos, n = 2, len(buf)
    try:
        while pos + 4 <= n:
            if buf[pos] != 0xFF:
                return 1
            marker = buf[pos + 1]
            if marker == 0xFF:  # fill byte
                pos += 1
                continue
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                pos += 2
                continue
            if marker in (0xDA, 0xD9):  # start of scan / end of image: no more headers
                return 1
            length = struct.unpack_from(">H", buf, pos + 2)[0]
            if marker == 0xE1 and bytes(buf[pos + 4:pos + 10]) == b"Exif\x00\x00":
                return _tiff_orientation(buf, pos + 10)
            pos += 2 + length
    except struct.error:
        return 1
    return 1


def _png_orientation(buf: memoryview) -> int:
    pos, n = 8, len(buf)
    try:
        while pos + 8 <= n:
            length, kind = struct.unpack_from(">I4s", buf, pos)
            if kind == b"eXIf":
                return _tiff_orientation(buf, pos + 8)
            if kind in (b"IDAT", b"IEND"):
                return 1
            pos += 12 + length
    except struct.error:
        return 1
    return 1


def _webp_chunks(buf: memoryview):
    pos, n = 12, len(buf)
    while pos + 8 <= n:
        kind, size = struct.unpack_from("<4sI", buf, pos)
        yield kind, pos + 8, size
        pos += 8 + size + (size & 1)


def _webp_orientation(buf: memoryview) -> int:
    for kind, start, _ in _webp_chunks(buf):
        if kind == b"EXIF":
            if bytes(buf[start:start + 6]) == b"Exif\x00\x00":
                start += 6
            return _tiff_orientation(buf, start)
    return 1


def _sniff(buf: memoryview) -> str:
    head = bytes(buf[:16])
    if head.startswith(b"\xff\xd8"):
        return "jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "tiff"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    return "other"


def exif_orientation(data) -> int:
    """The EXIF orientation (1-8) stored in an encoded image's header; 1 when there is none.

    Reads JPEG APP1, PNG eXIf, TIFF IFD0 and WebP EXIF chunks; other formats carry no orientation.
    """
    buf = memoryview(np.ascontiguousarray(data, dtype=np.uint8).reshape(-1))
    kind = _sniff(buf)
    if kind == "jpeg":
        return _jpeg_orientation(buf)
    if kind == "png":
        return _png_orientation(buf)
    if kind == "tiff":
        return _tiff_orientation(buf, 0)
    if kind == "webp":
        return _webp_orientation(buf)
    return 1


def _webp_size(buf: memoryview) -> tuple[int, int] | None:
    """(height, width) from a WebP header (VP8X canvas, VP8 key frame or VP8L), or None."""
    try:
        for kind, start, _ in _webp_chunks(buf):
            if kind == b"VP8X":
                w = 1 + int.from_bytes(bytes(buf[start + 4:start + 7]), "little")
                h = 1 + int.from_bytes(bytes(buf[start + 7:start + 10]), "little")
                return h, w
            if kind == b"VP8 ":
                w, h = struct.unpack_from("<HH", buf, start + 6)
                return h & 0x3FFF, w & 0x3FFF
            if kind == b"VP8L":
                bits = struct.unpack_from("<I", buf, start + 1)[0]
                return ((bits >> 14) & 0x3FFF) + 1, (bits & 0x3FFF) + 1
    except struct.error:
        return None
    return None


def _webp_rejected_by_nvimgcodec(buf: memoryview) -> bool:
    """Extended WebP with an EXIF chunk and a lossless (VP8L) bitstream: nvImageCodec 0.9's parser
    fails on these ("Unexpected end of stream"), so they go to OpenCV without the failed attempt and
    its log line. Other WebP files that nvImageCodec rejects still fall back after the attempt."""
    try:
        chunks = {kind: start for kind, start, _ in _webp_chunks(buf)}
        return b"VP8X" in chunks and bool(buf[chunks[b"VP8X"]] & 0x08) and b"VP8L" in chunks
    except struct.error:
        return False


@dataclasses.dataclass
class _Header:
    """What the decoders learn from an encoded image before decoding it."""

    path: str  # key of FORMAT_DECODERS
    height: int  # stored (unrotated) size
    width: int
    orientation: int
    stream: Any = None  # nvImageCodec CodeStream (None on the OpenCV path and the direct JPEG path)
    direct: bool = False  # a JPEG that jpeg_direct decodes (nvImageCodec where it declines)


class ImageDecodeError(RuntimeError):
    """An encoded image could not be decoded (corrupt, truncated, empty or unsupported)."""


def _describe(op: str, index: int, source: str | None) -> str:
    where = f"sample {index}" + (f" ({source!r})" if source else "")
    return f"fn.{op}: {where}"


class LargeImageWarning(UserWarning):
    """An image's header declares at least half of ``max_image_pixels`` pixels (it is decoded; at the
    limit it would be refused). Pillow's DecompressionBombWarning plays the same role."""


class CorruptImageWarning(UserWarning):
    """The codec reported corrupt data in an image it still decoded (e.g. libjpeg's "Corrupt JPEG data:
    1 extraneous bytes before marker 0xd9"); ``strict_decoding=True`` makes it an ImageDecodeError."""


def _nvimgcodec_header(data: np.ndarray, kind: str, op: str, index: int, source: str | None) -> _Header:
    """The header as nvImageCodec reads it (its code stream attached)."""
    buf = memoryview(data)
    try:
        stream = _nvimgcodec_module().CodeStream(data)
        return _Header(stream.codec_name, int(stream.height), int(stream.width), 1, stream)
    except RuntimeError as e:
        size = _webp_size(buf) if kind == "webp" else None
        if size is None:
            raise ImageDecodeError(
                f"{_describe(op, index, source)}: not a decodable image ({len(buf)} bytes, starting "
                f"{bytes(buf[:8])!r}); nvImageCodec: {e}. Supported: JPEG, JPEG 2000, PNG, PNM, WebP, TIFF, "
                "BMP") from None
        return _Header("webp-opencv", size[0], size[1], 1)


def _read_header(data: np.ndarray, op: str, index: int, source: str | None, adjust: bool, limit: int,
                 direct: bool = False) -> _Header:
    """The image's format, size and orientation; refuses sizes of ``limit`` pixels or more before any
    allocation. ``direct``: a JPEG that ``jpeg_direct`` decodes gets a header for it (no code stream)."""
    buf = memoryview(data)
    if len(buf) == 0:
        raise ImageDecodeError(f"{_describe(op, index, source)}: empty (0 bytes); expected an encoded image")
    fallback = backend_status()[0] == "opencv"
    kind = _sniff(buf)
    size = _webp_size(buf) if kind == "webp" and (fallback or _webp_rejected_by_nvimgcodec(buf)) else None
    found = decoders_opencv.stored_size(buf) if fallback and size is None else None
    if size is not None:
        header = _Header("webp-opencv", size[0], size[1], 1)
    elif found is not None:
        header = _Header(found[0] + "-opencv", found[1], found[2], 1)
    elif fallback:
        raise ImageDecodeError(
            f"{_describe(op, index, source)}: not a decodable image ({len(buf)} bytes, starting {bytes(buf[:8])!r}); "
            "no JPEG, JPEG 2000, PNG, PNM, WebP, TIFF or BMP header")
    elif direct and kind == "jpeg" and (size := jpeg_direct.jpeg_size(data)) is not None:
        header = _Header("jpeg", size[0], size[1], size[2] if adjust else 1, direct=True)
    else:
        header = _nvimgcodec_header(data, kind, op, index, source)
    if header.path == "webp-opencv":
        _log.debug("%s: WebP that nvImageCodec rejects; decoding with OpenCV", _describe(op, index, source))
    if header.path not in FORMAT_DECODERS:
        raise ImageDecodeError(f"{_describe(op, index, source)}: unsupported image format {header.path!r}")
    pixels = header.height * header.width
    if pixels >= limit:
        raise ImageDecodeError(
            f"{_describe(op, index, source)}: the image header declares {header.width} x {header.height} = "
            f"{pixels} pixels, at or above the limit max_image_pixels={limit} (a decompression bomb or a corrupt "
            "header); if the file is trusted, raise the limit with the decoder argument max_image_pixels, "
            "jaxdali.config.update('max_image_pixels', n) or JAXDALI_MAX_IMAGE_PIXELS")
    if 2 * pixels >= limit:
        warnings.warn(f"{_describe(op, index, source)}: the image header declares {header.width} x {header.height} "
                      f"= {pixels} pixels, at least half of max_image_pixels={limit}", LargeImageWarning)
    if header.height < 1 or header.width < 1:
        raise ImageDecodeError(f"{_describe(op, index, source)}: the header declares an empty image "
                               f"({header.width} x {header.height})")
    if adjust and not header.direct:  # a direct header has its orientation from the kernel's marker scan
        header.orientation = exif_orientation(data)
    return header


def decode_path(data) -> str:
    """Which ``FORMAT_DECODERS`` entry decodes this encoded image (e.g. ``"jpeg"``, ``"webp-opencv"``).

    ``data`` is the file's content: ``bytes`` (``open(path, "rb").read()``) or a uint8 array.
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = np.frombuffer(data, np.uint8)
    arr = np.ascontiguousarray(np.asarray(data, dtype=np.uint8).reshape(-1))
    return _read_header(arr, "decoders.image", 0, None, False, options.get("max_image_pixels")).path


_IMAGE_TYPE_CHANNELS = {DALIImageType.GRAY: 1, DALIImageType.RGB: 3, DALIImageType.BGR: 3, DALIImageType.YCbCr: 3}


def decoded_shape(sample, image_type: DALIImageType, op: str, index: int, source: str | None,
                  adjust_orientation: bool = True) -> tuple[int, int, int]:
    """(height, width, channels) that decoding ``sample`` to ``image_type`` gives, from the header only
    (``ANY_DATA`` on the OpenCV backend decodes the image to count its channels)."""
    data = _encoded(sample, op, index, source)
    header = _read_header(data, op, index, source, adjust_orientation, options.get("max_image_pixels"))
    h, w = _oriented_size(header.height, header.width, header.orientation)
    if image_type in _IMAGE_TYPE_CHANNELS:
        return h, w, _IMAGE_TYPE_CHANNELS[image_type]
    if header.stream is not None:
        return h, w, int(header.stream.num_channels)
    return h, w, int(np.atleast_3d(decode_image(data, DALIImageType.ANY_DATA, source)).shape[2])


# -- orientation ------------------------------------------------------------------------------------
# An EXIF orientation as operations on the stored image S: flip rows?, flip columns?, then transpose?
_ORIENT = {1: (False, False, False), 2: (False, True, False), 3: (True, True, False), 4: (True, False, False),
           5: (False, False, True), 6: (True, False, True), 7: (True, True, True), 8: (False, True, True)}


def _oriented_size(h: int, w: int, orientation: int) -> tuple[int, int]:
    return (w, h) if _ORIENT[orientation][2] else (h, w)


def _to_stored_window(window, h: int, w: int, orientation: int):
    """Maps a window (y, x, wh, ww) of the oriented image to the stored image of size h x w."""
    y, x, wh, ww = window
    flip_rows, flip_cols, transpose = _ORIENT[orientation]
    if transpose:
        y, x, wh, ww = x, y, ww, wh
    if flip_rows:
        y = h - y - wh
    if flip_cols:
        x = w - x - ww
    return y, x, wh, ww


def _orient(img: np.ndarray, orientation: int) -> np.ndarray:
    flip_rows, flip_cols, transpose = _ORIENT[orientation]
    if flip_rows:
        img = img[::-1]
    if flip_cols:
        img = img[:, ::-1]
    if transpose:
        img = img.swapaxes(0, 1)
    return img


# -- decoding one image ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _DecodeSpec:
    """Output settings shared by all samples of one operator."""

    output_type: DALIImageType
    dtype: np.dtype
    fast_idct: bool

    @property
    def options(self) -> str:
        return ":fast_idct=1" if self.fast_idct else ""

    @property
    def direct(self) -> bool:
        """Whether JPEGs are decoded by ``jpeg_direct`` (RGB or BGR pixels; YCbCr is computed from RGB)."""
        return self.output_type in _DIRECT_TYPES and jpeg_status()[0] == "direct libjpeg-turbo"


_DIRECT_TYPES = (DALIImageType.RGB, DALIImageType.BGR, DALIImageType.YCbCr)


@functools.cache
def _direct_pixels_differ() -> str | None:
    """Why ``jpeg_direct``'s pixels differ from nvImageCodec's on a generated 4:2:0 JPEG (whole and a
    window), or None (checked once per process)."""
    import cv2

    y, x = np.mgrid[0:61, 0:83]
    image = np.stack([(y * 4 + x) % 256, (x * 3) % 256, (y * x) % 256], axis=-1).astype(np.uint8)
    data = np.ascontiguousarray(cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].reshape(-1))
    spec = _DecodeSpec(DALIImageType.RGB, np.dtype(np.uint8), False)
    height, width = image.shape[:2]
    header = _Header("jpeg", height, width, 1, _nvimgcodec_module().CodeStream(data))
    for window in (None, (3, 21, 40, 37)):
        expected = _decode_nvimgcodec(header, spec, _params(spec), window)
        got = jpeg_direct.decode(data, height, width, window, False, False)
        if got is None or expected is None or not np.array_equal(got, expected):
            return (f"its pixels differ from nvImageCodec's (window {window}): this libjpeg-turbo is not the one "
                    "nvImageCodec decodes with")
    return None


def jpeg_status() -> tuple[str, str]:
    """Which path decodes JPEGs on the host, ``"direct libjpeg-turbo"`` (``jpeg_direct``) or ``"nvimgcodec"``
    (or ``"opencv"``: ``backend_status``), and why."""
    backend, why = backend_status()
    if backend != "nvimgcodec":
        return backend, why
    kernel, why = jpeg_direct.kernel_status()
    if kernel != "compiled kernel":
        return "nvimgcodec", why
    differs = _direct_pixels_differ()
    if differs is not None:
        return "nvimgcodec", f"compiled JPEG kernel not used: {differs}"
    return "direct libjpeg-turbo", why


def _params(spec: _DecodeSpec):
    if backend_status()[0] == "opencv":
        return None
    nvi = _nvimgcodec_module()
    t = spec.output_type
    if t == DALIImageType.GRAY:
        color, fmt = nvi.ColorSpec.GRAY, nvi.SampleFormat.I_Y
    elif t == DALIImageType.BGR:
        color, fmt = nvi.ColorSpec.SRGB, nvi.SampleFormat.I_BGR
    elif t == DALIImageType.ANY_DATA:
        color, fmt = nvi.ColorSpec.UNCHANGED, nvi.SampleFormat.I_UNCHANGED
    else:  # RGB, and YCbCr which is computed from RGB
        color, fmt = nvi.ColorSpec.SRGB, nvi.SampleFormat.I_RGB
    # Native depth always: the conversion to ``dtype`` (8-bit included) is ours, rounded as DALI's.
    return nvi.DecodeParams(apply_exif_orientation=False, color_spec=color, sample_format=fmt,
                            allow_any_depth=True)


def _device_params(spec: _DecodeSpec):
    """``_params`` for the GPU path: 8-bit output, converted by nvImageCodec (only uint8 is decoded there)."""
    nvi = _nvimgcodec_module()
    params = _params(spec)
    return nvi.DecodeParams(apply_exif_orientation=False, color_spec=params.color_spec,
                            sample_format=params.sample_format, allow_any_depth=False)


def _decode_nvimgcodec(header: _Header, spec: _DecodeSpec, params, window) -> np.ndarray | None:
    nvi = _nvimgcodec_module()
    stream = header.stream
    if window is not None:
        y, x, h, w = window
        stream = stream.get_sub_code_stream(region=nvi.Region(y, x, y + h, x + w))
    image = _decoder(spec.options).decode(stream, params=params)
    if image is None:
        return None
    out = np.asarray(image.cpu())
    return out if out.ndim == 3 else out.reshape(out.shape[0], out.shape[1], -1)


# BT.601 "studio swing" RGB -> YCbCr for values on the 8-bit scale (Y in [16, 235], Cb and Cr in
# [16, 240]); the last column is the offset. Same definition as DALI's YCbCr output.
_YCBCR = (np.array([[65.481, 128.553, 24.966, 16.0 * 255],
                    [-37.797, -74.203, 112.0, 128.0 * 255],
                    [112.0, -93.786, -18.214, 128.0 * 255]]) / 255.0).astype(np.float32)


def _range_max(dtype: np.dtype) -> float:
    return 1.0 if dtype.kind == "f" else float(np.iinfo(dtype).max)


def _from_unit(values: np.ndarray, target: np.dtype) -> np.ndarray:
    """float32 values in [0, 1] -> ``target``, scaled to its dynamic range (float stays [0, 1])."""
    if target.kind == "f":
        return values.astype(target, copy=False)
    top = np.iinfo(target).max
    scaled = np.rint(values * np.float32(top))
    return np.clip(scaled, 0, top, dtype=np.float64 if top > 2 ** 24 else np.float32).astype(target)


def _convert(img: np.ndarray, spec: _DecodeSpec, compact: bool = True) -> np.ndarray:
    """Colour (YCbCr) and element-type conversion; values are rescaled to the type's dynamic range.
    ``compact=False``: an image that needs no conversion may keep strided rows (each row contiguous).

    Computed in float32 as value * (1 / source max) * target max, rounded to nearest: for 8-bit
    sources this gives DALI's values exactly (checked for every supported type).
    """
    target = spec.dtype
    if img.dtype == target and spec.output_type != DALIImageType.YCbCr:  # the usual uint8 -> uint8
        if not compact and img.strides[0] > 0 and img.strides[1:] == (img.shape[2] * img.itemsize, img.itemsize):
            return img
        return np.ascontiguousarray(img)
    import cv2

    src_max = _range_max(img.dtype)
    if spec.output_type == DALIImageType.YCbCr:
        if img.shape[2] == 1:
            img = np.repeat(img, 3, axis=2)
        rgb8 = img.astype(np.float32)
        if src_max != 255.0:
            rgb8 *= np.float32(255.0 / src_max)
        ycc8 = cv2.transform(rgb8, _YCBCR)
        if target == np.uint8:
            return np.clip(np.rint(ycc8), 0, 255).astype(np.uint8)
        return _from_unit(ycc8 * np.float32(1 / 255.0), target)
    if img.dtype == target:
        return np.ascontiguousarray(img)
    return _from_unit(img.astype(np.float32) * np.float32(1 / src_max), target)


def _decode_one(data: np.ndarray, header: _Header, spec: _DecodeSpec, params, window, op: str, index: int,
                source: str | None, compact: bool = True) -> np.ndarray:
    """Decodes one image (or the oriented-image ``window`` of it) and converts it to the output type
    (``compact=False``: its rows may be strided)."""
    stored_window = None
    if window is not None:
        stored_window = _to_stored_window(window, header.height, header.width, header.orientation)
    img = None
    if header.direct:
        img = jpeg_direct.decode(data, header.height, header.width, stored_window,
                                 spec.output_type == DALIImageType.BGR, spec.fast_idct)
        if img is None:  # corrupt data, or a JPEG the kernel leaves to nvImageCodec: it reports it as always
            header = dataclasses.replace(header, direct=False,
                                         stream=_nvimgcodec_header(data, "jpeg", op, index, source).stream)
    if img is None and header.stream is None:
        img = decoders_opencv.decode(data, header.path.split("-")[0], spec.output_type, stored_window)
    elif img is None:
        img = _decode_nvimgcodec(header, spec, params, stored_window)
    if img is None:
        what = FORMAT_DECODERS[header.path]
        hint = ("; this image has no output_type=ANY_DATA decoding here, use RGB, BGR or GRAY"
                if spec.output_type == DALIImageType.ANY_DATA else "")
        raise ImageDecodeError(
            f"{_describe(op, index, source)}: {what} could not decode this {header.width} x {header.height} "
            f"{header.path} image (corrupt or truncated data, or an unsupported variant){hint}")
    img = _orient(img, header.orientation)
    return _convert(img, spec, compact)


def decode_image(data, output_type: DALIImageType = DALIImageType.RGB, source: str | None = None) -> np.ndarray:
    """Decodes one encoded image on the host as ``fn.decoders.image`` does (EXIF orientation applied,
    uint8 HWC). ``data``: the file's bytes or a uint8 array; ``source`` names it in errors.

    Raises ImageDecodeError saying why (an image of ``max_image_pixels`` or more is refused before decoding).
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = np.frombuffer(data, np.uint8)
    arr = _encoded(data, "decoders.image", 0, source)
    spec = _DecodeSpec(DALIImageType(output_type), np.dtype(np.uint8), False)
    header = _read_header(arr, "decoders.image", 0, source, True, options.get("max_image_pixels"), spec.direct)
    return _decode_one(arr, header, spec, _params(spec), None, "decoders.image", 0, source)


# -- operators --------------------------------------------------------------------------------------

def _encoded(sample, op: str, index: int, source: str | None) -> np.ndarray:
    arr = np.asarray(sample)
    if arr.dtype != np.uint8:
        raise TypeError(f"{_describe(op, index, source)}: the input must hold encoded bytes (uint8), "
                        f"got dtype {arr.dtype}")
    return np.ascontiguousarray(arr.reshape(-1))


# Codec lines that mean the output would be partly blank (entropy data cut short): always an error.
_TRUNCATED = re.compile(r"premature end of data segment|premature end of jpeg data", re.I)
# Codec lines that report damaged data in an image that still decodes: a warning, or an error with
# strict_decoding=True.
_CORRUPT = re.compile(r"corrupt|premature end|bad huffman|bad arithmetic|extraneous bytes|crc|truncat|"
                      r"invalid|incomplete|error|improper call", re.I)


def _captured(call, where: str, strict: bool):
    """``call()`` with the codecs' output captured (``codec_output``): their messages about this sample
    become an ImageDecodeError (failures, truncated data; any corrupt data when ``strict``) or a
    CorruptImageWarning, and never reach the terminal."""
    result = None
    for alone in (False, True):
        error = None
        with CODEC_OUTPUT.window(alone) as seen:
            try:
                result = call()
            except ImageDecodeError as e:
                error = e
        if not (seen.lines and seen.shared):
            break  # the lines (if any) are this sample's: no other decode ran meanwhile
    said = "; ".join(dict.fromkeys(seen.lines))
    if error is not None:
        if said:
            raise ImageDecodeError(f"{error}; the codec reported: {said}") from None
        raise error
    truncated = [line for line in seen.lines if _TRUNCATED.search(line)]
    corrupt = [line for line in seen.lines if _CORRUPT.search(line)]
    if truncated or (strict and corrupt):
        why = ("its data ends early (truncated or corrupt): the decoded image would be partly blank"
               if truncated else "the codec reports corrupt data and strict_decoding=True")
        raise ImageDecodeError(f"{where}: {why}; the codec reported: {said}")
    if corrupt:
        warnings.warn(f"{where}: the codec reports corrupt data, decoded anyway (strict_decoding=True refuses such "
                      f"images): {said}", CorruptImageWarning)
    elif seen.lines:
        _log.debug("%s: codec messages: %s", where, said)
    return result


class _BatchDecode:
    """One batch of ``ImageDecoder``: its encoded samples, headers, windows and decoded images.

    Clean images are decoded a chunk at a time inside one codec-capture window; if the codecs printed
    anything there, or an image failed, the chunk is decoded again sample by sample, each in its own
    window, which tells whose the messages are and warns or raises (clean images print nothing, so
    nothing runs twice).
    """

    def __init__(self, decoder: "ImageDecoder", ctx, inputs: list, args):
        self.decoder = decoder
        batch = inputs[0]
        #: The operator's inputs and arguments of this batch (the windows of ``crops`` operators use them).
        self.inputs, self.args = inputs, args
        self.samples = batch.samples()
        self.n = n = len(self.samples)
        sources = batch.source_info or []
        self.names = [sources[i] if i < len(sources) else None for i in range(n)]
        self.keys = ctx.sample_keys(decoder.seed) if decoder.crops else None
        self.params = _params(decoder.spec)
        #: Whether decoded images must be C-contiguous (else their rows may be strided: a sample source's
        #: reader reads them as they are).
        self.compact = True
        self.out: list = [None] * n
        self.failures: dict[int, ImageDecodeError] = {}
        self.datas: dict[int, np.ndarray] = {}
        self.headers: dict[int, _Header] = {}
        self.windows: dict[int, Any] = {}

    def failed(self, i: int, error: ImageDecodeError) -> None:
        if not self.decoder.replace:
            raise error
        self.failures[i] = error

    def prepare_chunk(self, start: int, stop: int, captured: bool = True) -> list[int]:
        """Reads the chunk's headers and draws its windows; returns the rows left to decode. With
        ``captured=False`` the caller captures the codecs' output and handles ImageDecodeError."""
        d, names = self.decoder, self.names
        for i in range(start, stop):
            self.datas[i] = data = _encoded(self.samples[i], d.op, i, names[i])
            if not captured:
                self.headers[i] = _read_header(data, d.op, i, names[i], d.adjust, d.max_pixels, d.direct)
                continue
            try:
                self.headers[i] = _captured(lambda: _read_header(data, d.op, i, names[i], d.adjust, d.max_pixels,
                                                                 d.direct),
                                            _describe(d.op, i, names[i]), d.strict)
            except ImageDecodeError as e:
                self.failed(i, e)
        rows = [i for i in range(start, stop) if i in self.headers]
        drawn = [None] * len(rows)
        if self.keys is not None and rows:  # vectorised over the chunk's samples
            sizes = np.array([_oriented_size(self.headers[i].height, self.headers[i].width,
                                             self.headers[i].orientation) for i in rows], np.int64).reshape(-1, 2)
            drawn = np.stack(d.windows(self.keys[rows], sizes[:, 0], sizes[:, 1], rows, self.args, self.inputs),
                             axis=1).tolist()
        self.windows.update(zip(rows, drawn))
        return rows

    def prepare_captured(self, start: int, stop: int) -> None:
        """``prepare_chunk`` in one capture window; again sample by sample if the codecs said anything."""
        try:
            with CODEC_OUTPUT.window() as seen:
                self.prepare_chunk(start, stop, captured=False)
            if not seen.lines:
                return
        except ImageDecodeError:
            pass
        for i in range(start, stop):
            self.headers.pop(i, None)
        self.prepare_chunk(start, stop)

    def decode(self, i: int, part=None) -> np.ndarray:
        """Decodes row ``i``: its window, or the (y, x, h, w) ``part`` of it."""
        d = self.decoder
        window = self.windows[i]
        if part is not None:
            window = part if window is None else (window[0] + part[0], window[1] + part[1], part[2], part[3])
        try:
            return _decode_one(self.datas[i], self.headers[i], d.spec, self.params, window, d.op, i, self.names[i],
                               self.compact)
        except ImageDecodeError:
            raise
        except Exception as e:
            e.add_note(f"{_describe(d.op, i, self.names[i])} while decoding")
            raise

    def decode_on_host(self, i: int, part=None):
        """Decodes row ``i`` (or its ``part``) in its own capture window; None if it failed under
        ``error_policy="replace"``."""
        try:
            return _captured(lambda: self.decode(i, part), _describe(self.decoder.op, i, self.names[i]),
                             self.decoder.strict)
        except ImageDecodeError as e:
            self.failed(i, e)

    def decode_chunk(self, start: int, stop: int, consume, parts=None) -> None:
        """Decodes rows ``start`` .. ``stop - 1`` (only ``parts[i]`` of row ``i`` where given) and calls
        ``consume(i, image)`` for each (``None`` for a replaced row); reads the headers first unless
        ``prepare_captured`` did."""
        prepared = all(i in self.headers for i in range(start, stop))
        parts = parts or [None] * self.n
        try:
            with CODEC_OUTPUT.window() as seen:
                for i in (range(start, stop) if prepared else self.prepare_chunk(start, stop, captured=False)):
                    consume(i, self.decode(i, parts[i]))
            if not seen.lines:
                return
        except ImageDecodeError:
            pass
        if not prepared:
            for i in range(start, stop):
                self.headers.pop(i, None)
            self.prepare_chunk(start, stop)
        for i in range(start, stop):
            consume(i, self.decode_on_host(i, parts[i]) if i in self.headers else None)


class ImageDecoder(Operator):
    """Image decoder (``fn.decoders.image``): on the host, or with ``device="mixed"`` on the pipeline's
    CUDA device where ``gpu_decode.decode_status`` allows (else the host path, placed on the device)."""

    #: Whether ``windows`` draws crop windows (the random-crop subclass).
    crops = False

    def __init__(self, node, build):
        super().__init__(node, build)
        self.op = node.schema.name
        dtype = DALIDataType(self.args["dtype"])
        if dtype not in _SUPPORTED_DTYPES:
            raise OpArgumentError(
                f"fn.{self.op}: argument 'dtype' must be one of {[t.name for t in _SUPPORTED_DTYPES]}, "
                f"got {dtype.name}")
        self.spec = _DecodeSpec(DALIImageType(self.args["output_type"]), np.dtype(to_numpy_type(dtype)),
                                bool(self.args["use_fast_idct"]))
        self.adjust = bool(self.args["adjust_orientation"])
        limit = self.args["max_image_pixels"]
        self.max_pixels = int(options.get("max_image_pixels") if limit is None else limit)
        self.strict = bool(self.args["strict_decoding"])
        self.replace = self.args["error_policy"] == "replace"
        self.skip_log = SkipLog(f"fn.{self.op}")
        backend_status()  # import problems surface at build
        #: Decodes on the pipeline's CUDA device (``device="mixed"``; see ``jaxdali.ops.gpu_decode``), or None.
        self.device_decoder: gpu_decode.DeviceDecoder | None = None
        self.decode_place = ("host", "device='cpu'")
        if node.device == "mixed":
            self.decode_place = gpu_decode.decode_status(build.device_id)
            if self.decode_place[0] == "gpu" and (self.spec.dtype != np.uint8
                                                  or self.spec.output_type == DALIImageType.YCbCr):
                self.decode_place = ("host", "output_type=YCbCr and dtypes other than uint8 are converted on the host")
            if self.decode_place[0] == "gpu":
                device = gpu_decode.local_device(build.device_id)
                codec_options = self.spec.options
                self.device_decoder = gpu_decode.DeviceDecoder(
                    lambda: gpu_decode.gpu_decoder(device, codec_options), device)
        self.device_params = _device_params(self.spec) if self.device_decoder is not None else None
        # Decoding on the host (device="cpu", or "mixed" without a CUDA decoder), rows never replaced.
        self.row_wise = not self.replace and self.device_decoder is None
        #: Whether JPEGs are decoded by ``jpeg_direct`` (on the host only: the device path needs code streams).
        self.direct = self.device_decoder is None and self.spec.direct

    def windows(self, keys: np.ndarray, heights: np.ndarray, widths: np.ndarray, rows: list[int], args,
                inputs: list):
        """(y, x, h, w) arrays: one window per sample ``rows`` of the oriented images (``crops`` operators), from
        the batch's ``args`` and ``inputs`` (passed along, never kept: batches may be computed at once)."""
        raise NotImplementedError

    def run(self, ctx, inputs, args):
        job = _BatchDecode(self, ctx, inputs, args)
        if self.device_decoder is None:
            ctx.parallel_for(lambda start, stop: job.decode_chunk(start, stop, job.out.__setitem__), job.n)
            replace_failed(ctx, job.failures, job.names, self.skip_log)
            return TensorListCPU(job.out, "HWC")
        ctx.parallel_for(job.prepare_chunk, job.n)
        self._decode_on_device(job.out, job.headers, job.windows, job.decode_on_host)
        replace_failed(ctx, job.failures, job.names, self.skip_log)
        return TensorListGPU(job.out, "HWC")

    def sample_source(self, ctx, inputs, args) -> SampleSource | None:
        """The decoded batch as samples decoded when the reader asks for them (headers read and windows
        drawn now, in parallel). Not with ``error_policy="replace"`` (a replaced row is a copy of another
        decoded image, which the reader must see as such), device decoding or ``ANY_DATA``."""
        channels = _IMAGE_TYPE_CHANNELS.get(self.spec.output_type)
        if self.replace or self.device_decoder is not None or channels is None:
            return None
        job = _BatchDecode(self, ctx, inputs, args)
        job.compact = False
        ctx.parallel_for(job.prepare_captured, job.n)
        shapes = []
        for i in range(job.n):
            header, window = job.headers[i], job.windows[i]
            h, w = _oriented_size(header.height, header.width, header.orientation) if window is None else window[2:]
            shapes.append((int(h), int(w), channels))
        # With strict_decoding the whole image is decoded, so that corrupt data anywhere in it is refused;
        # otherwise only the part the reader needs (corrupt data outside it goes unreported, as outside a
        # crop window).
        return SampleSource(shapes, self.spec.dtype, "HWC", inputs[0].source_info, job.decode_chunk,
                            takes_parts=not self.strict)

    def _decode_on_device(self, out: list, headers: dict, windows: dict, decode_on_host) -> None:
        """Decodes the rows of ``headers`` in one batched call of ``device_decoder`` (same windows as the host
        path); rows it cannot decode, and formats only the host decodes, take the host path and are copied
        to the device. EXIF orientation is applied on the device.

        The codecs' messages of a batched call cannot be told apart per image: when it prints any (failed
        or corrupt images), the whole batch takes the host path, which reports each image as it always does.
        """
        nvi = _nvimgcodec_module()
        rows, streams = [], []
        for i, header in headers.items():
            if header.stream is None:
                continue
            stream = header.stream
            if windows.get(i) is not None:
                y, x, h, w = _to_stored_window(windows[i], header.height, header.width, header.orientation)
                stream = stream.get_sub_code_stream(region=nvi.Region(y, x, y + h, x + w))
            rows.append(i)
            streams.append(stream)
        with CODEC_OUTPUT.window() as seen:
            decoded = self.device_decoder.decode(streams, self.device_params)
        if seen.lines:
            _log.debug("fn.%s: the batched device decode reported %s; decoding this batch on the host", self.op,
                       "; ".join(dict.fromkeys(seen.lines)))
            decoded = [None] * len(rows)
        for i, image in zip(rows, decoded):
            if image is not None:
                out[i] = _orient(image, headers[i].orientation)
        device = self.device_decoder.device
        for i in headers:
            if out[i] is None:
                host = decode_on_host(i)
                if host is not None:
                    out[i] = gpu_decode.to_jax(host, device)


class ImageRandomCropDecoder(ImageDecoder):
    """``fn.decoders.image_random_crop``: draws a window per sample and decodes only that window."""

    crops = True
    #: Stream of ``rng.uniform`` used for the window draws.
    STREAM = 0

    def __init__(self, node, build):
        super().__init__(node, build)
        self.area, self.ratio = check_ranges(self.op, self.args["random_area"], self.args["random_aspect_ratio"],
                                             self.args["num_attempts"])
        self.num_attempts = int(self.args["num_attempts"])

    def windows(self, keys, heights, widths, rows, args, inputs):
        u = rng.uniform(keys, crop_window_draws(self.num_attempts), self.STREAM)
        return random_crop_windows(heights, widths, u, self.area, self.ratio, self.num_attempts)


# -- schemas ----------------------------------------------------------------------------------------

_OUTPUT_ARGS = (
    Arg("output_type", "image_type", DALIImageType.RGB,
        "Colour space of the output: RGB, BGR, GRAY (one channel), YCbCr (BT.601 from RGB) or ANY_DATA "
        "(the image's own channels, e.g. 4 for RGBA PNG, 1 for grayscale)."),
    Arg("dtype", "dtype", DALIDataType.UINT8,
        "Output element type (uint8, int8, uint16, int16, uint32, int32 or float); values are rescaled to "
        "the type's dynamic range, [0, 1] for float."),
    Arg("adjust_orientation", "bool", True, "Apply the EXIF orientation stored in the file."),
    Arg("max_image_pixels", "int", None,
        "(jaxdali only) Refuse images whose header declares this many pixels (width x height) or more, before "
        "allocating anything (ImageDecodeError), and warn (LargeImageWarning) from half of it; default: config "
        "option 'max_image_pixels' (178,956,970, Pillow's decompression-bomb limit).", min=1),
    Arg("strict_decoding", "bool", False,
        "(jaxdali only) Refuse images in which the codec reports corrupt data (e.g. 'Corrupt JPEG data: ... "
        "extraneous bytes') instead of decoding them with a CorruptImageWarning. Truncated data (the image "
        "would be partly blank) is refused either way."),
    ERROR_POLICY_ARG,
    Arg("use_fast_idct", "bool", False,
        "JPEG: use libjpeg-turbo's fast integer IDCT (faster, slightly less accurate)."),
    Arg("jpeg_fancy_upsampling", "bool", False,
        "Accepted for compatibility: the host decoder always upsamples chroma smoothly, as DALI's CPU "
        "decoder does; in DALI the flag makes the GPU decoder do the same."),
    Arg("hw_decoder_load", "float", 0.65, "Share of JPEG work for the hardware decoder.", hint=True),
    Arg("preallocate_width_hint", "int", 0, "Hardware decoder buffer width.", hint=True),
    Arg("preallocate_height_hint", "int", 0, "Hardware decoder buffer height.", hint=True),
    Arg("device_memory_padding", "int", 16777216, "nvJPEG device buffer padding.", hint=True),
    Arg("host_memory_padding", "int", 8388608, "nvJPEG pinned host buffer padding.", hint=True),
    Arg("device_memory_padding_jpeg2k", "int", 0, "nvJPEG2000 device buffer padding.", hint=True),
    Arg("host_memory_padding_jpeg2k", "int", 0, "nvJPEG2000 pinned host buffer padding.", hint=True),
    Arg("hybrid_huffman_threshold", "int", 1000000, "Pixel count above which Huffman decoding moves to the GPU.",
        hint=True),
    Arg("affine", "bool", True, "Pin nvJPEG worker threads to CPU cores.", hint=True),
    Arg("split_stages", "bool", False, "Deprecated in DALI; no effect.", hint=True),
    Arg("use_chunk_allocator", "bool", False, "Deprecated in DALI; no effect.", hint=True),
    Arg("memory_stats", "bool", False, "Deprecated in DALI; no effect.", hint=True),
)

_CACHE_ARGS = (
    Arg("cache_size", "int", 0, "Decoded-image cache size in MB (DALI's GPU cache).", hint=True),
    Arg("cache_threshold", "int", 0, "Smallest image size cached.", hint=True),
    Arg("cache_type", "str", "", "Cache policy ('threshold' or 'largest').", hint=True),
    Arg("cache_debug", "bool", False, "Print cache statistics.", hint=True),
    Arg("cache_batch_copy", "bool", True, "Copy cached images in one batched call.", hint=True),
)

_CROP_ARGS = (
    Arg("random_area", "floats", (0.08, 1.0),
        "[min, max] of the window's area as a fraction of the image's, drawn uniformly."),
    Arg("random_aspect_ratio", "floats", (3 / 4, 4 / 3),
        "[min, max] of the window's width / height, drawn log-uniformly."),
    Arg("num_attempts", "int", 10, "Windows drawn before falling back to a clamped, centred-size window."),
)

_IMAGE_DOC = (
    "Decodes images (JPEG, JPEG 2000, PNG, PNM, WebP, TIFF, BMP) into HWC arrays, one per sample "
    "(a ragged batch). Input: encoded bytes (1-D uint8), e.g. from fn.readers.file. Decoded on the "
    "host; device='mixed' places the result on the pipeline's JAX device, and on a CUDA device decodes "
    "with nvImageCodec's GPU backends (config 'gpu_decode'). Images whose header "
    "declares max_image_pixels pixels or more are refused before decoding. A corrupt, truncated or "
    "empty file raises ImageDecodeError naming the file (error_policy='replace' replaces it with another "
    "sample of the batch instead); the codecs' own messages never reach the terminal.\n\nDecoder per format "
    "(jaxdali.ops.decoders.FORMAT_DECODERS; decode_path(data) tells which one a file takes):\n"
    + "\n".join(f"  {k}: {v}" for k, v in FORMAT_DECODERS.items()))
_CROP_DOC = (
    "Decodes a random window of each image (the Inception-style random-resized-crop window: area "
    "fraction uniform in random_area, aspect ratio log-uniform in random_aspect_ratio, up to "
    "num_attempts tries, then a clamped fallback; uniform position). Only the window is decoded. The "
    "window is drawn in the image as oriented by EXIF and depends only on (seed, iteration, sample). "
    "Other arguments as fn.decoders.image.")

IMAGE = register(OpSchema(
    name="decoders.image", impl=ImageDecoder, devices=("cpu", "mixed"), doc=_IMAGE_DOC,
    args=_OUTPUT_ARGS + _CACHE_ARGS))

IMAGE_DECODER = register(OpSchema(
    name="image_decoder", impl=ImageDecoder, devices=("cpu", "mixed"),
    doc="Legacy name of fn.decoders.image. " + _IMAGE_DOC, args=_OUTPUT_ARGS + _CACHE_ARGS))

IMAGE_RANDOM_CROP = register(OpSchema(
    name="decoders.image_random_crop", impl=ImageRandomCropDecoder, devices=("cpu", "mixed"), doc=_CROP_DOC,
    args=_OUTPUT_ARGS + _CROP_ARGS))

IMAGE_DECODER_RANDOM_CROP = register(OpSchema(
    name="image_decoder_random_crop", impl=ImageRandomCropDecoder, devices=("cpu", "mixed"),
    doc="Legacy name of fn.decoders.image_random_crop. " + _CROP_DOC, args=_OUTPUT_ARGS + _CROP_ARGS))
