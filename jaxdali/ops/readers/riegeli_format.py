"""The Riegeli/records container that ArrayRecord files are made of: blocks, chunks, simple chunks.

A Riegeli file is a sequence of chunks, interrupted by a 24-byte block header at every multiple of
64 KiB of the file (also inside a chunk, even inside its 40-byte header). A chunk header gives the
size of the chunk's data, its type, its number of records and their total decoded size. A simple
chunk (type ``'r'``) holds a compression byte, the byte size of the record-size table (varint),
that table (one varint per record), then the concatenated record values; with compression, each of
the two blocks starts with its decoded size (varint) followed by one zstd frame or brotli stream.

Decoded here: simple chunks, uncompressed or compressed with zstd (the ``zstandard`` package) or
brotli (the ``brotli`` package). Transposed chunks (``'t'``, a protobuf-aware column layout),
snappy and codecs whose package is missing raise `UnsupportedChunk`, so that the caller can hand
the chunk to the array-record library. The format's HighwayHash checksums are not verified: every
size is checked against the others instead, and corrupt compressed data fails in the decompressor.
"""

from __future__ import annotations

import functools
import importlib
import threading
from typing import Callable, NamedTuple

import numpy as np

from jaxdali.ops.readers import protowire

__all__ = ["BLOCK_SIZE", "CHUNK_HEADER_SIZE", "FormatError", "UnsupportedChunk", "ChunkHeader", "SimpleChunks",
           "physical_size", "strip_block_headers", "read_chunk", "decode_simple", "decode_simple_batch"]

BLOCK_SIZE = 1 << 16
BLOCK_HEADER_SIZE = 24
_USABLE_BLOCK_SIZE = BLOCK_SIZE - BLOCK_HEADER_SIZE
CHUNK_HEADER_SIZE = 40
SIMPLE_CHUNK = ord("r")
NO_COMPRESSION, BROTLI, ZSTD = 0, ord("b"), ord("z")
_HEADER = np.arange(CHUNK_HEADER_SIZE)


class FormatError(ValueError):
    """Bytes that are not a valid Riegeli chunk (a truncated or corrupt file)."""


class UnsupportedChunk(FormatError):
    """A valid chunk of a kind this module does not decode (transposed, snappy, missing codec package)."""


class ChunkHeader(NamedTuple):
    data_size: int
    chunk_type: int
    num_records: int
    decoded_size: int


def physical_size(begin: int, size: int) -> int:
    """File bytes that ``size`` bytes of chunk content take from file offset ``begin``, block headers included."""
    return size + (size + (begin + _USABLE_BLOCK_SIZE - 1) % BLOCK_SIZE) // _USABLE_BLOCK_SIZE * BLOCK_HEADER_SIZE


def strip_block_headers(data: bytes, begin: int) -> bytes:
    """The chunk content of ``data``, file bytes read from offset ``begin``: without the block headers inside."""
    boundary = -(-begin // BLOCK_SIZE) * BLOCK_SIZE
    if boundary >= begin + len(data):
        return data
    parts, pos = [], begin
    while boundary < begin + len(data):
        parts.append(data[pos - begin:boundary - begin])
        pos, boundary = boundary + BLOCK_HEADER_SIZE, boundary + BLOCK_SIZE
    parts.append(data[pos - begin:])
    return b"".join(parts)


def parse_header(raw: bytes) -> ChunkHeader:
    """The fields of a 40-byte chunk header."""
    return ChunkHeader(int.from_bytes(raw[8:16], "little"), raw[24], int.from_bytes(raw[25:32], "little"),
                       int.from_bytes(raw[32:40], "little"))


def read_chunk(read: Callable[[int, int], bytes], begin: int, first_read: int = 0) -> tuple[ChunkHeader, bytes]:
    """The header and data of the chunk at file offset ``begin``; ``read(offset, length)`` reads file bytes.

    ``first_read``: file bytes worth reading at once (the whole chunk when known), else the header first.
    """
    raw = read(begin, max(first_read, physical_size(begin, CHUNK_HEADER_SIZE)))
    content = strip_block_headers(raw, begin)
    if len(content) < CHUNK_HEADER_SIZE:
        raise FormatError(f"the file ends inside the chunk header at byte {begin}")
    header = parse_header(content[:CHUNK_HEADER_SIZE])
    end = CHUNK_HEADER_SIZE + header.data_size
    if len(content) < end:
        content = strip_block_headers(read(begin, physical_size(begin, end)), begin)
        if len(content) < end:
            raise FormatError(f"the chunk at byte {begin} holds {header.data_size} bytes of data, but the file ends "
                              f"after {len(content) - CHUNK_HEADER_SIZE}")
    return header, content[CHUNK_HEADER_SIZE:end]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    for i in range(pos, min(pos + 10, len(data))):
        value |= (data[i] & 0x7F) << shift
        if data[i] < 0x80:
            return value, i + 1
        shift += 7
    raise FormatError(f"truncated varint at byte {pos} of a chunk's data")


@functools.lru_cache(maxsize=None)
def _module(name: str):
    """The optional codec package ``name``, or None when it is not installed."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_zstd_local = threading.local()


def _zstd_decompressor():
    """This thread's zstd decompression context (one context may not serve two threads at once)."""
    d = getattr(_zstd_local, "decompressor", None)
    if d is None:
        d = _zstd_local.decompressor = _module("zstandard").ZstdDecompressor()
    return d


def codec_available(compression: int) -> bool:
    """Whether chunks of this compression byte can be decoded here."""
    return compression == NO_COMPRESSION or (compression == ZSTD and _module("zstandard") is not None) or \
        (compression == BROTLI and _module("brotli") is not None)


def _decompress(compression: int, block: bytes) -> bytes:
    if compression == NO_COMPRESSION:
        return block
    if not codec_available(compression):
        raise UnsupportedChunk(f"compression {chr(compression)!r}")
    size, pos = _varint(block, 0)
    try:
        if compression == ZSTD:
            out = _zstd_decompressor().decompress(block[pos:], max_output_size=size)
        else:
            out = _module("brotli").decompress(bytes(block[pos:]))
    except Exception as e:  # the codecs' own error types
        raise FormatError(f"corrupt {'zstd' if compression == ZSTD else 'brotli'} data: {e}") from None
    if len(out) != size:
        raise FormatError(f"a compressed block decodes to {len(out)} bytes, its prefix says {size}")
    return out


def _sizes(table: np.ndarray, num_records: int) -> np.ndarray:
    """The record sizes of a decoded size table (``num_records`` varints back to back)."""
    ends = np.flatnonzero(table < 0x80)
    if len(ends) != num_records or (num_records and ends[-1] != len(table) - 1):
        raise FormatError(f"the size table does not hold {num_records} sizes")
    return protowire.decode_varints(table, ends, 0).astype(np.int64)


def decode_simple(header: ChunkHeader, data: bytes) -> tuple[bytes, np.ndarray]:
    """(concatenated values, size of each record) of a chunk; `UnsupportedChunk` for kinds not decoded here."""
    if header.chunk_type != SIMPLE_CHUNK:
        raise UnsupportedChunk(f"chunk type {chr(header.chunk_type)!r}")
    if not data:
        raise FormatError("a simple chunk without data")
    table_size, pos = _varint(data, 1)
    if pos + table_size > len(data):
        raise FormatError(f"the size table ({table_size} bytes) overruns the chunk's {len(data)} bytes")
    compression = data[0]
    values = _decompress(compression, data[pos + table_size:])
    sizes = _sizes(np.frombuffer(_decompress(compression, data[pos:pos + table_size]), np.uint8), header.num_records)
    if len(values) != header.decoded_size or int(sizes.sum()) != header.decoded_size:
        raise FormatError(f"the records' sizes add up to {int(sizes.sum())} bytes, the values are {len(values)} and "
                          f"the header says {header.decoded_size}")
    return values, sizes


class SimpleChunks(NamedTuple):
    """What `decode_simple_batch` decoded: for each chunk ``j`` where ``done[j]``, its values
    ``values[j]`` (uint8) and record sizes ``sizes[j]`` (None for a chunk of one record)."""

    done: np.ndarray
    values: list
    sizes: list


def decode_simple_batch(buf: np.ndarray, pos: np.ndarray, begin: np.ndarray, avail: np.ndarray,
                        parallel_for: Callable[[Callable[[int, int], None], int], None],
                        piece_bytes: int = 1 << 18) -> SimpleChunks:
    """Decodes many chunks at once: chunk ``j`` starts at ``buf[pos[j]]`` (file offset ``begin[j]``) and
    ``avail[j]`` bytes of the file from there are in ``buf``.

    Handled here: simple chunks, uncompressed or zstd, whose header and data lie inside one block and
    inside ``avail`` (nearly all chunks of small records). The others are left undone for `read_chunk`
    and `decode_simple`. The zstd blocks are decompressed without the GIL, in one call per piece of
    about ``piece_bytes`` decoded bytes, the pieces spread over ``parallel_for``.
    """
    n = len(pos)
    done = np.zeros(n, bool)
    values: list = [None] * n
    sizes: list = [None] * n
    in_block = BLOCK_SIZE - begin % BLOCK_SIZE
    j = np.flatnonzero((begin % BLOCK_SIZE != 0) & (np.minimum(avail, in_block) >= CHUNK_HEADER_SIZE + 10) &
                       (pos + CHUNK_HEADER_SIZE + 10 <= len(buf)))
    hdr = buf[pos[j, None] + _HEADER]
    data_size = hdr[:, 8:16].copy().view("<u8").ravel().astype(np.int64)
    chunk_type = hdr[:, 24]
    num_records = (hdr[:, 24:32].copy().view("<u8").ravel() >> np.uint64(8)).astype(np.int64)
    decoded = hdr[:, 32:40].copy().view("<u8").ravel().astype(np.int64)
    data = pos[j] + CHUNK_HEADER_SIZE
    end = data + data_size
    compression = buf[np.minimum(data, len(buf) - 1)]
    ok = ((chunk_type == SIMPLE_CHUNK) & (data_size > 0) & (CHUNK_HEADER_SIZE + data_size <= np.minimum(
        avail[j], in_block[j])) & ((compression == NO_COMPRESSION) | ((compression == ZSTD) & codec_available(ZSTD))))
    j, data, end, num_records, decoded, compression = (a[ok] for a in (j, data, end, num_records, decoded, compression))
    try:
        table_size, length = protowire.varints_at(buf, data + 1, end, j, "size-table size")
    except protowire.ProtoError:
        return SimpleChunks(done, values, sizes)  # the per-chunk path names the bad chunk
    table = data + 1 + length
    table_end = table + table_size.astype(np.int64)
    ok = table_end <= end
    j, table, table_end, end, num_records, decoded, compression = (
        a[ok] for a in (j, table, table_end, end, num_records, decoded, compression))
    # The blocks to decode: each zstd chunk's values, then the size tables of its multi-record chunks.
    zstd = np.flatnonzero(compression == ZSTD)
    many = zstd[num_records[zstd] > 1]
    block_rows = np.concatenate((zstd, many))
    block_start = np.concatenate((table_end[zstd], table[many]))
    block_end = np.concatenate((end[zstd], table_end[many]))
    try:
        expect, length = protowire.varints_at(buf, block_start, block_end, j[block_rows], "block size")
    except protowire.ProtoError:
        return SimpleChunks(done, values, sizes)
    expect = expect.astype(np.int64)
    if np.any(expect[:len(zstd)] != decoded[zstd]):
        return SimpleChunks(done, values, sizes)
    blocks = _decompress_frames(buf, block_start + length, block_end, expect, parallel_for, piece_bytes)
    tables: dict[int, np.ndarray] = {}
    for k, row in enumerate(block_rows.tolist()):
        if k < len(zstd):
            values[int(j[row])] = blocks[k]
        else:
            tables[row] = blocks[k]
    for row in np.flatnonzero(compression == NO_COMPRESSION).tolist():
        values[int(j[row])] = buf[table_end[row]:end[row]]
        if num_records[row] > 1:
            tables[row] = buf[table[row]:table_end[row]]
    for row, raw in tables.items():
        if raw is not None:
            try:
                sizes[int(j[row])] = _sizes(raw, int(num_records[row]))
            except FormatError:
                pass  # left undone: the per-chunk path names the bad chunk
    for row, c in enumerate(j.tolist()):
        v, s = values[c], sizes[c]
        if v is not None and len(v) == decoded[row] and (
                num_records[row] == 1 or (s is not None and int(s.sum()) == decoded[row])):
            done[c] = True
        else:
            values[c] = sizes[c] = None
    return SimpleChunks(done, values, sizes)


def _decompress_frames(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, expect: np.ndarray,
                       parallel_for: Callable[[Callable[[int, int], None], int], None],
                       piece_bytes: int) -> list:
    """The zstd frames ``buf[starts[i]:ends[i]]`` decompressed (each to ``expect[i]`` bytes), as uint8 arrays;
    a frame that fails gives None."""
    n = len(starts)
    if not n:
        return []
    zstandard = _module("zstandard")
    bounds = np.searchsorted(np.cumsum(expect), np.arange(1, -(-int(expect.sum()) // piece_bytes)) * piece_bytes)
    bounds = np.unique(np.concatenate(([0], bounds, [n])))
    out: list = [None] * n

    def work(lo: int, hi: int) -> None:
        for p in range(lo, hi):
            a, b = int(bounds[p]), int(bounds[p + 1])
            segments = np.stack((starts[a:b], ends[a:b] - starts[a:b]), axis=1).astype(np.uint64)
            try:
                result = _zstd_decompressor().multi_decompress_to_buffer(
                    zstandard.BufferWithSegments(buf, segments.tobytes()),
                    decompressed_sizes=expect[a:b].astype(np.uint64).tobytes())
            except zstandard.ZstdError:
                continue  # left None: the per-chunk path decodes these again and names the bad one
            for i in range(b - a):
                out[a + i] = np.frombuffer(result[i], np.uint8)

    pieces = len(bounds) - 1
    if pieces > 1:
        parallel_for(work, pieces)
    else:
        work(0, pieces)
    return out
