"""Tile-compressed FITS images: a ``BINTABLE`` HDU with ``ZIMAGE = T`` (FITS 4.0, section 10).

The image (``ZBITPIX``, ``ZNAXISn``) is cut into tiles of ``ZTILEn`` pixels (default: rows), tile ``k`` stored
in row ``k`` of the table, its compressed bytes in the heap at the ``COMPRESSED_DATA`` descriptor. Read here:
``RICE_1`` (Rice codes of pixel differences, blocks of ``BLOCKSIZE`` pixels of ``BYTEPIX`` bytes), ``GZIP_1``
(gzip of the big-endian pixels), ``GZIP_2`` (gzip of the pixels' bytes grouped by significance) and
``NOCOMPRESS``; integer images, and float images stored losslessly (``GZIP_*``) or quantized to integers
(``ZSCALE``/``ZZERO`` per tile, ``ZBLANK`` as NaN) with or without subtractive dither (``ZQUANTIZ``
``SUBTRACTIVE_DITHER_1``/``_2``: the standard's table of 10,000 uniform values, entered per tile at
``ZDITHER0``). ``PLIO_1`` and ``HCOMPRESS_1`` are refused with an error naming the file.

Rice tiles are decoded by the compiled kernel ``_rice_kernel.c`` (built at install like the resize kernel;
GIL-free) where it is built and ``JAXDALI_DISABLE_KERNEL`` is unset, else by the NumPy decoder here, which
walks the bit stream in Python to find where every pixel's code starts (one ``bisect`` per pixel) and
extracts the codes' bits and sums the differences in whole-array NumPy steps; both give the same pixels.
"""

from __future__ import annotations

import bisect
import functools
import math
import pathlib
import re
import zlib
from typing import Any, Callable

import numpy as np

from jaxdali.core import options
from jaxdali.ops.kernel_loader import load_kernel
from jaxdali.ops.readers.fits_format import FitsError, Hdu, equivalent_dtype, header_int, header_number, scale_values

__all__ = ["decoder_status", "read_compressed_image", "rice_decode", "rice_decode_tiles"]

_KERNEL, _KERNEL_REASON = load_kernel("jaxdali.ops.readers._rice_kernel",
                                      pathlib.Path(__file__).with_name("_rice_kernel.c"), "Rice decoder")

#: BYTEPIX -> (bits of the block's code option, the option that means "raw pixels", bits of a raw pixel).
_RICE = {1: (3, 6, 8), 2: (4, 14, 16), 4: (5, 25, 32)}
#: Binary-table column types and their sizes in bytes (P and Q are heap descriptors: count and offset).
_TFORM_SIZES = {"L": 1, "X": 1, "B": 1, "I": 2, "J": 4, "K": 8, "A": 1, "E": 4, "D": 8, "C": 8, "M": 16, "P": 8,
                "Q": 16}
_TFORM = re.compile(r"^\s*(\d*)([A-Z])")
_INTEGER = {8: np.dtype("u1"), 16: np.dtype("i2"), 32: np.dtype("i4"), 64: np.dtype("i8")}
_FLOAT = {-32: np.dtype("f4"), -64: np.dtype("f8")}


def _bits_at(data: np.ndarray, positions: np.ndarray, widths: np.ndarray | int) -> np.ndarray:
    """The ``widths``-bit (<= 32) big-endian numbers starting at bit ``positions`` of ``data`` (padded with 8
    zero bytes), as uint64."""
    start = positions // 8
    window = np.zeros(len(positions), np.uint64)
    for k in range(8):  # the 8 bytes from the first one, as one big-endian 64-bit word
        window = (window << np.uint64(8)) | data[start + k].astype(np.uint64)
    window <<= (positions % 8).astype(np.uint64)
    widths = np.broadcast_to(np.asarray(widths, np.uint64), window.shape)
    return np.where(widths == 0, np.uint64(0), window >> (np.uint64(64) - np.maximum(widths, np.uint64(1))))


def decoder_status() -> tuple[str, str]:
    """Which Rice decoder ``rice_decode`` runs, ``"compiled kernel"`` or ``"numpy fallback"``, and why."""
    if options.get("disable_kernel"):
        return "numpy fallback", "disabled by config 'disable_kernel' (JAXDALI_DISABLE_KERNEL)"
    if _KERNEL is None:
        return "numpy fallback", f"compiled kernel {_KERNEL_REASON}"
    return "compiled kernel", _KERNEL_REASON


def rice_decode(data: bytes, count: int, bytepix: int, blocksize: int, where: str) -> np.ndarray:
    """The ``count`` pixels of one Rice-coded tile as unsigned ``bytepix``-byte integers (CFITSIO's RICE_1)."""
    return rice_decode_tiles(data, np.array([0]), np.array([len(data)]), np.array([count]), bytepix, blocksize,
                             where)


def rice_decode_tiles(data: bytes, begins: np.ndarray, lengths: np.ndarray, counts: np.ndarray, bytepix: int,
                      blocksize: int, where: str) -> np.ndarray:
    """The pixels of Rice-coded tiles, tile ``k`` being ``lengths[k]`` bytes of ``data`` from ``begins[k]`` and
    ``counts[k]`` pixels, one after the other as unsigned ``bytepix``-byte integers: one kernel call for all."""
    if bytepix not in _RICE:
        raise FitsError(f"{where}: RICE_1 with BYTEPIX={bytepix} (1, 2 or 4 are defined)")
    if blocksize < 1:
        raise FitsError(f"{where}: RICE_1 with BLOCKSIZE={blocksize}")
    begins, lengths, counts = (np.ascontiguousarray(a, np.int64) for a in (begins, lengths, counts))
    outside = np.flatnonzero((begins < 0) | (lengths < 0) | (begins + lengths > len(data)))
    if len(outside):
        raise FitsError(f"{where}, tile {outside[0] + 1}: truncated RICE_1 tile: its bytes lie past the heap's end")
    if decoder_status()[0] == "numpy fallback":
        parts = [_rice_decode_numpy(data[b:b + n], c, bytepix, blocksize, f"{where}, tile {k + 1}")
                 for k, (b, n, c) in enumerate(zip(begins.tolist(), lengths.tolist(), counts.tolist()))]
        return np.concatenate(parts) if parts else np.zeros(0, f"u{bytepix}")
    out = np.empty(int(counts.sum()), f"u{bytepix}")
    failed = _KERNEL.decode_tiles(data, begins, lengths, counts, out, bytepix, blocksize)
    if failed >= 0:
        raise FitsError(f"{where}, tile {failed + 1}: truncated RICE_1 tile: its data ends before its "
                        f"{counts[failed]} pixels")
    return out


def _rice_decode_numpy(data: bytes, count: int, bytepix: int, blocksize: int, where: str) -> np.ndarray:
    """``rice_decode`` in Python and NumPy (the reference of the compiled kernel)."""
    fsbits, fsmax, bbits = _RICE[bytepix]
    if len(data) < bytepix:
        raise FitsError(f"{where}: truncated RICE_1 tile ({len(data)} bytes)")
    padded = np.frombuffer(data + bytes(8), np.uint8)
    ones = np.flatnonzero(np.unpackbits(padded[:len(data)])).tolist()
    total_bits = 8 * len(data)
    first = int.from_bytes(data[:bytepix], "big")
    # Per pixel: the bit where its code's low part starts, its number of leading zeros and its code width;
    # raw pixels (the "high entropy" blocks) have no leading zeros and bbits bits.
    low_pos = [0] * count
    zeros = [0] * count
    widths = [0] * count
    pos, i = 8 * bytepix, 0
    while i < count:
        stop = min(i + blocksize, count)
        if pos + fsbits > total_bits:
            raise FitsError(f"{where}: truncated RICE_1 tile: its data ends at pixel {i} of {count}")
        fs = (int.from_bytes(data[pos // 8:pos // 8 + 2].ljust(2, b"\0"), "big") >> (16 - pos % 8 - fsbits)
              & ((1 << fsbits) - 1)) - 1
        pos += fsbits
        if fs < 0:  # every difference of the block is 0
            pass
        elif fs == fsmax:
            low_pos[i:stop] = range(pos, pos + bbits * (stop - i), bbits)
            widths[i:stop] = [bbits] * (stop - i)
            pos += bbits * (stop - i)
        else:
            widths[i:stop] = [fs] * (stop - i)
            k = bisect.bisect_left(ones, pos)
            for j in range(i, stop):
                if k == len(ones):
                    raise FitsError(f"{where}: truncated RICE_1 tile: its data ends at pixel {j} of {count}")
                one = ones[k]
                zeros[j] = one - pos
                pos = one + 1
                low_pos[j] = pos
                pos += fs
                k = bisect.bisect_left(ones, pos, k + 1)
        i = stop
    if pos > total_bits:
        raise FitsError(f"{where}: truncated RICE_1 tile: {pos} bits needed, {total_bits} stored")
    low_pos, zeros, widths = np.array(low_pos, np.int64), np.array(zeros, np.uint64), np.array(widths, np.uint64)
    coded = (zeros << widths) | _bits_at(padded, low_pos, widths)
    diffs = np.where(coded & np.uint64(1), ~(coded >> np.uint64(1)), coded >> np.uint64(1))
    diffs[:1] += np.uint64(first)  # (arrays wrap around silently, as the sums must)
    unsigned = np.dtype(f"u{bytepix}")
    return np.cumsum(diffs, dtype=np.uint64).astype(unsigned)  # the sums wrap around as CFITSIO's do


def _columns(header: dict[str, Any], where: str) -> dict[str, tuple[int, str]]:
    """Column name -> (byte offset in the row, type code)."""
    out, offset = {}, 0
    for k in range(1, header_int(header, "TFIELDS", 0, where) + 1):
        match = _TFORM.match(str(header.get(f"TFORM{k}", "")))
        if match is None:
            raise FitsError(f"{where}: unreadable TFORM{k} {header.get(f'TFORM{k}')!r}")
        repeat = int(match.group(1) or 1)
        code = match.group(2)
        out[str(header.get(f"TTYPE{k}", "")).strip().upper()] = (offset, code)
        offset += repeat * _TFORM_SIZES.get(code, 0) if code != "X" else -(-repeat // 8)
    width = header_int(header, "NAXIS1", None, where)
    if offset > width:
        raise FitsError(f"{where}: the table's columns take {offset} bytes a row, NAXIS1 is {width}")
    return out


def _descriptors(table: np.ndarray, offset: int, code: str, heap: int) -> tuple[np.ndarray, np.ndarray]:
    """(begin in the data, length) of every row's variable-length array in the column at ``offset``."""
    size = 4 if code == "P" else 8
    pairs = np.ascontiguousarray(table[:, offset:offset + 2 * size]).view(f">i{size}").astype(np.int64)
    return heap + pairs[:, 1], pairs[:, 0]


def _as_stored(values: np.ndarray, bytepix: int, stored: np.dtype) -> np.ndarray:
    """Decoded unsigned Rice values as the tile's stored type (signed types read them as two's complement)."""
    return values.view(f"i{bytepix}").astype(stored) if stored.kind == "i" else values.astype(stored)


def _zval(header: dict[str, Any], name: str, default: int, where: str) -> int:
    for k in range(1, 100):
        key = header.get(f"ZNAME{k}")
        if key is None:
            break
        if str(key).strip().upper() == name:
            return header_int(header, f"ZVAL{k}", default, f"{where}: {name}")
    return default


def _decompress(method: str, data: bytes, count: int, dtype: np.dtype, header: dict, where: str) -> np.ndarray:
    """One tile's ``count`` pixels of type ``dtype`` (native order)."""
    if method == "RICE_1":
        bytepix = _zval(header, "BYTEPIX", 4, where)
        return _as_stored(rice_decode(data, count, bytepix, _zval(header, "BLOCKSIZE", 32, where), where), bytepix, dtype)
    if method in ("GZIP_1", "GZIP_2"):
        try:
            data = zlib.decompress(data, 47)  # gzip or zlib framing
        except zlib.error as e:
            raise FitsError(f"{where}: {method} tile does not inflate ({e})") from None
    elif method != "NOCOMPRESS":
        raise FitsError(f"{where}: compression {method!r} is not supported (RICE_1, GZIP_1, GZIP_2 and NOCOMPRESS are)")
    size = dtype.itemsize
    if len(data) < count * size:
        raise FitsError(f"{where}: tile holds {len(data)} bytes, {count * size} needed")
    raw = np.frombuffer(data, np.uint8, count * size)
    if method == "GZIP_2":  # the bytes were grouped by significance: most significant bytes of every pixel first
        raw = np.ascontiguousarray(raw.reshape(size, count).T).reshape(-1)
    return raw.view(dtype.newbyteorder(">")).astype(dtype)


def read_compressed_image(hdu: Hdu, read: Callable[[int, int], bytes], where: str) -> np.ndarray:
    """The scaled image of a tile-compressed HDU (``read`` as in ``fits_format.read_hdus``)."""
    h = hdu.header
    where = f"{where}: HDU {hdu.number} (tile-compressed)"
    method = str(h.get("ZCMPTYPE", "")).strip().upper()
    zbitpix, ndim = h.get("ZBITPIX"), header_int(h, "ZNAXIS", None, where, minimum=1)
    if type(zbitpix) is not int or zbitpix not in _INTEGER and zbitpix not in _FLOAT:
        raise FitsError(f"{where}: ZBITPIX {zbitpix!r} is not one of {sorted(_INTEGER) + sorted(_FLOAT)}")
    axes = [header_int(h, f"ZNAXIS{k}", None, where) for k in range(1, ndim + 1)]
    tiles = [header_int(h, f"ZTILE{k}", axes[0] if k == 1 else 1, where, minimum=1) for k in range(1, ndim + 1)]
    grid = [-(-n // t) for n, t in zip(axes, tiles)]
    rows, width = header_int(h, "NAXIS2", None, where), header_int(h, "NAXIS1", None, where)
    if rows != math.prod(grid):
        raise FitsError(f"{where}: {rows} table rows for {math.prod(grid)} tiles of {tiles} pixels")
    data = read(hdu.data_offset, hdu.data_size)
    if len(data) < hdu.data_size:
        raise FitsError(f"{where}: truncated: the table and heap need {hdu.data_size} bytes from byte "
                        f"{hdu.data_offset}, the file has {len(data)}")
    columns = _columns(h, where)
    heap = header_int(h, "THEAP", width * rows, where)
    quantized = zbitpix in _FLOAT and ("ZSCALE" in columns or "ZSCALE" in h)
    dither = str(h.get("ZQUANTIZ", "NO_DITHER")).strip().upper() if quantized else "NO_DITHER"
    if dither not in ("NO_DITHER", "SUBTRACTIVE_DITHER_1", "SUBTRACTIVE_DITHER_2"):
        raise FitsError(f"{where}: quantization {dither!r} is not supported")
    if zbitpix in _FLOAT and not quantized and method == "RICE_1":
        raise FitsError(f"{where}: RICE_1 codes integers, but this float image has no quantization (ZSCALE)")
    stored = np.dtype("i4") if quantized else (_INTEGER.get(zbitpix) or _FLOAT[zbitpix])
    out_type = np.dtype("f4" if zbitpix == -32 else "f8") if zbitpix in _FLOAT else stored
    table = np.frombuffer(data, np.uint8, width * rows).reshape(rows, width)

    def cell(row: int, name: str, dtype: str) -> Any:
        offset, _ = columns[name]
        return np.frombuffer(table[row, offset:offset + np.dtype(dtype).itemsize].tobytes(), dtype)[0]

    stored_at = {name: _descriptors(table, *columns[name], heap) for name in
                 ("COMPRESSED_DATA", "GZIP_COMPRESSED_DATA", "UNCOMPRESSED_DATA") if name in columns}
    corners = np.stack(np.unravel_index(np.arange(rows), grid, order="F"), axis=1) * tiles
    shapes = np.minimum(corners + tiles, axes) - corners
    counts = shapes.prod(axis=1)
    begins, lengths = stored_at.get("COMPRESSED_DATA", (None, np.zeros(rows, np.int64)))
    decoded = None
    if method == "RICE_1" and (lengths > 0).all():  # every tile at once, one kernel call
        bytepix = _zval(h, "BYTEPIX", 4, where)
        decoded = _as_stored(rice_decode_tiles(data, begins, lengths, counts, bytepix, _zval(h, "BLOCKSIZE", 32, where),
                                               where), bytepix, stored)
        if not quantized and tiles[0] == axes[0] and all(t == 1 for t in tiles[1:]):
            return _scaled(decoded.reshape(axes[::-1]), h, zbitpix, where)  # tiles are the image's rows, in order
        first = np.concatenate([[0], np.cumsum(counts)])

    def stored_bytes(name: str, row: int) -> bytes:
        b, n = stored_at[name]
        return data[b[row]:b[row] + n[row]]

    image = np.empty(axes[::-1], out_type)
    for row in range(rows):
        box = tuple(slice(c, c + n) for c, n in zip(corners[row].tolist(), shapes[row].tolist()))
        count = int(counts[row])
        what = f"{where}, tile {row + 1}"
        if lengths[row] > 0:
            pixels = decoded[first[row]:first[row + 1]] if decoded is not None else \
                _decompress(method, stored_bytes("COMPRESSED_DATA", row), count, stored, h, what)
            if quantized:
                pixels = _dequantize(pixels, row, h, columns, cell, dither, what)
        elif "GZIP_COMPRESSED_DATA" in stored_at and stored_at["GZIP_COMPRESSED_DATA"][1][row] > 0:
            pixels = _decompress("GZIP_1", stored_bytes("GZIP_COMPRESSED_DATA", row), count, out_type, h, what)
        elif "UNCOMPRESSED_DATA" in stored_at:
            pixels = _decompress("NOCOMPRESS", stored_bytes("UNCOMPRESSED_DATA", row), count, out_type, h, what)
        else:
            raise FitsError(f"{what}: no data stored for the tile")
        with np.errstate(over="ignore"):  # a dequantized value past float32's range is stored as inf
            image[box[::-1]] = pixels.reshape(tuple(shapes[row][::-1].tolist()))
    return _scaled(image, h, zbitpix, where)


def _scaled(image: np.ndarray, h: dict, zbitpix: int, where: str) -> np.ndarray:
    """An integer image's ``BSCALE``/``BZERO`` applied (floats are returned as they are)."""
    if zbitpix in _FLOAT:
        return image
    bscale, bzero = header_number(h, "BSCALE", 1, where), header_number(h, "BZERO", 0, where)
    return scale_values(image, bscale, bzero, equivalent_dtype(zbitpix, bscale, bzero))


#: Quantized value that SUBTRACTIVE_DITHER_2 writes for pixels that were exactly 0.
_ZERO_VALUE = -2147483646
_RANDOMS = 10000


@functools.lru_cache(maxsize=1)
def _dither_table() -> np.ndarray:
    """The standard's 10,000 uniform values (Park and Miller's generator), in float32 as CFITSIO keeps them."""
    seed, out = 1.0, np.empty(_RANDOMS, np.float32)
    for k in range(_RANDOMS):
        temp = 16807.0 * seed
        seed = temp - 2147483647.0 * int(temp / 2147483647.0)
        out[k] = seed / 2147483647.0
    assert int(seed) == 1043618065  # the check value the standard gives
    return out


def _dither_offsets(tile: int, zdither0: int, count: int) -> np.ndarray:
    """The dither value of each of the ``count`` pixels of 0-based ``tile``."""
    table = _dither_table()
    seed = (tile + zdither0 - 1) % _RANDOMS
    parts, left = [], count
    while left > 0:
        start = int(table[seed] * 500)
        part = table[start:start + left]
        parts.append(part)
        left -= len(part)
        seed = (seed + 1) % _RANDOMS
    return np.concatenate(parts).astype(np.float64) if parts else np.zeros(0)


def _dequantize(pixels: np.ndarray, row: int, h: dict, columns: dict, cell: Callable, dither: str,
                where: str) -> np.ndarray:
    """``ZSCALE * (q - dither + 0.5) + ZZERO`` of a quantized tile (``ZSCALE * q + ZZERO`` without dither);
    ``ZBLANK`` values become NaN, and with SUBTRACTIVE_DITHER_2 the zero marker becomes 0."""
    def value(name: str, default: Any = None) -> Any:
        return cell(row, name, ">f8" if name != "ZBLANK" else ">i4") if name in columns else h.get(name, default)

    scale, zero, blank = value("ZSCALE"), value("ZZERO", 0.0), value("ZBLANK")
    if not all(isinstance(v, (int, float, np.number)) for v in (scale, zero)):
        raise FitsError(f"{where}: ZSCALE and ZZERO must be numbers, got {scale!r}, {zero!r}")
    scale, zero = float(scale), float(zero)
    q = pixels.astype(np.float64)
    if dither == "NO_DITHER":
        out = q * scale + zero
    else:
        out = (q - _dither_offsets(row, header_int(h, "ZDITHER0", 1, where), len(q)) + 0.5) * scale + zero
        if dither == "SUBTRACTIVE_DITHER_2":
            out[pixels == _ZERO_VALUE] = 0.0
    if blank is not None:
        out[pixels == int(blank)] = np.nan
    return out
