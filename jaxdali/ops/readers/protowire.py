"""A batch reader (and a small writer) of the protobuf wire format, for Caffe and Caffe2 LMDB records.

All messages of a batch are parsed together, in lockstep, with NumPy: step ``k`` decodes the
``k``-th field of every message at once, so the Python work per batch grows with the number of
fields in a message (a handful), not with the number of records. Payloads (encoded images) are
never copied byte by byte: they are addressed as (start, length) in the batch buffer. No ``.proto``
compiler or protobuf runtime is involved.

Where the optional compiled parser (``_protowire_kernel.c``) is built, ``parse_batch`` has it build the
same field table in one GIL-free pass over the batch; the NumPy parser stays the reference, the fallback
(also under config ``disable_kernel``), and the writer of every error message.

Wire types: 0 varint, 1 fixed 64-bit, 2 length-delimited, 5 fixed 32-bit (groups are rejected).
"""

from __future__ import annotations

import pathlib
import struct
from typing import Iterable

import numpy as np

from jaxdali.core import options
from jaxdali.ops.kernel_loader import load_kernel

__all__ = ["ProtoError", "Messages", "parse_batch", "parser_status", "join_records", "values_per_message",
           "varints_at", "decode_varints", "encode_varint", "encode_field", "encode_packed"]

_KERNEL, _KERNEL_REASON = load_kernel("jaxdali.ops.readers._protowire_kernel",
                                      pathlib.Path(__file__).with_name("_protowire_kernel.c"), "protobuf parser")

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5
_PADDING = bytes(10)  # after the last record, so a 10-byte varint window never leaves the buffer
_WINDOW = np.arange(10)
_SHIFTS = (7 * np.arange(10)).astype(np.uint64)


class ProtoError(ValueError):
    """A malformed message; ``message`` is the index of the first bad one in its batch."""

    def __init__(self, text: str, message: int):
        super().__init__(text)
        self.message = message


def join_records(records: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One uint8 buffer holding ``records`` back to back (plus padding), and each one's (start, end)."""
    lengths = np.array(list(map(len, records)), dtype=np.int64)
    ends = np.cumsum(lengths)
    buf = np.frombuffer(b"".join([*records, _PADDING]), dtype=np.uint8)
    return buf, ends - lengths, ends


def varints_at(buf: np.ndarray, pos: np.ndarray, limit: np.ndarray, ids: np.ndarray, what: str):
    """The varints starting at ``pos`` (each must end before ``limit``): values and byte lengths."""
    if np.any(pos >= limit):
        raise ProtoError(f"truncated {what}", int(ids[np.argmax(pos >= limit)]))
    first = buf[pos]
    if not (first & 0x80).any():  # all one byte long: field keys, small values and lengths
        return first.astype(np.uint64), np.ones(pos.size, np.int64)
    window = buf[np.minimum(pos[:, None] + _WINDOW, len(buf) - 1)]  # past the end: caught by the limit check
    last = window < 0x80
    length = last.argmax(axis=1) + 1
    bad = ~last.any(axis=1) | (pos + length > limit)
    if bad.any():
        raise ProtoError(f"truncated {what}", int(ids[bad.argmax()]))
    parts = (window & 0x7F).astype(np.uint64) << _SHIFTS
    parts[_WINDOW[None, :] >= length[:, None]] = 0
    return parts.sum(axis=1, dtype=np.uint64), length


class Messages:
    """The fields of ``n`` messages parsed together. Rows are fields, grouped by message in record
    order: ``msg`` (message index), ``number``, ``wire``, ``value`` (varints), and ``start``/
    ``length`` of the payload in ``buf`` (length-delimited and fixed-size fields)."""

    def __init__(self, buf, n, msg, number, wire, value, start, length):
        self.buf, self.n = buf, n
        self.msg, self.number, self.wire, self.value, self.start, self.length = (
            msg, number, wire, value, start, length)

    def part(self, first: int, count: int) -> "Messages":
        """Messages ``first`` to ``first + count - 1`` as a batch of their own (renumbered from 0)."""
        lo, hi = np.searchsorted(self.msg, [first, first + count])
        return Messages(self.buf, count, self.msg[lo:hi] - first, self.number[lo:hi], self.wire[lo:hi],
                        self.value[lo:hi], self.start[lo:hi], self.length[lo:hi])

    def _rows(self, number: int, wires: tuple[int, ...]) -> np.ndarray:
        rows = np.flatnonzero(self.number == number)
        wire = self.wire[rows]
        wrong = wire != wires[0]
        for w in wires[1:]:
            wrong &= wire != w
        if wrong.any():
            r = rows[wrong.argmax()]
            raise ProtoError(f"field {number} has wire type {int(self.wire[r])}, expected {wires}", int(self.msg[r]))
        return rows

    def has(self, number: int) -> np.ndarray:
        """Whether each message holds field ``number``."""
        out = np.zeros(self.n, bool)
        out[self.msg[self.number == number]] = True
        return out

    def last_varint(self, number: int, default: int = 0) -> np.ndarray:
        """Each message's value of a scalar varint field (the last one wins), uint64."""
        rows = self._rows(number, (VARINT,))
        out = np.full(self.n, default, np.uint64)
        out[self.msg[rows]] = self.value[rows]  # later rows overwrite earlier ones
        return out

    def bytes_field(self, number: int, first: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each message's (start, length, present) of a bytes field: the last occurrence (a singular
        field), or the first one of a repeated field with ``first``."""
        rows = self._rows(number, (LENGTH_DELIMITED,))
        if first:
            rows = rows[::-1]
        start, length, present = np.zeros(self.n, np.int64), np.zeros(self.n, np.int64), np.zeros(self.n, bool)
        start[self.msg[rows]] = self.start[rows]
        length[self.msg[rows]] = self.length[rows]
        present[self.msg[rows]] = True
        return start, length, present

    def repeated_bytes(self, number: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every occurrence of a repeated bytes/message field: (message, start, length), in order."""
        rows = self._rows(number, (LENGTH_DELIMITED,))
        return self.msg[rows], self.start[rows], self.length[rows]

    def varints(self, number: int) -> tuple[np.ndarray, np.ndarray]:
        """A repeated integer field, packed or not: (values as uint64, message of each value), in order."""
        rows = self._rows(number, (VARINT, LENGTH_DELIMITED))
        packed = self.wire[rows] == LENGTH_DELIMITED
        if not packed.any():
            return self.value[rows], self.msg[rows]
        plen = self.length[rows[packed]]
        payload = _gather(self.buf, self.start[rows[packed]], plen)
        ends = np.cumsum(plen)
        last = payload < 0x80
        truncated = np.zeros(len(plen), bool)
        truncated[plen > 0] = ~last[ends[plen > 0] - 1]
        if truncated.any():
            raise ProtoError(f"field {number}: truncated packed varint", int(self.msg[rows[packed][truncated.argmax()]]))
        ends_at = np.flatnonzero(last)
        values = decode_varints(payload, ends_at, int(self.msg[rows[packed][0]]))
        counts = np.ones(len(rows), np.int64)
        counts[packed] = np.searchsorted(ends_at, ends) - np.searchsorted(ends_at, ends - plen)
        out = np.empty(counts.sum(), np.uint64)
        first = np.concatenate(([0], np.cumsum(counts)[:-1]))
        out[first[~packed]] = self.value[rows[~packed]]
        out[np.repeat(packed, counts)] = values
        return out, np.repeat(self.msg[rows], counts)

    def fixed(self, number: int, dtype) -> tuple[np.ndarray, np.ndarray]:
        """A repeated float/double field, packed or not: (values, message of each value), in order."""
        dtype = np.dtype(dtype)
        wire = FIXED32 if dtype.itemsize == 4 else FIXED64
        rows = self._rows(number, (wire, LENGTH_DELIMITED))
        lengths = self.length[rows]
        odd = lengths % dtype.itemsize != 0
        if odd.any():
            r = rows[odd.argmax()]
            raise ProtoError(f"field {number}: {int(self.length[r])} bytes of {dtype} values", int(self.msg[r]))
        payload = _gather(self.buf, self.start[rows], lengths)
        values = payload.view(dtype.newbyteorder("<")).astype(dtype)
        return values, np.repeat(self.msg[rows], lengths // dtype.itemsize)


def _gather(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The bytes of the ranges (start, length) of ``buf``, concatenated."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.uint8)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return buf[offsets + np.arange(total)]


def decode_varints(payload: np.ndarray, ends: np.ndarray, message: int) -> np.ndarray:
    """Concatenated varints ending at the byte indices ``ends`` (bytes below 0x80)."""
    if ends.size == payload.size:  # all one byte long
        return payload.astype(np.uint64)
    starts = np.concatenate(([0], ends[:-1] + 1))
    sizes = ends - starts + 1
    if np.any(sizes > 10):
        raise ProtoError("packed varint longer than 10 bytes", message)
    shift = (np.arange(payload.size) - np.repeat(starts, sizes)).astype(np.uint64) * np.uint64(7)
    return np.bitwise_or.reduceat((payload & 0x7F).astype(np.uint64) << shift, starts)


_VALID_WIRE = np.zeros(8, bool)
_VALID_WIRE[[VARINT, FIXED64, LENGTH_DELIMITED, FIXED32]] = True
_FIXED_SIZE = np.zeros(8, np.int64)
_FIXED_SIZE[FIXED32], _FIXED_SIZE[FIXED64] = 4, 8


def parser_status() -> tuple[str, str]:
    """Which parser ``parse_batch`` runs, ``"compiled kernel"`` or ``"numpy fallback"``, and why."""
    if options.get("disable_kernel"):
        return "numpy fallback", "disabled by config 'disable_kernel' (JAXDALI_DISABLE_KERNEL)"
    if _KERNEL is None:
        return "numpy fallback", f"compiled kernel {_KERNEL_REASON}"
    return "compiled kernel", _KERNEL_REASON


def parse_batch(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Messages:
    """Parses the messages ``buf[starts[i]:ends[i]]`` together (``buf`` padded as by ``join_records``)."""
    if _KERNEL is not None and not options.get("disable_kernel"):
        parsed = _parse_compiled(buf, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(ends, np.int64))
        if parsed is not None:
            return parsed
    return _parse_numpy(buf, starts, ends)


def _parse_compiled(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Messages | None:
    """``parse_batch`` by the compiled kernel, or None for a malformed batch (the NumPy parser then says
    what is wrong)."""
    capacity = 4 * len(starts) + 16  # rows; a rarer, larger message takes a second call
    while True:
        rows = (np.empty(capacity, np.int64), np.empty(capacity, np.int64), np.empty(capacity, np.uint8),
                np.empty(capacity, np.uint64), np.empty(capacity, np.int64), np.empty(capacity, np.int64))
        count = _KERNEL.parse_fields(buf, starts, ends, *rows)
        if count < 0:
            return None
        if count <= capacity:
            return Messages(buf, len(starts), *(a[:count] for a in rows))
        capacity = count


def _parse_numpy(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Messages:
    """``parse_batch`` in NumPy, the messages in lockstep (see the module docstring)."""
    n = len(starts)
    pos = np.asarray(starts, np.int64).copy()
    ends = np.asarray(ends, np.int64)
    active = np.flatnonzero(pos < ends)
    cols: list[list[np.ndarray]] = [[] for _ in range(6)]
    while active.size:
        p, lim = pos[active], ends[active]
        key, size = varints_at(buf, p, lim, active, "field key")
        p += size
        wire, number = (key & np.uint64(7)).astype(np.uint8), (key >> np.uint64(3)).astype(np.int64)
        bad = ~_VALID_WIRE[wire] | (number == 0)
        if bad.any():
            i = bad.argmax()
            raise ProtoError(f"field {int(number[i])}: unsupported wire type {int(wire[i])}", int(active[i]))
        kinds = np.unique(wire) if wire.size > 1 and (wire != wire[0]).any() else wire[:1]
        value = np.zeros(active.size, np.uint64)
        length = _FIXED_SIZE[wire]
        for kind in kinds.tolist():
            if kind not in (VARINT, LENGTH_DELIMITED):
                continue
            what = "varint" if kind == VARINT else "length"
            if len(kinds) == 1:  # every message is at the same kind of field: no masking
                v, s = varints_at(buf, p, lim, active, what)
                p += s
            else:
                mask = wire == kind
                v, s = varints_at(buf, p[mask], lim[mask], active[mask], what)
                p[mask] += s
            if kind == VARINT:
                if len(kinds) == 1:
                    value = v
                else:
                    value[mask] = v
            elif len(kinds) == 1:
                length = v.astype(np.int64)
            else:
                length[mask] = v.astype(np.int64)
        over = (length < 0) | (p + length > lim)  # a length of 2**63 or more reads as negative
        if over.any():
            i = over.argmax()
            announced = int(length[i]) % (1 << 64)
            raise ProtoError(f"field {int(number[i])}: {announced} bytes announced, {int(lim[i] - p[i])} left",
                             int(active[i]))
        for col, data in zip(cols, (active, number, wire, value, p, length)):
            col.append(data)
        pos[active] = p + length
        active = active[pos[active] < lim]
    if not cols[0]:
        empty = np.zeros(0, np.int64)
        return Messages(buf, n, empty, empty, empty.astype(np.uint8), empty.astype(np.uint64), empty, empty)
    msg, number, wire, value, start, length = (np.concatenate(c) if len(c) > 1 else c[0] for c in cols)
    if len(cols[0]) > 1:
        order = np.argsort(msg, kind="stable")  # message by message, fields in record order
        msg, number, wire, value, start, length = (a[order] for a in (msg, number, wire, value, start, length))
    return Messages(buf, n, msg, number, wire, value, start, length)


def values_per_message(values: np.ndarray, msg: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The number of values of each of ``n`` messages, and the index of each message's first value."""
    counts = np.bincount(msg, minlength=n)
    return counts, np.concatenate(([0], np.cumsum(counts)[:-1]))


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
