"""The ``.npy`` file format: header parsing and reading whole arrays or regions of them.

A ``.npy`` file is a magic string, a version, a Python-literal header dict (dtype, Fortran order,
shape) and the raw array bytes. Versions 1.0 (2-byte header length), 2.0 (4-byte length) and 3.0
(UTF-8 header) are read; DALI 2.4 reads only 1.0. Big-endian data is converted to native order
(DALI refuses it).

A region is read without the rest of the file: the bytes it needs form runs at regular offsets
(one per index of the axes outside the region's contiguous tail), which are read with
``storage.read_ranges``. Runs closer together than the storage's ``request_granularity`` are merged
into one request, so a remote store sees few requests and a local file is read by the page.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import Sequence

import numpy as np

from jaxdali.ops.readers import storage

__all__ = ["NpyFormatError", "NpyHeader", "SUPPORTED_TYPES", "array_from_bytes", "box_plan", "header_length",
           "parse_header", "read_box", "read_planned"]

MAGIC = b"\x93NUMPY"
#: Element types (without byte order) that fn.readers.numpy reads, as in DALI.
SUPPORTED_TYPES = ("b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8")

_DESCR = re.compile(r"""['"]descr['"]\s*:\s*['"]([^'"]*)['"]""")
_FORTRAN = re.compile(r"""['"]fortran_order['"]\s*:\s*(True|False)""")
_SHAPE = re.compile(r"""['"]shape['"]\s*:\s*\(([^)]*)\)""")


class NpyFormatError(ValueError):
    """A file that is not a readable ``.npy`` file; the message names the file."""


@dataclasses.dataclass(frozen=True)
class NpyHeader:
    """What a ``.npy`` header says.

    Attributes:
      dtype: element type as stored (byte order included).
      shape: the array's shape.
      fortran_order: whether the data is stored column-major.
      data_offset: where the data starts in the file.
      count: number of elements.
      nbytes: bytes of data.
      stored_shape: the shape of the data read as a C-order array (reversed for Fortran order).
      direct: whether the stored data is already the result (C order, native byte order).
    """

    dtype: np.dtype
    shape: tuple[int, ...]
    fortran_order: bool
    data_offset: int
    count: int = dataclasses.field(init=False, compare=False)
    nbytes: int = dataclasses.field(init=False, compare=False)
    stored_shape: tuple[int, ...] = dataclasses.field(init=False, compare=False)
    direct: bool = dataclasses.field(init=False, compare=False)

    def __post_init__(self):
        # Derived once: a header serves every file that shares it (see parse_header).
        set_field = object.__setattr__
        set_field(self, "count", math.prod(self.shape))
        set_field(self, "nbytes", self.count * self.dtype.itemsize)
        set_field(self, "stored_shape", self.shape[::-1] if self.fortran_order else self.shape)
        set_field(self, "direct", not self.fortran_order and self.dtype.isnative)


def header_length(prefix: bytes, path: str) -> int:
    """The data offset announced by the first bytes of a ``.npy`` file (at least 12 are needed)."""
    if len(prefix) < 10 or prefix[:6] != MAGIC:
        raise NpyFormatError(f"{path!r} is not a .npy file (it does not start with the .npy magic string)"
                             if len(prefix) >= 6 else f"{path!r} is not a .npy file (only {len(prefix)} bytes)")
    major = prefix[6]
    if major == 1:
        return 10 + int.from_bytes(prefix[8:10], "little")
    if major in (2, 3):
        if len(prefix) < 12:
            raise NpyFormatError(f"{path!r} is truncated inside its .npy header ({len(prefix)} bytes)")
        return 12 + int.from_bytes(prefix[8:12], "little")
    raise NpyFormatError(f"{path!r} has .npy format version {major}.{prefix[7]}; versions 1.0, 2.0 and 3.0 are read")


def parse_header(buf: bytes, path: str) -> NpyHeader:
    """The header at the start of ``buf``, which holds at least ``header_length(buf)`` bytes."""
    offset = header_length(buf, path)
    if len(buf) < offset:
        raise NpyFormatError(f"{path!r} is truncated inside its .npy header: it announces {offset} header bytes, "
                             f"the file has {len(buf)}")
    header = _parse_header_bytes(bytes(buf[:offset]))
    if isinstance(header, str):
        raise NpyFormatError(f"{path!r} {header}")
    return header


# Files of a data set mostly share a handful of headers, and parsing is a pure function of the bytes.
@functools.lru_cache(maxsize=1024)
def _parse_header_bytes(raw: bytes) -> NpyHeader | str:
    """The header in ``raw`` (magic to data start), or what is wrong with it."""
    start = 10 if raw[6] == 1 else 12
    text = raw[start:].decode("utf-8" if raw[6] == 3 else "latin-1", errors="replace")
    descr, fortran, shape = _DESCR.search(text), _FORTRAN.search(text), _SHAPE.search(text)
    if descr is None or fortran is None or shape is None:
        why = "a structured dtype (not supported)" if "'descr': [" in text else "a malformed header"
        return f"has {why}: {text.strip()!r}"
    code = descr.group(1)
    if code[1:] not in SUPPORTED_TYPES or code[:1] not in "<>|=":
        return f"holds elements of type {code!r}; jaxdali reads arrays of bool, int8-64, uint8-64 and float16/32/64"
    try:
        dims = tuple(int(d) for d in shape.group(1).replace("L", "").split(",") if d.strip())
    except ValueError:
        return f"has a malformed shape in its header: {text.strip()!r}"
    if any(d < 0 for d in dims):
        return f"has a negative dimension in its header shape {dims}"
    return NpyHeader(np.dtype(code), dims, fortran.group(1) == "True", len(raw))


def _native(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("=") if dtype.byteorder == ">" else dtype


def _to_logical(stored: np.ndarray, header: NpyHeader) -> np.ndarray:
    """The C-order, native-order array of the file's logical shape from its stored-order data."""
    if header.fortran_order:
        return np.ascontiguousarray(stored.T, dtype=_native(header.dtype))
    return stored if stored.dtype.isnative else stored.astype(_native(header.dtype))


def array_from_bytes(data: bytes, header: NpyHeader, path: str) -> np.ndarray:
    """The whole array of a file whose content is ``data`` (a read-only view when no conversion is needed)."""
    if len(data) < header.data_offset + header.nbytes:
        raise NpyFormatError(f"{path!r} is truncated: its header announces {header.nbytes} bytes of data "
                             f"{header.shape} {header.dtype.str}, the file has {len(data) - header.data_offset}")
    stored = np.frombuffer(data, header.dtype, header.count, header.data_offset).reshape(header.stored_shape)
    return stored if header.direct else _to_logical(stored, header)


def read_box(path: str, header: NpyHeader, lo: Sequence[int], hi: Sequence[int], prefix: bytes = b"") -> np.ndarray:
    """The region ``[lo, hi)`` (logical axes, inside the array) of the array in ``path``.

    Reads only the runs of bytes the region covers (merged where gaps are below the storage's
    request granularity). ``prefix``: the first bytes of the file, already read; a region inside it
    is not read again.
    """
    plan = box_plan(header, tuple(lo), tuple(hi), storage.request_granularity(path))
    return read_planned(path, header, plan, prefix)


def read_planned(path: str, header: NpyHeader, plan: "_BoxPlan", prefix: bytes = b"") -> np.ndarray:
    """``read_box`` with the plan of its region (``box_plan``) already made: a reader reading the same
    region of many files with one header makes the plan once."""
    if plan.end <= len(prefix):  # small files: the region is in the bytes read with the header
        if not plan.ranges:
            return _to_logical(np.empty(plan.box, header.dtype), header)
        return _to_logical(np.ndarray(plan.box, header.dtype, prefix, plan.ranges[0][0], plan.strides).copy(), header)
    out = np.empty(plan.box, header.dtype)
    chunks = storage.read_ranges(path, plan.ranges)
    flat = out.reshape((-1,) + plan.inner)
    for k, chunk in enumerate(chunks):
        offset, span = plan.ranges[k]
        if len(chunk) < span:
            hi = [s + b for s, b in zip(plan.lo, plan.logical_box)]
            raise NpyFormatError(
                f"{path!r} is truncated: reading its region [{list(plan.lo)}, {hi}) needs bytes up to "
                f"{offset + span}, the file ends at {offset + len(chunk)}")
        flat[k] = np.ndarray(plan.inner, header.dtype, chunk, 0, plan.strides[len(plan.box) - len(plan.inner):])
    return _to_logical(out, header)


@dataclasses.dataclass(frozen=True)
class _BoxPlan:
    lo: tuple[int, ...]  # the region's start, logical axes
    logical_box: tuple[int, ...]  # the region's shape, logical axes
    box: tuple[int, ...]  # the region's shape in stored order
    strides: tuple[int, ...]  # the stored array's byte strides
    inner: tuple[int, ...]  # the shape each range covers (the box's axes from the split axis on)
    ranges: list[tuple[int, int]]  # (offset, length) of each range, in C order of the outer axes
    end: int  # one past the region's last byte


@functools.lru_cache(maxsize=1024)
def box_plan(header: NpyHeader, lo: tuple[int, ...], hi: tuple[int, ...], max_gap: int) -> _BoxPlan:
    """Which byte ranges hold the region ``[lo, hi)`` of a file with ``header``, read in requests whose
    gaps stay below ``max_gap`` bytes (pure: cached, as samples share shapes and regions)."""
    box = tuple(h - l for l, h in zip(lo, hi))
    logical = (lo, box)
    if header.fortran_order:
        lo, box = lo[::-1], box[::-1]
    stored_shape = header.stored_shape
    itemsize = header.dtype.itemsize
    strides = tuple(itemsize * math.prod(stored_shape[k + 1:]) for k in range(len(stored_shape)))
    if math.prod(box) == 0:
        return _BoxPlan(*logical, box, strides, box, [], 0)
    split = _split_axis(box, stored_shape, strides, max_gap)
    # One range per index of the axes before `split`, each covering the box's inner axes.
    starts = np.asarray(header.data_offset + sum(l * s for l, s in zip(lo, strides)), np.int64)
    for k in range(split):
        starts = np.add.outer(starts, np.arange(box[k], dtype=np.int64) * strides[k])
    span = sum((b - 1) * s for b, s in zip(box[split:], strides[split:])) + itemsize
    ranges = [(o, span) for o in starts.reshape(-1).tolist()]
    return _BoxPlan(*logical, box, strides, box[split:], ranges, ranges[-1][0] + span)


def _split_axis(box: Sequence[int], shape: Sequence[int], strides: Sequence[int], max_gap: int) -> int:
    """The outermost axis from which a box's bytes are read as one span per index of the axes before it:
    the first whose spans waste on average at most ``max_gap`` bytes per gap between the contiguous
    runs they merge. The contiguous tail (all later axes whole) always qualifies."""
    ndim = len(box)
    contiguous = ndim - 1
    while contiguous > 0 and box[contiguous] == shape[contiguous]:
        contiguous -= 1
    itemsize = strides[-1]
    run = box[contiguous] * strides[contiguous]
    for axis in range(contiguous):
        span = sum((b - 1) * s for b, s in zip(box[axis:], strides[axis:])) + itemsize
        runs = math.prod(box[axis:contiguous])
        if span - runs * run <= max_gap * (runs - 1):
            return axis
    return contiguous
