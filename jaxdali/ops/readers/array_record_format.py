"""The index of an ArrayRecord file: where each chunk of records starts, read without the array-record library.

An ArrayRecord file is a Riegeli file (``riegeli_format``) whose record chunks are followed by a
footer chunk and, in the file's last 64 KiB block, a postscript chunk. The postscript (uncompressed,
three copies of one small message) gives the footer's offset and the format's magic number; the
footer's first record describes the file (format version, number of chunks and of records) and each
further record locates one chunk of records: its file offset, decoded size and number of records.
All of these messages are protobuf, parsed with ``protowire``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from jaxdali.ops.readers import protowire, storage
from jaxdali.ops.readers.riegeli_format import BLOCK_SIZE, FormatError, decode_simple, read_chunk

__all__ = ["ArrayRecordIndex", "read_index"]

#: The postscript's magic number, as array-record writes it.
MAGIC = 0x71930E704FDAE05E
_POSTSCRIPT_READ = 4096  # file bytes read at once for the postscript chunk (a few dozen bytes of data)


class ArrayRecordIndex(NamedTuple):
    """The chunks of records of one file, in file order, and where its footer starts."""

    chunk_begin: np.ndarray  # int64: file offset of each chunk
    num_records: np.ndarray  # int64: records in each chunk
    decoded_size: np.ndarray  # int64: total size of each chunk's records
    footer_begin: int


def _messages(values: bytes, sizes: np.ndarray) -> protowire.Messages:
    ends = np.cumsum(sizes)
    buf, _, _ = protowire.join_records([values])
    return protowire.parse_batch(buf, ends - sizes, ends)


def read_index(path: str) -> ArrayRecordIndex:
    """The chunk index of the ArrayRecord file at ``path`` (local or fsspec URL).

    Raises `FormatError` for a file that is not a valid ArrayRecord file, and its subclass
    `UnsupportedChunk` when the footer is in an encoding not decoded here (snappy, a missing codec).
    """
    size = storage.file_size(path)
    if size < BLOCK_SIZE:
        raise FormatError(f"{size} bytes, shorter than the 64 KiB block of an ArrayRecord postscript")

    def read(offset: int, length: int) -> bytes:
        return storage.read_range(path, offset, length)

    postscript_begin = size - BLOCK_SIZE
    try:
        ps = _messages(*decode_simple(*read_chunk(read, postscript_begin, _POSTSCRIPT_READ)))
        footer_begin, magic = ps.last_varint(1), ps.last_varint(2)
    except (FormatError, protowire.ProtoError) as e:
        raise FormatError(f"no ArrayRecord postscript in the last 64 KiB block (bad or truncated file): {e}") from None
    valid = np.flatnonzero(magic == MAGIC)
    if not len(valid):
        raise FormatError("the postscript lacks the ArrayRecord magic number (not an ArrayRecord file)")
    footer_begin = int(footer_begin[valid[0]])
    if footer_begin >= postscript_begin:
        raise FormatError(f"the postscript puts the footer at byte {footer_begin}, past the postscript")
    footer = _messages(*decode_simple(*read_chunk(read, footer_begin, postscript_begin - footer_begin)))
    try:
        start, length, present = footer.part(0, 1).bytes_field(1)
        meta = protowire.parse_batch(footer.buf, start, start + length)
        num_chunks, num_records = int(meta.last_varint(2)[0]), int(meta.last_varint(3)[0])
        chunks = footer.part(1, footer.n - 1)
        chunk_begin, decoded, counts = (chunks.last_varint(k).astype(np.int64) for k in (1, 2, 3))
    except protowire.ProtoError as e:
        raise FormatError(f"malformed footer record {e.message}: {e}") from None
    if not present[0] or footer.n - 1 != num_chunks or int(counts.sum()) != num_records:
        raise FormatError(f"the footer lists {footer.n - 1} chunks of {int(counts.sum())} records, its metadata "
                          f"says {num_chunks} chunks of {num_records}")
    if len(chunk_begin) and (np.any(np.diff(chunk_begin) <= 0) or chunk_begin[-1] >= footer_begin or
                             chunk_begin[0] < 0):
        raise FormatError("the footer's chunk offsets are not increasing offsets before the footer")
    return ArrayRecordIndex(chunk_begin, counts, decoded, footer_begin)
