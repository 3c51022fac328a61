"""The TFRecord container and the ``tf.train.Example`` protobuf, without TensorFlow.

A TFRecord file is a sequence of records, each framed as::

    length: uint64 LE | masked crc32c(length): uint32 LE | data: length bytes | masked crc32c(data): uint32 LE

DALI's index file lists each record as an ``"<offset> <size>"`` line, ``size`` being the whole frame
(``length + 16``). An ``Example`` is ``Features features = 1``, a map ``string -> Feature`` stored as
repeated entries ``{key = 1, value = 2}``; a ``Feature`` holds one of ``bytes_list = 1``,
``float_list = 2`` or ``int64_list = 3``, each a ``repeated value = 1`` (numbers usually packed).
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from typing import Iterable, Mapping, Sequence

import numpy as np

__all__ = ["FRAME_OVERHEAD", "RecordError", "FeatureSpans", "crc32c", "masked_crc32c", "frame", "scan_records",
           "parse_index", "check_frame", "decode_varints", "locate_features",
           "format_index", "parse_example", "encode_example", "write_tfrecord", "BYTES_LIST", "FLOAT_LIST", "INT64_LIST"]

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


def _encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 as two's complement, 10 bytes
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | _WIRE_LEN) + _encode_varint(len(payload)) + payload


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
            feature = _field(BYTES_LIST, b"".join(_field(1, v) for v in strings))
        else:
            array = np.asarray(value).reshape(-1)
            if array.dtype.kind == "f":
                feature = _field(FLOAT_LIST, _field(1, array.astype("<f4").tobytes()))
            elif array.dtype.kind in "iub" or array.size == 0:
                packed = b"".join(_encode_varint(int(v)) for v in array.tolist())
                feature = _field(INT64_LIST, _field(1, packed))
            else:
                raise TypeError(f"encode_example: feature {name!r} has values of type {array.dtype}")
        entries.append(_field(1, _field(1, name.encode()) + _field(2, feature)))
    return _field(1, b"".join(entries))


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
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``buf[pos]`` and the position after it (a field header or length: 1-2 bytes)."""
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
        return _varint(buf, pos)[1]
    if wire == _WIRE_LEN:
        n, pos = _varint(buf, pos)
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
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if field != 1:
            pos = _skip(buf, pos, wire)
            continue
        if wire == _WIRE_LEN:
            n, pos = _varint(buf, pos)
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
            value, pos = _varint(buf, pos)
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
            key, pos = _varint(buf, pos)
            if key != 0x0A:  # Example.features
                pos = _skip(buf, pos, key & 7)
                continue
            n, pos = _varint(buf, pos)
            features_end = pos + n
            while pos < features_end:
                key, pos = _varint(buf, pos)
                n, pos = _varint(buf, pos)
                entry_end = pos + n
                if key != 0x0A:  # Features.feature map entry
                    pos = entry_end
                    continue
                name = None
                value_span = None
                while pos < entry_end:
                    key, pos = _varint(buf, pos)
                    n, pos = _varint(buf, pos)
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
    key, pos = _varint(buf, start)
    kind, wire = key >> 3, key & 7
    if wire != _WIRE_LEN or kind not in (BYTES_LIST, FLOAT_LIST, INT64_LIST):
        raise ValueError(f"a Feature holds field {kind} (wire type {wire}); expected bytes_list, float_list or "
                         f"int64_list")
    n, pos = _varint(buf, pos)
    return kind, _list_values(buf, pos, pos + n, kind)


# -- a batch of Examples at once -----------------------------------------------------------------------
class _Irregular(Exception):
    """A record not laid out the way TensorFlow writes Examples, or malformed."""


@dataclasses.dataclass
class FeatureSpans:
    """Where one feature's values sit in a batch buffer, per record (see ``locate_features``).

    Attributes:
      kind: BYTES_LIST, FLOAT_LIST or INT64_LIST; 0 where the record lacks the feature.
      start, stop: the packed numbers, or the first string, in the buffer.
      more_strings: the record's bytes list holds more than one string.
      empty_list: the record's value list is empty.
    """

    kind: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    more_strings: np.ndarray
    empty_list: np.ndarray


@dataclasses.dataclass
class _Entry:
    """The byte layout of one map entry of a template record, relative to the entry's first byte.

    ``offsets`` are the bytes to check: ``(byte & mask) == expected`` (constant tags and name bytes
    are checked whole, varint bytes by their continuation bit alone, which fixes each varint's width).
    ``weights`` decode the entry's length varints from those bytes: entry, value, list, first item.
    """

    offsets: np.ndarray
    mask: np.ndarray
    expected: np.ndarray
    weights: np.ndarray
    header: int  # bytes before the entry's content (tag + length varint)
    feature: int  # index of the wanted feature it holds, or -1
    kind: int = 0
    key_size: int = 0  # bytes of the key field (tag, length, name)
    value_header: int = 0  # tag + length varint of the value field
    list_header: int = 0  # kind tag + length varint of the list
    item_header: int = 0  # tag + length varint of the first item; 0 for an empty list
    payload: int = 0  # where the first item's bytes start


class _LayoutBuilder:
    def __init__(self, data: bytes):
        self.data = data
        self.offsets: list[int] = []
        self.mask: list[int] = []
        self.expected: list[int] = []
        self.varints: list[list[int]] = []

    def const(self, pos: int, base: int) -> int:
        self.offsets.append(pos - base)
        self.mask.append(0xFF)
        self.expected.append(self.data[pos])
        return self.data[pos]

    def varint(self, pos: int, base: int) -> tuple[int, int]:
        value, shift, positions = 0, 0, []
        while True:
            b = self.data[pos]
            self.offsets.append(pos - base)
            self.mask.append(0x80)
            self.expected.append(b & 0x80)
            positions.append(pos - base)
            value |= (b & 0x7F) << shift
            pos += 1
            if b < 0x80:
                break
            shift += 7
            if shift > 56:
                raise _Irregular
        self.varints.append(positions)
        return value, pos

    def entry(self, base: int, **fields) -> _Entry:
        where = {o: t for t, o in enumerate(self.offsets)}
        weights = np.zeros((len(self.offsets), 4), dtype=np.int64)
        for v, positions in enumerate(self.varints):
            for k, o in enumerate(positions):
                weights[where[o], v] = 1 << (7 * k)
        return _Entry(np.asarray(self.offsets, np.int64), np.asarray(self.mask, np.uint8),
                      np.asarray(self.expected, np.uint8), weights, **fields)


def _learn_layout(data: bytes, start: int, stop: int, want: Mapping[bytes, int]) -> tuple[int, list[_Entry]]:
    """The layout of the record ``data[start:stop]``: the width of its features length and its entries."""
    if start == stop:
        raise _Irregular
    b = _LayoutBuilder(data)
    if b.const(start, start) != 0x0A:
        raise _Irregular
    length, p = b.varint(start + 1, start)
    if p + length != stop:
        raise _Irregular
    width = p - start - 1
    entries = []
    while p < stop:
        base = p
        b = _LayoutBuilder(data)
        if b.const(p, base) != 0x0A:
            raise _Irregular
        entry_len, p = b.varint(p + 1, base)
        header = p - base
        if b.const(p, base) != 0x0A:
            raise _Irregular
        key_len, q = _varint(data, p + 1)
        for k in range(p + 1, q + key_len):  # the name's length and bytes: the same in every record
            b.const(k, base)
        name = data[q:q + key_len]
        q += key_len
        key_size = q - p
        j = want.get(name, -1)
        if j < 0:
            entries.append(b.entry(base, header=header, feature=-1))
            p = base + header + entry_len
            continue
        if b.const(q, base) != 0x12:
            raise _Irregular
        value_len, r = b.varint(q + 1, base)
        kind = b.const(r, base)
        if kind not in (0x0A, 0x12, 0x1A) or key_size + (r - q) + value_len != entry_len:
            raise _Irregular
        list_len, t = b.varint(r + 1, base)
        if (t - r) + list_len != value_len:
            raise _Irregular
        item_header = 0
        payload = t - base
        if list_len:
            if b.const(t, base) != 0x0A:
                raise _Irregular
            item_len, u = b.varint(t + 1, base)
            item_header = u - t
            payload = u - base
            if item_header + item_len > list_len or (item_header + item_len < list_len and kind != 0x0A):
                raise _Irregular
        entries.append(b.entry(base, header=header, feature=j, kind=kind >> 3, key_size=key_size,
                               value_header=r - q, list_header=t - r, item_header=item_header, payload=payload))
        p = base + header + entry_len
    if p != stop:
        raise _Irregular
    return width, entries


def _apply_layout(buf: np.ndarray, starts: np.ndarray, stops: np.ndarray, width: int, entries: list[_Entry],
                  spans: list[FeatureSpans], rows: np.ndarray) -> np.ndarray:
    """Reads records ``rows`` that share the layout; returns the mask of those that do."""
    start, stop = starts[rows], stops[rows]
    head = buf.take(start[:, None] + np.arange(1 + width), mode="clip")
    length = ((head[:, 1:] & 0x7F).astype(np.int64) << (7 * np.arange(width))).sum(axis=1)
    cont = np.r_[np.full(width - 1, 0x80), 0].astype(np.uint8)
    ok = (head[:, 0] == 0x0A) & ((head[:, 1:] & 0x80) == cont).all(axis=1) & (start + 1 + width + length == stop)
    base = start + 1 + width
    found = []
    for e in entries:
        got = buf.take(base[:, None] + e.offsets, mode="clip")  # positions past a bad record's end fail the check
        ok &= ((got & e.mask) == e.expected).all(axis=1)
        entry_len, value_len, list_len, item_len = ((got & 0x7F) @ e.weights).T
        if e.feature >= 0:
            ok &= e.key_size + e.value_header + value_len == entry_len
            ok &= e.list_header + list_len == value_len
            if e.item_header:
                ok &= e.item_header + item_len <= list_len if e.kind == BYTES_LIST else \
                    e.item_header + item_len == list_len
            else:
                ok &= list_len == 0
            found.append((e, base + e.payload, base + e.payload + item_len, e.item_header + item_len < list_len))
        base = base + e.header + entry_len
        ok &= base <= stop
    ok &= base == stop
    good = rows[ok]
    for e, first, end, more in found:
        span = spans[e.feature]
        span.kind[good] = e.kind
        span.start[good] = first[ok]
        span.stop[good] = end[ok]
        span.more_strings[good] = more[ok]
        span.empty_list[good] = e.item_header == 0
    return ok


#: How many record layouts one batch may learn before the rest is parsed record by record.
MAX_LAYOUTS = 4


def locate_features(data: bytes, starts: np.ndarray, stops: np.ndarray, names: list[bytes],
                    layouts: list | None = None) -> tuple[list[FeatureSpans], list[int]]:
    """Finds features ``names`` in the serialized Examples ``data[starts[i]:stops[i]]``, all records at once.

    Records written by the same program share their byte layout but for the lengths: the walk of one
    record gives the positions of every tag, name and length relative to its entries, and all records
    are then checked against that layout and read with a few NumPy operations per entry. Records
    that differ (another feature set, a length of another byte width) get a layout of their own, up
    to ``MAX_LAYOUTS`` new ones per call. ``layouts``, if given, holds the layouts to try first and
    receives the new ones (a cache across batches; the same ``names`` every call).

    Returns the spans per feature and the records left, laid out otherwise than TensorFlow writes
    them (map entries as key then value, numbers packed in one run) or malformed, for
    ``parse_example`` to read one by one.
    """
    n = len(starts)
    buf = np.frombuffer(data, dtype=np.uint8)
    spans = [FeatureSpans(np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, bool),
                          np.zeros(n, bool)) for _ in names]
    want = {name: j for j, name in enumerate(names)}
    todo = np.flatnonzero(starts != stops)
    known = layouts if layouts is not None else []
    for layout in list(known):
        if not len(todo):
            break
        todo = todo[~_apply_layout(buf, starts, stops, *layout, spans, todo)]
    irregular: list[int] = []
    learned = 0
    while len(todo) and learned < MAX_LAYOUTS:
        first = int(todo[0])
        try:
            layout = _learn_layout(data, int(starts[first]), int(stops[first]), want)
        except (_Irregular, IndexError):
            irregular.append(first)
            todo = todo[1:]
            continue
        learned += 1
        known.insert(0, layout)
        del known[MAX_LAYOUTS:]
        todo = todo[~_apply_layout(buf, starts, stops, *layout, spans, todo)]
    return spans, sorted(irregular + todo.tolist())
