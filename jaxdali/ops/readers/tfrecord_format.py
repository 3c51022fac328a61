"""The TFRecord container and the ``tf.train.Example`` protobuf, without TensorFlow.

A TFRecord file is a sequence of records, each framed as::

    length: uint64 LE | masked crc32c(length): uint32 LE | data: length bytes | masked crc32c(data): uint32 LE

DALI's index file lists each record as an ``"<offset> <size>"`` line, ``size`` being the whole frame
(``length + 16``). An ``Example`` is ``Features features = 1``, a map ``string -> Feature`` stored as
repeated entries ``{key = 1, value = 2}``; a ``Feature`` holds one of ``bytes_list = 1``,
``float_list = 2`` or ``int64_list = 3``, each a ``repeated value = 1`` (numbers usually packed).
"""

from __future__ import annotations

import functools
import struct
from typing import Iterable, Mapping, Sequence

import numpy as np

from jaxdali.ops.readers.protowire import encode_field, encode_packed

__all__ = ["FRAME_OVERHEAD", "RecordError", "crc32c", "masked_crc32c", "frame", "scan_records", "parse_index",
           "check_frame", "read_varint", "decode_varints", "format_index", "parse_example", "encode_example",
           "write_tfrecord", "BYTES_LIST", "FLOAT_LIST", "INT64_LIST"]

#: Bytes a record's frame adds to its data (length, its CRC, the data's CRC).
FRAME_OVERHEAD = 16
_HEADER = struct.Struct("<QI")
_CRC_MASK_DELTA = 0xA282EAD8
#: Bytes combined per step of the vectorised CRC (tables of this many rows).
_CRC_CHUNK = 1024

BYTES_LIST, FLOAT_LIST, INT64_LIST = 1, 2, 3
_WIRE_VARINT, _WIRE_FIXED64, _WIRE_LEN, _WIRE_FIXED32 = 0, 1, 2, 5


class RecordError(ValueError):
    """A malformed record or index; the message names the file and the record."""


# -- CRC-32C ------------------------------------------------------------------------------------------
@functools.cache
def _crc_tables() -> np.ndarray:
    """``tables[k][b]``: the CRC register after byte ``b`` followed by ``k`` zero bytes (from a zero
    register, without the final inversion). Row 0 is the classic byte-at-a-time table."""
    reg = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        reg = np.where(reg & 1, (reg >> 1) ^ np.uint32(0x82F63B78), reg >> 1).astype(np.uint32)
    tables = np.empty((_CRC_CHUNK, 256), dtype=np.uint32)
    tables[0] = reg
    for k in range(1, _CRC_CHUNK):
        prev = tables[k - 1]
        tables[k] = (prev >> 8) ^ reg[prev & 0xFF]
    return tables


def crc32c(data: bytes | memoryview | np.ndarray) -> int:
    """CRC-32C (Castagnoli) of ``data``.

    The CRC is linear over GF(2): the register after a chunk is the XOR of each byte's contribution
    (a table lookup by the byte and its distance to the chunk's end) and of the incoming register's
    four bytes shifted through the chunk. All lookups are one gather; only the chunks are a loop.
    """
    tables = _crc_tables()
    buf = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1).view(np.uint8)
    n = len(buf)
    reg = 0xFFFFFFFF
    if n == 0:
        return 0
    starts = np.arange(0, n, _CRC_CHUNK)
    lengths = np.minimum(_CRC_CHUNK, n - starts)
    # Distance of each byte to the end of its chunk.
    distance = (np.repeat(starts + lengths - 1, lengths) - np.arange(n))
    chunk_values = np.bitwise_xor.reduceat(tables[distance, buf], starts).tolist()
    for value, length in zip(chunk_values, lengths.tolist()):
        # The register's byte j meets the chunk's byte j, which is length-1-j bytes from the end
        # (a register byte beyond a short chunk's end shifts by the leftover plain right shift).
        shifted = 0
        for j in range(4):
            byte = (reg >> (8 * j)) & 0xFF
            if j < length:
                shifted ^= int(tables[length - 1 - j, byte])
            else:
                shifted ^= byte << (8 * (j - length))
        reg = value ^ shifted
    return reg ^ 0xFFFFFFFF


def masked_crc32c(data: bytes | memoryview | np.ndarray) -> int:
    """The masked CRC-32C that TFRecord frames store."""
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _CRC_MASK_DELTA) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
    """``data`` framed as one TFRecord record."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc32c(length)) + data + struct.pack("<I", masked_crc32c(data))


def encode_example(features: Mapping[str, bytes | str | Sequence[bytes] | np.ndarray | Sequence[int] | Sequence[float]]
                   ) -> bytes:
    """A serialized ``tf.train.Example`` (what ``tf.train.Example(...).SerializeToString()`` gives).

    Values: ``bytes``/``str`` or a list of them -> bytes_list; integer arrays or lists -> int64_list;
    floating-point ones -> float_list (as float32).
    """
    entries = []
    for name, value in features.items():
        if isinstance(value, (bytes, str)):
            value = [value]
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], (bytes, str)):
            strings = [v.encode() if isinstance(v, str) else bytes(v) for v in value]
            feature = encode_field(BYTES_LIST, b"".join(encode_field(1, v) for v in strings))
        else:
            array = np.asarray(value).reshape(-1)
            if array.dtype.kind == "f":
                feature = encode_field(FLOAT_LIST, encode_packed(1, array.tolist(), "float"))
            elif array.dtype.kind in "iub" or array.size == 0:
                feature = encode_field(INT64_LIST, encode_packed(1, array.tolist(), "varint"))
            else:
                raise TypeError(f"encode_example: feature {name!r} has values of type {array.dtype}")
        entries.append(encode_field(1, encode_field(1, name.encode()) + encode_field(2, feature)))
    return encode_field(1, b"".join(entries))


def write_tfrecord(path: str, records: Iterable[bytes]) -> np.ndarray:
    """Writes ``records`` framed as a TFRecord file; returns their ``(offset, size)`` index rows."""
    rows = []
    offset = 0
    with open(path, "wb") as f:
        for record in records:
            framed = frame(record)
            f.write(framed)
            rows.append((offset, len(framed)))
            offset += len(framed)
    return np.asarray(rows, dtype=np.int64).reshape(-1, 2)


# -- records and index ------------------------------------------------------------------------------
def scan_records(blob: bytes | memoryview, where: str) -> np.ndarray:
    """``(offset, size)`` rows of every record in a whole TFRecord file's bytes (sizes include the frame).

    Raises ``RecordError`` naming ``where`` and the record for a frame that runs past the end.
    """
    rows = []
    pos, end = 0, len(blob)
    while pos < end:
        if end - pos < FRAME_OVERHEAD:
            raise RecordError(f"{where}: record {len(rows)} at offset {pos} is truncated: {end - pos} bytes left, "
                              f"a record frame has at least {FRAME_OVERHEAD}")
        (length,) = struct.unpack_from("<Q", blob, pos)
        size = length + FRAME_OVERHEAD
        if pos + size > end:
            raise RecordError(f"{where}: record {len(rows)} at offset {pos} is truncated: its header says "
                              f"{length} data bytes, the file has {end - pos - FRAME_OVERHEAD} left")
        rows.append((pos, size))
        pos += size
    return np.asarray(rows, dtype=np.int64).reshape(-1, 2)


def format_index(rows: np.ndarray) -> str:
    """DALI's index text: one ``"<offset> <size>"`` line per record."""
    return "".join(f"{o} {s}\n" for o, s in rows.tolist())


def parse_index(text: bytes, where: str, file_size: int, file_name: str) -> np.ndarray:
    """``(offset, size)`` rows of an index file's text, checked against its TFRecord file's size."""
    try:
        values = np.array(text.split(), dtype=np.int64)
    except ValueError:
        raise RecordError(f"{where}: not a TFRecord index (expected '<offset> <size>' lines of integers)") from None
    if len(values) % 2:
        raise RecordError(f"{where}: not a TFRecord index (an odd number of integers; expected '<offset> <size>' "
                          f"lines)")
    rows = values.reshape(-1, 2)
    bad = np.flatnonzero((rows[:, 0] < 0) | (rows[:, 1] < FRAME_OVERHEAD) | (rows.sum(axis=1) > file_size))
    if len(bad):
        i = int(bad[0])
        raise RecordError(f"{where}: stale or wrong index for {file_name!r}: record {i} (offset {rows[i, 0]}, size "
                          f"{rows[i, 1]}) does not fit the {file_size}-byte file; rebuild it with "
                          f"`python -m jaxdali.tools.tfrecord2idx`")
    return rows


def check_frame(record: memoryview, where: str, verify_crc: bool) -> memoryview:
    """The data of one framed record, after checking its length (and CRCs if asked)."""
    if len(record) < FRAME_OVERHEAD:
        raise RecordError(f"{where}: truncated: {len(record)} bytes, a record frame has at least {FRAME_OVERHEAD}")
    length, length_crc = _HEADER.unpack_from(record, 0)
    if length + FRAME_OVERHEAD != len(record):
        raise RecordError(f"{where}: the record's header says {length} data bytes but the index gives it "
                          f"{len(record) - FRAME_OVERHEAD} (a stale index?); rebuild the index with "
                          f"`python -m jaxdali.tools.tfrecord2idx`")
    data = record[12:12 + length]
    if verify_crc:
        (data_crc,) = struct.unpack_from("<I", record, 12 + length)
        if masked_crc32c(record[:8]) != length_crc or masked_crc32c(data) != data_crc:
            raise RecordError(f"{where}: CRC mismatch (the record is corrupted)")
    return data


# -- protobuf ------------------------------------------------------------------------------------------
def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``buf[pos]`` and the position after it."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + 1
        shift += 7


def _skip(buf: bytes, pos: int, wire: int) -> int:
    if wire == _WIRE_VARINT:
        return read_varint(buf, pos)[1]
    if wire == _WIRE_LEN:
        n, pos = read_varint(buf, pos)
        return pos + n
    if wire == _WIRE_FIXED32:
        return pos + 4
    if wire == _WIRE_FIXED64:
        return pos + 8
    raise ValueError(f"unsupported protobuf wire type {wire}")


def decode_varints(raw: np.ndarray) -> np.ndarray:
    """A packed run of varints as int64 (two's complement, as protobuf stores negative int64)."""
    if len(raw) == 0:
        return np.zeros(0, dtype=np.int64)
    last = raw < 0x80
    if last.all():
        return raw.astype(np.int64)
    if not last[-1]:
        raise ValueError("a packed varint runs past the end of its field")
    ends = np.flatnonzero(last)
    starts = np.concatenate(([0], ends[:-1] + 1))
    shift = (np.arange(len(raw)) - np.repeat(starts, ends - starts + 1)) * 7
    parts = (raw & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
    return np.bitwise_or.reduceat(parts, starts).view(np.int64)


def _list_values(buf: bytes, start: int, end: int, kind: int) -> np.ndarray | list:
    """The values of a BytesList/FloatList/Int64List message in ``buf[start:end]``: a list of
    memoryviews for bytes, an array otherwise. Packed and unpacked encodings are both accepted."""
    view = memoryview(buf)
    strings: list = []
    chunks: list = []
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if field != 1:
            pos = _skip(buf, pos, wire)
            continue
        if wire == _WIRE_LEN:
            n, pos = read_varint(buf, pos)
            if kind == BYTES_LIST:
                strings.append(view[pos:pos + n])
            elif kind == FLOAT_LIST:
                chunks.append(np.frombuffer(buf, dtype="<f4", count=n // 4, offset=pos))
            else:
                chunks.append(decode_varints(np.frombuffer(buf, dtype=np.uint8, count=n, offset=pos)))
            pos += n
        elif wire == _WIRE_FIXED32 and kind == FLOAT_LIST:
            chunks.append(np.frombuffer(buf, dtype="<f4", count=1, offset=pos))
            pos += 4
        elif wire == _WIRE_VARINT and kind == INT64_LIST:
            value, pos = read_varint(buf, pos)
            chunks.append(np.array([value], dtype=np.uint64).view(np.int64))
        else:
            raise ValueError(f"unexpected wire type {wire} in a feature list")
    if pos != end:
        raise ValueError("a feature list runs past the end of its field")
    if kind == BYTES_LIST:
        return strings
    if len(chunks) == 1:
        return chunks[0]
    return np.concatenate(chunks) if chunks else np.zeros(0, np.float32 if kind == FLOAT_LIST else np.int64)


def parse_example(buf: bytes, wanted: Mapping[bytes, int]) -> dict[bytes, tuple[int, np.ndarray | list]]:
    """The features of a serialized ``tf.train.Example`` whose names are in ``wanted``, as
    ``name -> (list kind, values)``; the value arrays are views of ``buf``.

    Raises ``ValueError`` for bytes that are not an Example.
    """
    out: dict[bytes, tuple[int, np.ndarray | list]] = {}
    end = len(buf)
    pos = 0
    try:
        while pos < end:
            key, pos = read_varint(buf, pos)
            if key != 0x0A:  # Example.features
                pos = _skip(buf, pos, key & 7)
                continue
            n, pos = read_varint(buf, pos)
            features_end = pos + n
            while pos < features_end:
                key, pos = read_varint(buf, pos)
                n, pos = read_varint(buf, pos)
                entry_end = pos + n
                if key != 0x0A:  # Features.feature map entry
                    pos = entry_end
                    continue
                name = None
                value_span = None
                while pos < entry_end:
                    key, pos = read_varint(buf, pos)
                    n, pos = read_varint(buf, pos)
                    if key == 0x0A:
                        name = bytes(buf[pos:pos + n])
                    elif key == 0x12:
                        value_span = (pos, pos + n)
                    pos += n
                if name in wanted and value_span is not None:
                    out[name] = _feature(buf, *value_span)
                elif name in wanted:
                    out[name] = (0, [])
            if pos != features_end:
                raise ValueError("the feature map runs past the end of the Example")
    except IndexError:
        raise ValueError("the record ends inside a field (not a tf.train.Example?)") from None
    if pos != end:
        raise ValueError("a field runs past the end of the record (not a tf.train.Example?)")
    return out


def _feature(buf: bytes, start: int, end: int) -> tuple[int, np.ndarray | list]:
    if start == end:
        return 0, []  # a Feature with no list set
    key, pos = read_varint(buf, start)
    kind, wire = key >> 3, key & 7
    if wire != _WIRE_LEN or kind not in (BYTES_LIST, FLOAT_LIST, INT64_LIST):
        raise ValueError(f"a Feature holds field {kind} (wire type {wire}); expected bytes_list, float_list or "
                         f"int64_list")
    n, pos = read_varint(buf, pos)
    return kind, _list_values(buf, pos, pos + n, kind)
