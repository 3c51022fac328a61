"""Finding features in a whole batch of serialized ``tf.train.Example`` records at once.

Records written by one program share their byte layout but for the lengths: the same feature
names in the same order, each length varint of the same byte width. The walk of one record in
Python gives that layout (where every tag, name and length sits relative to its map entry), and
every record of the batch is then checked against it and read with a few NumPy operations per
map entry, whatever the batch size. Records that do not match learn a layout of their own; those
laid out otherwise than TensorFlow writes Examples are left to ``tfrecord_format.parse_example``.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import numpy as np

from jaxdali.ops.readers.tfrecord_format import BYTES_LIST, read_varint

__all__ = ["FeatureSpans", "locate_features", "MAX_LAYOUTS"]


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
    """The byte layout of one map entry of a template record, relative to the entry's base (the
    entry's first byte; the record's first byte for the first entry, whose bytes include the
    Example's own tag and length).

    ``offsets`` are the bytes to check: ``(byte & mask) == expected`` (constant tags and name bytes
    are checked whole, varint bytes by their continuation bit alone, which fixes each varint's width).
    ``weights`` decode the entry's lengths from those bytes: entry, value, list and first item.
    ``relations`` combine them into the three that must hold between nested lengths, each within
    ``[low, high]``.
    """

    offsets: np.ndarray
    mask: np.ndarray
    expected: np.ndarray
    weights: np.ndarray
    header: int  # bytes from the base to the entry's content
    feature: int  # index of the wanted feature it holds, or -1
    kind: int = 0
    relations: np.ndarray | None = None
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    payload: int = 0  # where the first item's bytes start
    empty: bool = False  # the value list is empty


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

    def varint(self, pos: int, base: int, decode: bool = True) -> tuple[int, int]:
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
        if decode:
            self.varints.append(positions)
        return value, pos

    def entry(self, **fields) -> _Entry:
        where = {o: t for t, o in enumerate(self.offsets)}
        weights = np.zeros((len(self.offsets), 4), dtype=np.int64)
        for v, positions in enumerate(self.varints):
            for k, o in enumerate(positions):
                weights[where[o], v] = 1 << (7 * k)
        return _Entry(np.asarray(self.offsets, np.int64), np.asarray(self.mask, np.uint8),
                      np.asarray(self.expected, np.uint8), weights, **fields)


_ANY = 1 << 62  # no upper bound


def _learn_layout(data: bytes, start: int, stop: int, want: Mapping[bytes, int]) -> list[_Entry]:
    """The layout of the record ``data[start:stop]``, entry by entry."""
    if start == stop:
        raise _Irregular
    b, base = _LayoutBuilder(data), start
    if b.const(start, base) != 0x0A:
        raise _Irregular
    # Example.features: only its width is kept; the entries must tile the rest of the record.
    length, p = b.varint(start + 1, base, decode=False)
    if p + length != stop:
        raise _Irregular
    entries = []
    while p < stop:
        if b.const(p, base) != 0x0A:
            raise _Irregular
        entry_len, p = b.varint(p + 1, base)
        content = p
        if b.const(p, base) != 0x0A:
            raise _Irregular
        key_len, q = read_varint(data, p + 1)
        for k in range(p + 1, q + key_len):  # the name's length and bytes: the same in every record
            b.const(k, base)
        name = bytes(data[q:q + key_len])  # hashable whatever the buffer (bytes or a memoryview of a map)
        q += key_len
        key_size = q - p
        j = want.get(name, -1)
        if j < 0:
            entries.append(b.entry(header=content - base, feature=-1))
        else:
            if b.const(q, base) != 0x12:
                raise _Irregular
            value_len, r = b.varint(q + 1, base)
            kind = b.const(r, base)
            if kind not in (0x0A, 0x12, 0x1A) or key_size + (r - q) + value_len != entry_len:
                raise _Irregular
            list_len, t = b.varint(r + 1, base)
            if (t - r) + list_len != value_len:
                raise _Irregular
            # entry - value = key + value header; value - list = list header; list - item = item header
            # (at least, for the several strings of a bytes list) or list = 0 for an empty list.
            relations = np.array([[1, 0, 0], [-1, 1, 0], [0, -1, 1], [0, 0, -1 if list_len else 0]], np.int64)
            low = [key_size + r - q, t - r, 0]
            high = list(low)
            payload = t - base
            if list_len:
                if b.const(t, base) != 0x0A:
                    raise _Irregular
                item_len, u = b.varint(t + 1, base)
                low[2] = high[2] = u - t
                if kind == 0x0A:
                    high[2] = _ANY
                payload = u - base
                if not low[2] <= list_len - item_len <= high[2]:
                    raise _Irregular
            entries.append(b.entry(header=content - base, feature=j, kind=kind >> 3, relations=relations,
                                   low=np.array(low), high=np.array(high), payload=payload, empty=not list_len))
        p = content + entry_len
        b, base = _LayoutBuilder(data), p
    if p != stop:
        raise _Irregular
    if not entries:  # an Example without features: its tag and length alone
        entries.append(b.entry(header=p - base, feature=-1))
    return entries


def _apply_layout(buf: np.ndarray, starts: np.ndarray, stops: np.ndarray, entries: list[_Entry],
                  rows: np.ndarray) -> tuple[np.ndarray, list[tuple]]:
    """Reads records ``rows`` as laid out like the template: returns the mask of those that are, and
    per wanted feature ``(feature, kind, first byte, end, more strings, empty list)`` for them."""
    base = starts[rows]
    ok = np.ones(len(rows), dtype=bool)
    found = []
    for e in entries:
        # Positions past a malformed record's end are clipped: that record fails a check.
        got = buf.take(base[:, None] + e.offsets, mode="clip")
        ok &= ((got & e.mask) == e.expected).all(axis=1)
        lengths = (got & 0x7F) @ e.weights
        if e.feature >= 0:
            nested = lengths @ e.relations
            ok &= ((nested >= e.low) & (nested <= e.high)).all(axis=1)
            first = base + e.payload
            more = nested[:, 2] > e.low[2] if e.kind == BYTES_LIST and not e.empty else None
            found.append((e.feature, e.kind, first, first + lengths[:, 3], more, e.empty))
        base = base + e.header + lengths[:, 0]
    # The entries must tile the record exactly (lengths only grow base, so none ran past its end).
    ok &= base == stops[rows]
    if not ok.all():
        found = [(j, kind, first[ok], end[ok], None if more is None else more[ok], empty)
                 for j, kind, first, end, more, empty in found]
    return ok, found


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
    want = {name: j for j, name in enumerate(names)}
    todo = np.flatnonzero(starts != stops)
    known = layouts if layouts is not None else []
    results = []  # (rows read, found) per layout that matched some records

    def apply(layout) -> None:
        nonlocal todo
        ok, found = _apply_layout(buf, starts, stops, layout, todo)
        if ok.all():
            results.append((todo, found))
            todo = todo[:0]
        elif ok.any():
            results.append((todo[ok], found))
            todo = todo[~ok]

    for layout in list(known):
        if not len(todo):
            break
        apply(layout)
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
        apply(layout)
    return _gather_spans(n, len(names), results), sorted(irregular + todo.tolist())


def _gather_spans(n: int, features: int, results: list) -> list[FeatureSpans]:
    if len(results) == 1 and len(results[0][0]) == n:  # one layout read every record: its arrays as they are
        spans: list = [None] * features
        for j, kind, first, end, more, empty in results[0][1]:
            spans[j] = FeatureSpans(np.full(n, kind), first, end, np.zeros(n, bool) if more is None else more,
                                    np.full(n, empty))
        return [s if s is not None else FeatureSpans(*(np.zeros(n, np.int64),) * 3, *(np.zeros(n, bool),) * 2)
                for s in spans]
    spans = [FeatureSpans(np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, bool),
                          np.zeros(n, bool)) for _ in range(features)]
    for rows, found in results:
        for j, kind, first, end, more, empty in found:
            span = spans[j]
            span.kind[rows] = kind
            span.start[rows] = first
            span.stop[rows] = end
            if more is not None:
                span.more_strings[rows] = more
            span.empty_list[rows] = empty
    return spans
