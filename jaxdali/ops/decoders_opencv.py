"""The image decoders' fallback backend: OpenCV, and Pillow for the files OpenCV cannot decode.

``jaxdali.ops.decoders`` uses it where nvImageCodec is not installed (it has no macOS wheels) or when
config ``decoder`` is ``"opencv"`` (``JAXDALI_DECODER=opencv``). What it gives, against nvImageCodec:

* JPEG: the same libjpeg-turbo decode (identical on the shared photos); ``use_fast_idct`` has no
  OpenCV switch and is ignored (the accurate IDCT runs).
* PNG, BMP, TIFF, PNM, WebP, JPEG 2000: the same values (lossless formats are exact).
* Crop windows: OpenCV has no region decode, so the whole image is decoded and the window cut from it
  (the same values as nvImageCodec's region decode, more work for small windows).
* Native bit depth (16-bit PNG and TIFF stay uint16) and ANY_DATA (the file's own channels; a grey +
  alpha PNG gives 4 channels, which nvImageCodec refuses).
* Pillow decodes the formats this OpenCV build has no codec for (probed once per format), if installed.

Headers are parsed here, before decoding, so the size limit (config ``max_image_pixels``) refuses a
huge image before anything is allocated, as with nvImageCodec. A JPEG without its end-of-image marker
is refused (libjpeg would fill the missing rows with grey and return).
"""

from __future__ import annotations

import functools
import io
import struct

import cv2
import numpy as np

from jaxdali.types import DALIImageType

__all__ = ["FORMAT_DECODERS", "stored_size", "decode"]

#: Format (as ``decode_path`` reports it with this backend) -> library that decodes it.
FORMAT_DECODERS: dict[str, str] = {
    "jpeg-opencv": "OpenCV cv2.imdecode (libjpeg-turbo); fallback backend",
    "jpeg2k-opencv": "OpenCV cv2.imdecode (OpenJPEG); fallback backend",
    "png-opencv": "OpenCV cv2.imdecode (libpng); fallback backend",
    "pnm-opencv": "OpenCV cv2.imdecode; fallback backend",
    "tiff-opencv": "OpenCV cv2.imdecode (libtiff); fallback backend",
    "bmp-opencv": "OpenCV cv2.imdecode; fallback backend",
}

_JP2_SIGNATURE = b"\x00\x00\x00\x0cjP  \r\n\x87\n"


def stored_size(buf: memoryview) -> tuple[str, int, int] | None:
    """(format, height, width) of an encoded JPEG, PNG, TIFF, BMP, PNM or JPEG 2000 image, read from its
    header (WebP: ``decoders._webp_size``); None for other data or a header too short to hold a size."""
    head = bytes(buf[:16])
    try:
        if head.startswith(b"\xff\xd8"):
            return _jpeg_size(buf)
        if head.startswith(b"\x89PNG\r\n\x1a\n") and bytes(buf[12:16]) == b"IHDR":
            w, h = struct.unpack_from(">II", buf, 16)
            return "png", h, w
        if head[:4] in (b"II*\x00", b"MM\x00*"):
            return _tiff_size(buf)
        if head[:2] == b"BM":
            if struct.unpack_from("<I", buf, 14)[0] == 12:  # OS/2 BITMAPCOREHEADER: 16-bit sizes
                w, h = struct.unpack_from("<HH", buf, 18)
            else:
                w, h = struct.unpack_from("<ii", buf, 18)
            return "bmp", abs(h), w  # a negative height: rows stored top-down
        if head[:1] == b"P" and head[1:2] in b"123456" and head[2:3].isspace():
            return _pnm_size(buf)
        if head.startswith(_JP2_SIGNATURE) or head.startswith(b"\xff\x4f\xff\x51"):
            return _jpeg2k_size(buf)
    except (struct.error, ValueError):
        return None
    return None


def _jpeg_size(buf: memoryview) -> tuple[str, int, int] | None:
    pos, n = 2, len(buf)
    while pos + 9 <= n:
        if buf[pos] != 0xFF:
            return None
        marker = buf[pos + 1]
        if marker == 0xFF or marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # fill byte, no-length markers
            pos += 1 if marker == 0xFF else 2
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            h, w = struct.unpack_from(">HH", buf, pos + 5)
            return "jpeg", h, w
        if marker in (0xDA, 0xD9):
            return None
        pos += 2 + struct.unpack_from(">H", buf, pos + 2)[0]
    return None


def _tiff_size(buf: memoryview) -> tuple[str, int, int] | None:
    e = "<" if bytes(buf[:2]) == b"II" else ">"
    ifd = struct.unpack_from(e + "I", buf, 4)[0]
    size = {}
    for k in range(min(struct.unpack_from(e + "H", buf, ifd)[0], 512)):
        tag, kind = struct.unpack_from(e + "HH", buf, ifd + 2 + 12 * k)
        if tag in (256, 257):  # ImageWidth, ImageLength: SHORT or LONG
            size[tag] = struct.unpack_from(e + ("H" if kind == 3 else "I"), buf, ifd + 2 + 12 * k + 8)[0]
    return ("tiff", size[257], size[256]) if len(size) == 2 else None


def _pnm_size(buf: memoryview) -> tuple[str, int, int] | None:
    """Width and height: the 2nd and 3rd whitespace-separated tokens, '#' comments skipped."""
    tokens: list[bytes] = []
    for line in bytes(buf[:1024]).split(b"\n"):
        tokens += line.split(b"#", 1)[0].split()
        if len(tokens) >= 3:
            return "pnm", int(tokens[2]), int(tokens[1])
    return None


def _jpeg2k_size(buf: memoryview) -> tuple[str, int, int] | None:
    head = bytes(buf[:4096])
    if head.startswith(_JP2_SIGNATURE):  # JP2 file: the image header box holds height, width
        at = head.find(b"ihdr")
        if at < 0:
            return None
        h, w = struct.unpack_from(">II", head, at + 4)
        return "jpeg2k", h, w
    # Raw codestream: the SIZ segment after SOC holds the grid size and the image offset.
    xsiz, ysiz, xo, yo = struct.unpack_from(">IIII", head, 8)
    return "jpeg2k", ysiz - yo, xsiz - xo


#: File extension per format, for ``cv2.imencode``'s probe of the codecs this OpenCV build has.
_EXTENSIONS = {"jpeg": ".jpg", "jpeg2k": ".jp2", "png": ".png", "pnm": ".ppm", "tiff": ".tiff", "bmp": ".bmp",
               "webp": ".webp"}


@functools.cache
def _opencv_has(fmt: str) -> bool:
    """Whether this OpenCV build has a codec for ``fmt`` (e.g. some builds leave out OpenJPEG)."""
    try:
        return bool(cv2.imencode(_EXTENSIONS[fmt], np.zeros((64, 64, 3), np.uint8))[0])  # JPEG 2000 needs >= 32 px
    except cv2.error:
        return False


def decode(data: np.ndarray, fmt: str, output_type: DALIImageType, window) -> np.ndarray | None:
    """Decodes ``data`` (1-D uint8, format ``fmt`` as from ``stored_size``, or ``"webp"``) as ``output_type``
    at its native depth, HWC; ``window`` (y, x, h, w) in stored coordinates cuts a region. None where it
    cannot be decoded (corrupt, truncated, or a format neither OpenCV nor Pillow reads here)."""
    if fmt == "jpeg" and not _jpeg_complete(data):
        return None
    if not _opencv_has(fmt):
        return _decode_pillow(data, output_type, window)
    if fmt == "tiff":
        data = _tiff_as_stored(data)
    if output_type == DALIImageType.ANY_DATA:
        flags = cv2.IMREAD_UNCHANGED  # also leaves the EXIF orientation alone
    elif output_type == DALIImageType.GRAY:
        flags = cv2.IMREAD_GRAYSCALE | cv2.IMREAD_ANYDEPTH | cv2.IMREAD_IGNORE_ORIENTATION
    else:
        flags = cv2.IMREAD_COLOR | cv2.IMREAD_ANYDEPTH | cv2.IMREAD_IGNORE_ORIENTATION
    img = cv2.imdecode(data, flags)
    if img is None:
        return None
    if window is not None:
        y, x, h, w = window
        img = img[y:y + h, x:x + w]
    if img.ndim == 2:
        return img[:, :, None]
    if output_type == DALIImageType.BGR:
        return img
    # OpenCV's channel order is BGR(A); every other output type is RGB(A) or computed from RGB.
    return cv2.cvtColor(img, cv2.COLOR_BGRA2RGBA if img.shape[2] == 4 else cv2.COLOR_BGR2RGB)


def _jpeg_complete(data: np.ndarray) -> bool:
    """Whether a JPEG has an end-of-image marker after its first scan (a truncated file has none)."""
    raw = data.tobytes()
    scan = raw.find(b"\xff\xda")
    return scan >= 0 and raw.rfind(b"\xff\xd9") > scan


def _tiff_as_stored(data: np.ndarray) -> np.ndarray:
    """A TIFF whose orientation tag says 1 (a patched copy where it says otherwise): OpenCV's TIFF reader
    applies the tag even with IMREAD_IGNORE_ORIENTATION, and the caller orients the stored image."""
    buf = memoryview(data)
    try:
        e = "<" if bytes(buf[:2]) == b"II" else ">"
        ifd = struct.unpack_from(e + "I", buf, 4)[0]
        for k in range(min(struct.unpack_from(e + "H", buf, ifd)[0], 512)):
            entry = ifd + 2 + 12 * k
            tag, kind = struct.unpack_from(e + "HH", buf, entry)
            if tag == 0x0112:
                code = e + ("I" if kind == 4 else "H")
                if struct.unpack_from(code, buf, entry + 8)[0] == 1:
                    return data
                patched = bytearray(buf)
                struct.pack_into(code, patched, entry + 8, 1)
                return np.frombuffer(patched, np.uint8)
    except struct.error:
        pass
    return data


def _decode_pillow(data: np.ndarray, output_type: DALIImageType, window) -> np.ndarray | None:
    try:
        from PIL import Image
    except ImportError:
        return None
    try:
        with Image.open(io.BytesIO(data.tobytes())) as im:
            if window is not None:
                y, x, h, w = window
                im = im.crop((x, y, x + w, y + h))
            if output_type == DALIImageType.GRAY:
                im = im.convert("L")
            elif output_type != DALIImageType.ANY_DATA:
                im = im.convert("RGB")
            img = np.asarray(im)
    except (OSError, ValueError, SyntaxError):
        return None
    if img.ndim == 2:
        return img[:, :, None]
    return img[:, :, ::-1] if output_type == DALIImageType.BGR else img
