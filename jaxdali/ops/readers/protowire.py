"""A small reader (and writer) of the protobuf wire format, for the records of Caffe and Caffe2 LMDBs.

Only what those schemas need: a message is split into its fields in one pass, bytes fields are
returned as views of the record (an encoded image is never copied byte by byte), and packed
numeric arrays are decoded by NumPy. No ``.proto`` compiler or protobuf runtime is involved.

Wire types: 0 varint, 1 fixed 64-bit, 2 length-delimited, 5 fixed 32-bit (groups are rejected).
"""

from __future__ import annotations

import struct
from typing import Iterable

import numpy as np

__all__ = ["ProtoError", "Message", "parse", "encode_varint", "encode_field", "encode_packed"]

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5


class ProtoError(ValueError):
    """A record that is not a well-formed protobuf message (truncated, or an unknown wire type)."""


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise ProtoError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtoError("varint longer than 10 bytes")


class Message:
    """The fields of one message: ``fields[number]`` is the list of (wire_type, value) in record
    order, where a varint is an int, a fixed32/64 field its raw 4/8 bytes (as a memoryview), and a
    length-delimited field a memoryview of its payload (a view of the record, not a copy)."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[int, list]):
        self.fields = fields

    def has(self, number: int) -> bool:
        return number in self.fields

    def varint(self, number: int, default: int = 0) -> int:
        """The last value of a scalar varint field (protobuf's "last one wins")."""
        values = self.fields.get(number)
        if not values:
            return default
        wire, value = values[-1]
        if wire != VARINT:
            raise ProtoError(f"field {number} has wire type {wire}, expected a varint")
        return value

    def int32(self, number: int, default: int = 0) -> int:
        """A scalar int32 field (negative values are sign-extended 64-bit varints)."""
        return _as_int32(self.varint(number, default))

    def bytes_field(self, number: int) -> memoryview | None:
        """The last value of a bytes/string/message field, or None when absent."""
        values = self.fields.get(number)
        if not values:
            return None
        wire, value = values[-1]
        if wire != LENGTH_DELIMITED:
            raise ProtoError(f"field {number} has wire type {wire}, expected a length-delimited field")
        return value

    def repeated_bytes(self, number: int) -> list[memoryview]:
        """Every value of a repeated bytes/string/message field."""
        out = []
        for wire, value in self.fields.get(number, ()):
            if wire != LENGTH_DELIMITED:
                raise ProtoError(f"field {number} has wire type {wire}, expected a length-delimited field")
            out.append(value)
        return out

    def repeated_varint(self, number: int, dtype) -> np.ndarray:
        """A repeated integer field (packed or not), as an array of ``dtype`` (two's complement)."""
        parts = []
        for wire, value in self.fields.get(number, ()):
            if wire == VARINT:
                parts.append(np.array([value], dtype=np.uint64))
            elif wire == LENGTH_DELIMITED:
                parts.append(_packed_varints(value))
            else:
                raise ProtoError(f"field {number} has wire type {wire}, expected varints")
        return _concat(parts, np.uint64).astype(np.int64).astype(dtype)

    def repeated_fixed(self, number: int, dtype) -> np.ndarray:
        """A repeated float/double field (packed or not) as a little-endian array of ``dtype``."""
        dtype = np.dtype(dtype).newbyteorder("<")
        wire_type = FIXED32 if dtype.itemsize == 4 else FIXED64
        parts = []
        for wire, value in self.fields.get(number, ()):
            if wire not in (wire_type, LENGTH_DELIMITED):
                raise ProtoError(f"field {number} has wire type {wire}, expected {dtype} values")
            if len(value) % dtype.itemsize:
                raise ProtoError(f"field {number}: packed {dtype} data of {len(value)} bytes")
            parts.append(np.frombuffer(value, dtype=dtype))
        return _concat(parts, dtype).astype(dtype.newbyteorder("="))


def _concat(parts: list[np.ndarray], dtype) -> np.ndarray:
    if not parts:
        return np.zeros(0, dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _as_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _packed_varints(view: memoryview) -> np.ndarray:
    """Decodes concatenated varints at once: each ends at a byte below 0x80."""
    b = np.frombuffer(view, dtype=np.uint8)
    if b.size == 0:
        return np.zeros(0, np.uint64)
    last = b < 0x80
    if not last[-1]:
        raise ProtoError("truncated packed varint")
    ends = np.flatnonzero(last)
    starts = np.concatenate(([0], ends[:-1] + 1))
    if np.any(ends - starts > 9):
        raise ProtoError("varint longer than 10 bytes")
    group = np.repeat(np.arange(ends.size), ends - starts + 1)
    shift = (np.arange(b.size) - starts[group]).astype(np.uint64) * np.uint64(7)
    out = np.zeros(ends.size, np.uint64)
    np.add.at(out, group, (b & 0x7F).astype(np.uint64) << shift)
    return out


def parse(data, start: int = 0, end: int | None = None) -> Message:
    """Splits the message in ``data[start:end]`` (bytes or memoryview) into its fields."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    end = len(view) if end is None else end
    pos = start
    fields: dict[int, list] = {}
    while pos < end:
        key, pos = _varint(view, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtoError("field number 0")
        if wire == VARINT:
            value, pos = _varint(view, pos, end)
        elif wire == LENGTH_DELIMITED:
            length, pos = _varint(view, pos, end)
            if pos + length > end:
                raise ProtoError(f"field {number}: {length} bytes announced, {end - pos} left")
            value = view[pos:pos + length]
            pos += length
        elif wire in (FIXED32, FIXED64):
            size = 4 if wire == FIXED32 else 8
            if pos + size > end:
                raise ProtoError(f"field {number}: truncated fixed-size value")
            value = view[pos:pos + size]
            pos += size
        else:
            raise ProtoError(f"field {number}: unsupported wire type {wire}")
        fields.setdefault(number, []).append((wire, value))
    return Message(fields)


# -- writing (datasets for tests, benchmarks and users converting their data) --------------------------

def encode_varint(value: int) -> bytes:
    """``value`` as a varint (negative numbers as 10-byte two's complement, as protobuf does)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_field(number: int, value) -> bytes:
    """One field: an int as a varint, bytes (or a nested encoded message) as length-delimited."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return encode_varint(number << 3 | LENGTH_DELIMITED) + encode_varint(len(value)) + bytes(value)
    return encode_varint(number << 3 | VARINT) + encode_varint(int(value))


def encode_packed(number: int, values: Iterable, kind: str) -> bytes:
    """A packed repeated field; ``kind`` is "varint", "float" or "double"."""
    if kind == "varint":
        payload = b"".join(encode_varint(int(v)) for v in values)
    else:
        values = list(values)
        payload = struct.pack(f"<{len(values)}{'f' if kind == 'float' else 'd'}", *values)
    return encode_field(number, payload)
