"""The FITS container (NASA's Flexible Image Transport System, version 4.0): headers and image HDUs.

A file is a sequence of HDUs (header and data units), each a header of 80-character ASCII cards in
2880-byte blocks ending with the ``END`` card, then its data padded to 2880 bytes. The first HDU
starts with ``SIMPLE``, the others with ``XTENSION``. An image's data is big-endian, its type given by
``BITPIX`` (8: uint8, 16/32/64: signed integers, -32/-64: IEEE floats) and its axes by ``NAXIS1``
(fastest) ... ``NAXISn``, so as a C-order array its shape is ``(NAXISn, ..., NAXIS1)``.

Values are ``BSCALE * stored + BZERO``, returned in CFITSIO's "equivalent" type (what DALI returns): the
smallest integer type holding every scaled value when the scaling is integral (so ``BITPIX=16,
BZERO=32768`` is uint16 and ``BITPIX=8, BZERO=-128`` int8), else float32 for 8/16-bit and float64 for
32/64-bit data. Tile-compressed images (a ``BINTABLE`` with ``ZIMAGE = T``) are read by
``jaxdali.ops.readers.fits_tiles``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

__all__ = ["BLOCK", "FitsError", "Hdu", "equivalent_dtype", "header_int", "header_number", "image_shape", "read_hdus",
           "read_image", "scale_values"]

BLOCK = 2880
_CARD = 80
#: Blocks read at once while looking for a header's END card (headers are mostly one or two blocks).
_HEADER_READ_BLOCKS = 4

_RAW_TYPES = {8: np.dtype("u1"), 16: np.dtype(">i2"), 32: np.dtype(">i4"), 64: np.dtype(">i8"),
              -32: np.dtype(">f4"), -64: np.dtype(">f8")}
#: Equivalent integer types, smallest first (CFITSIO's order), with their ranges.
_INTEGER_TYPES = tuple(np.dtype(t) for t in ("i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8"))


class FitsError(ValueError):
    """A file that is not valid FITS, or an HDU that cannot be read as an image; the message names the file."""


@dataclasses.dataclass(frozen=True)
class Hdu:
    """One header and data unit: its 1-based number, its header's values, and where its data lies."""

    number: int
    header: dict[str, Any]
    data_offset: int
    data_size: int

    @property
    def is_image(self) -> bool:
        return self.number == 1 or self.header.get("XTENSION") == "IMAGE"

    @property
    def is_compressed_image(self) -> bool:
        return self.header.get("XTENSION") == "BINTABLE" and self.header.get("ZIMAGE") is True


def header_int(header: dict[str, Any], key: str, default: Any, where: str, minimum: int = 0) -> int:
    """The integer value of ``key`` (``default`` when absent); FitsError naming ``where`` when it is not one."""
    value = header.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FitsError(f"{where}: {key} must be an integer >= {minimum}, got {value!r}")
    return value


def header_number(header: dict[str, Any], key: str, default: Any, where: str) -> float:
    """The numeric value of ``key`` (``default`` when absent); FitsError naming ``where`` when it is not one."""
    value = header.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FitsError(f"{where}: {key} must be a finite number, got {value!r}")
    return value


def _value(text: str) -> Any:
    """A card's value field: a quoted string, T/F, an integer or a float (``D`` exponents allowed)."""
    text = text.strip()
    if text.startswith("'"):
        out, i = [], 1
        while i < len(text):
            if text[i] == "'":
                if text[i + 1:i + 2] == "'":  # '' is an escaped quote
                    out.append("'")
                    i += 2
                    continue
                break
            out.append(text[i])
            i += 1
        return "".join(out).rstrip()
    text = text.split("/", 1)[0].strip()
    if text in ("T", "F"):
        return text == "T"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text.replace("D", "E").replace("d", "e"))
    except ValueError:
        return text or None


def _parse_cards(block: bytes, header: dict[str, Any]) -> bool:
    """Adds the valued cards of ``block`` to ``header``; True once the END card was met."""
    for start in range(0, len(block), _CARD):
        card = block[start:start + _CARD].decode("ascii", "replace")
        keyword = card[:8].rstrip()
        if keyword == "END":
            return True
        if card[8:10] == "= " and keyword not in header:
            header[keyword] = _value(card[10:])
    return False


def _data_size(header: dict[str, Any], where: str) -> int:
    """Bytes of the HDU's data before padding."""
    bitpix, naxis = header.get("BITPIX"), header.get("NAXIS")
    if type(bitpix) is not int or bitpix not in _RAW_TYPES or type(naxis) is not int or not 0 <= naxis <= 999:
        raise FitsError(f"{where}: BITPIX must be one of {sorted(_RAW_TYPES)} and NAXIS an integer in [0, 999], got "
                        f"BITPIX={bitpix!r}, NAXIS={naxis!r}")
    if naxis == 0:
        return 0
    axes = [header.get(f"NAXIS{k}") for k in range(1, naxis + 1)]
    if not all(isinstance(n, int) and n >= 0 for n in axes):
        raise FitsError(f"{where}: NAXIS1..NAXIS{naxis} must be non-negative integers, got {axes}")
    if header.get("GROUPS") is True and axes[0] == 0:  # random groups: NAXIS1 = 0 is not an axis
        axes = axes[1:]
    count = header_int(header, "GCOUNT", 1, where) * (header_int(header, "PCOUNT", 0, where) + math.prod(axes))
    return abs(bitpix) // 8 * count


def read_hdus(read: Callable[[int, int], bytes], last: int, where: str) -> list[Hdu]:
    """HDUs 1..``last`` (fewer when the file has fewer); ``read(offset, length)`` returns the file's bytes there
    (fewer at its end). Raises FitsError naming ``where`` for a file that is not FITS or is truncated."""
    hdus: list[Hdu] = []
    offset = 0
    while len(hdus) < last:
        header: dict[str, Any] = {}
        start, done = offset, False
        first = b"SIMPLE  =" if not hdus else b"XTENSION="
        while not done:
            chunk = read(offset, _HEADER_READ_BLOCKS * BLOCK)
            whole = len(chunk) - len(chunk) % BLOCK
            if offset == start and not chunk.startswith(first) and (chunk or not hdus):
                raise FitsError(f"{where}: HDU {len(hdus) + 1} at byte {start} does not start with "
                                f"{first[:-1].decode().strip()}: not a FITS file, or a damaged one")
            if whole == 0:
                if not chunk:
                    return hdus  # the file ends after its last HDU
                raise FitsError(f"{where}: truncated: the header of HDU {len(hdus) + 1} (from byte {start}) has no "
                                "END card")
            for b in range(0, whole, BLOCK):
                offset += BLOCK
                if _parse_cards(chunk[b:b + BLOCK], header):
                    done = True
                    break
        size = _data_size(header, f"{where}: HDU {len(hdus) + 1}")
        hdus.append(Hdu(len(hdus) + 1, header, offset, size))
        offset += -(-size // BLOCK) * BLOCK
    return hdus


def image_shape(header: dict[str, Any]) -> tuple[int, ...]:
    """The C-order shape of an image: ``(NAXISn, ..., NAXIS1)``."""
    return tuple(header[f"NAXIS{k}"] for k in range(header["NAXIS"], 0, -1))


def equivalent_dtype(bitpix: int, bscale: float, bzero: float) -> np.dtype:
    """The type that holds ``bscale * stored + bzero`` for data of ``bitpix`` (CFITSIO's equivalent type)."""
    raw = _RAW_TYPES[bitpix]
    if bscale == 1 and bzero == 0:
        return raw.newbyteorder("=")
    if raw.kind == "f":
        return raw.newbyteorder("=")
    if float(bscale).is_integer() and float(bzero).is_integer():
        info = np.iinfo(raw)
        bounds = sorted((info.min * bscale + bzero, info.max * bscale + bzero))
        for t in _INTEGER_TYPES:
            limits = np.iinfo(t)
            if limits.min <= bounds[0] and bounds[1] <= limits.max:
                return t
        return np.dtype(np.float64)
    return np.dtype(np.float32 if abs(bitpix) <= 16 else np.float64)


def scale_values(raw: np.ndarray, bscale: float, bzero: float, dtype: np.dtype) -> np.ndarray:
    """``bscale * raw + bzero`` in ``dtype`` (native byte order), exact for integral scalings."""
    if bscale == 1 and bzero == 0:
        return raw.astype(dtype)
    bits = 8 * raw.dtype.itemsize
    flip = 2.0 ** (bits - 1)
    if (bscale == 1 and dtype.kind in "iu" and dtype.kind != raw.dtype.kind and dtype.itemsize == raw.dtype.itemsize
            and bzero == (-flip if raw.dtype.kind == "u" else flip)):
        # The offset conventions for unsigned (BZERO = 2**(bits-1)) and signed bytes (BZERO = -128): the top bit flips.
        unsigned = raw.astype(raw.dtype.newbyteorder("=")).view(f"u{dtype.itemsize}")
        unsigned ^= unsigned.dtype.type(1 << (bits - 1))
        return unsigned.view(dtype)
    if dtype.kind in "iu":
        return (raw.astype(np.int64) * int(bscale) + int(bzero)).astype(dtype)
    return (raw.astype(np.float64) * bscale + bzero).astype(dtype)


def read_image(hdu: Hdu, read: Callable[[int, int], bytes], where: str) -> np.ndarray:
    """The scaled image of an uncompressed image HDU (``read`` as in ``read_hdus``)."""
    header = hdu.header
    if not hdu.is_image:
        raise FitsError(f"{where}: HDU {hdu.number} is a {header.get('XTENSION')!r} extension; only image HDUs are read")
    if header["NAXIS"] == 0:
        raise FitsError(f"{where}: HDU {hdu.number} has no image (NAXIS = 0); the first extension is HDU 2")
    bitpix, shape = header["BITPIX"], image_shape(header)
    size = math.prod(shape) * _RAW_TYPES[bitpix].itemsize
    if size > hdu.data_size:
        raise FitsError(f"{where}: HDU {hdu.number}'s image needs {size} bytes, but its GCOUNT and PCOUNT give "
                        f"{hdu.data_size}")
    data = read(hdu.data_offset, size)
    if len(data) < size:
        raise FitsError(f"{where}: truncated: HDU {hdu.number}'s image needs {size} bytes from byte "
                        f"{hdu.data_offset}, the file has {len(data)}")
    where = f"{where}: HDU {hdu.number}"
    bscale, bzero = header_number(header, "BSCALE", 1, where), header_number(header, "BZERO", 0, where)
    raw = np.frombuffer(data, _RAW_TYPES[bitpix], math.prod(shape)).reshape(shape)
    return scale_values(raw, bscale, bzero, equivalent_dtype(bitpix, bscale, bzero))
