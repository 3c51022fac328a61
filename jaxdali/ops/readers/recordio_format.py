"""MXNet's RecordIO format (``.rec`` files with ``.idx`` index files), as read by ``fn.readers.mxnet``.

A record is a frame: the magic word ``0xced7230a``, a 32-bit word whose top 3 bits are a
continuation flag and whose low 29 bits are the payload length, the payload, and zero padding to
a multiple of 4 bytes. A writer splits a payload at every 4-aligned occurrence of the magic word
(flag 1 = first part, 2 = middle, 3 = last; 0 = whole record) and drops the magic; a reader joins
the parts with the magic word between them.

An image record's payload starts with the 24-byte ``IRHeader`` (uint32 ``flag``, float32 ``label``,
uint64 ``id``, uint64 ``id2``); when ``flag`` > 0 the label is the ``flag`` float32 values that
follow the header instead. The rest of the payload is the encoded image.

An index file has one ``key<TAB>offset`` line per record; offsets count over the ``.rec`` files
taken one after the other.
"""

from __future__ import annotations

import struct
from typing import Iterable, Sequence

import numpy as np

__all__ = ["IR_HEADER_SIZE", "MAGIC", "RecordIOError", "encode_record", "frame", "join_parts", "parse_index",
           "split_payload", "write_recordio"]

MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", MAGIC)
#: Bytes of the image-record header (flag, label, id, id2).
IR_HEADER_SIZE = 24
_LENGTH_MASK = (1 << 29) - 1


class RecordIOError(ValueError):
    """A malformed RecordIO file or index; the message names the file and the record."""


def parse_index(text: bytes, where: str) -> np.ndarray:
    """The record offsets of an index file (second column of ``key offset`` lines), sorted and unique."""
    rows = text.split()
    if len(rows) % 2:
        raise RecordIOError(f"{where}: every line must be '<key> <offset>'; the file has an odd number of fields")
    try:
        offsets = np.array(rows[1::2], dtype=np.int64)
    except ValueError:
        bad = next(r for r in rows[1::2] if not r.lstrip(b"-").isdigit())
        raise RecordIOError(f"{where}: offset {bad.decode(errors='replace')!r} is not an integer") from None
    if (offsets < 0).any():
        raise RecordIOError(f"{where}: negative offset {int(offsets.min())}")
    return np.unique(offsets)


def join_parts(frames: memoryview, where: str) -> bytes:
    """The payload of a record split over several frames (``frames`` starts at its first frame)."""
    parts = []
    pos = 0
    while True:
        if pos + 8 > len(frames):
            raise RecordIOError(f"{where}: the record ends inside a frame header (at byte {pos} of its "
                                f"{len(frames)})")
        magic, word = struct.unpack_from("<II", frames, pos)
        if magic != MAGIC:
            raise RecordIOError(f"{where}: frame at byte {pos} of the record does not start with the RecordIO magic")
        flag, length = word >> 29, word & _LENGTH_MASK
        if (flag == 1) != (pos == 0) or flag == 0:
            raise RecordIOError(f"{where}: frame at byte {pos} has continuation flag {flag}, out of sequence")
        if pos + 8 + length > len(frames):
            raise RecordIOError(f"{where}: frame at byte {pos} announces {length} bytes, past the record's end")
        parts.append(frames[pos + 8:pos + 8 + length])
        pos += 8 + length + (-length % 4)
        if flag == 3:
            return _MAGIC_BYTES.join(parts)


# -- writing (tests, examples and tools) -------------------------------------------------------------
def split_payload(payload: bytes) -> list[bytes]:
    """The parts a writer stores ``payload`` as: split at each 4-aligned magic word, which is dropped."""
    parts, prev = [], 0
    for i in range(0, len(payload) - 3, 4):
        if payload[i:i + 4] == _MAGIC_BYTES:
            parts.append(payload[prev:i])
            prev = i + 4
    parts.append(payload[prev:])
    return parts


def frame(payload: bytes) -> bytes:
    """The frames of one record holding ``payload``."""
    parts = split_payload(payload)
    out = []
    for k, part in enumerate(parts):
        flag = 0 if len(parts) == 1 else 1 if k == 0 else 3 if k == len(parts) - 1 else 2
        out += [struct.pack("<II", MAGIC, (flag << 29) | len(part)), part, b"\0" * (-len(part) % 4)]
    return b"".join(out)


def encode_record(label: float | Sequence[float], data: bytes, record_id: int = 0) -> bytes:
    """An image record's payload: the IRHeader (one label, or several after it) and ``data``."""
    if np.ndim(label) == 0:
        return struct.pack("<IfQQ", 0, float(label), record_id, 0) + data
    labels = np.asarray(label, "<f4")
    return struct.pack("<IfQQ", len(labels), 0.0, record_id, 0) + labels.tobytes() + data


def write_recordio(path: str, payloads: Iterable[bytes], index_path: str | None = None, start: int = 0) -> list[int]:
    """Writes one record per payload to ``path`` (and a ``key<TAB>offset`` index, offsets from ``start``);
    returns the offsets."""
    offsets = []
    with open(path, "wb") as f:
        for payload in payloads:
            offsets.append(start + f.tell())
            f.write(frame(payload))
    if index_path is not None:
        with open(index_path, "w") as f:
            f.writelines(f"{k}\t{o}\n" for k, o in enumerate(offsets))
    return offsets
