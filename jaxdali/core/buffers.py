"""Host batch buffers that operators own and that the device stage may hand to JAX without a copy.

Large buffers are recycled: a fresh block above malloc's mmap threshold comes from the kernel as
new pages, and faulting them in costs about twice the work of filling them (a uint8 -> float32 cast
of 32 photos: 3 ms into a reused block, 10-15 ms into a fresh one). A large buffer's memory is
therefore leased from a pool and goes back to it when the last array using it (the buffer or any
view of it, which all keep the lease alive as their NumPy ``base``) is gone, as DALI reuses its
output buffers, with no bookkeeping by the pipeline.
"""

from __future__ import annotations

import collections
import math
import threading
import weakref

import numpy as np

__all__ = ["owned_empty", "is_owned", "owned_rows", "POOL_MIN_BYTES", "POOL_LIMIT_BYTES", "POOL_MAX_AGE"]

_ALIGN = 64
#: Buffers of at least this many bytes are leased from the pool (smaller ones are cheap to allocate).
POOL_MIN_BYTES = 1 << 20
#: At most this many bytes of free buffers are kept for reuse; beyond it the oldest are freed.
POOL_LIMIT_BYTES = 256 << 20
#: A free buffer not reused within this many ``owned_empty`` calls (of any size) is freed: a
#: pipeline reuses its buffers within a few batches, and sizes seen once must not stay allocated.
POOL_MAX_AGE = 64

_OWNED: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()
# Reentrant: a lease may be released (by the garbage collector) inside the pool's own critical section.
_LOCK = threading.RLock()
# id -> (free block, the allocation count when it was released), oldest first
_RELEASED: "collections.OrderedDict[int, tuple[np.ndarray, int]]" = collections.OrderedDict()
_FREE: dict[int, list[int]] = {}  # block size -> ids of the free blocks of that size, newest last
_free_bytes = 0
_allocations = 0  # owned_empty calls so far: the pool's clock


class _Lease:
    """The base object of a pooled buffer: exposes the block's memory to NumPy and gives the block
    back to the pool when it is collected (when no array uses the memory any more)."""

    def __init__(self, block: np.ndarray, start: int, nbytes: int):
        self.block = block
        self.__array_interface__ = {"data": (block.ctypes.data + start, False), "shape": (nbytes,),
                                    "typestr": "|u1", "version": 3}

    def __del__(self) -> None:
        _release(self.block)


def _take(size: int | None) -> np.ndarray | None:
    """A free block of ``size`` bytes (None: none, or no size), after freeing the blocks too old to
    keep; every ``owned_empty`` call comes here, as the pool's clock."""
    global _allocations
    with _LOCK:
        _allocations += 1
        while _RELEASED and (_allocations - next(iter(_RELEASED.values()))[1] > POOL_MAX_AGE):
            _forget_oldest()
        ids = _FREE.get(size)
        if not ids:
            return None
        return _forget(ids[-1])


def _release(block: np.ndarray) -> None:
    global _free_bytes
    if block.nbytes > POOL_LIMIT_BYTES:
        return
    with _LOCK:
        while _free_bytes + block.nbytes > POOL_LIMIT_BYTES:
            _forget_oldest()
        _RELEASED[id(block)] = (block, _allocations)
        _FREE.setdefault(block.nbytes, []).append(id(block))
        _free_bytes += block.nbytes


def _forget(key: int) -> np.ndarray:
    """Takes a block out of the pool (it is freed with its last reference)."""
    global _free_bytes
    block, _ = _RELEASED.pop(key)
    _FREE[block.nbytes].remove(key)
    _free_bytes -= block.nbytes
    return block


def _forget_oldest() -> None:
    _forget(next(iter(_RELEASED)))


def owned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised array, 64-byte aligned, registered as a pipeline-owned batch buffer.

    Operators allocate their dense outputs with it. Such a buffer is written once by its operator and
    never handed out as a NumPy array in device-output mode, so ``place_on_device`` may let the
    ``jax.Array`` use its memory directly (no copy on a CPU device). Buffers of ``POOL_MIN_BYTES``
    or more reuse the memory of released ones of the same size (see the module's docstring).
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes >= POOL_MIN_BYTES:
        size = -(-(nbytes + _ALIGN) // 4096) * 4096  # whole pages: shapes of nearly equal size share blocks
        block = _take(size)
        if block is None:
            block = np.empty(size, np.uint8)
        raw = np.asarray(_Lease(block, (-block.ctypes.data) % _ALIGN, nbytes))
        array = raw.view(dtype).reshape(shape)
    else:
        if _RELEASED:  # the clock of a pool that holds blocks
            _take(None)
        raw = np.empty(nbytes + _ALIGN, np.uint8)
        start = (-raw.ctypes.data) % _ALIGN
        array = raw[start:start + nbytes].view(dtype).reshape(shape)
    _OWNED[id(array)] = array
    return array


def is_owned(array: np.ndarray) -> bool:
    """Whether ``array`` is a buffer from ``owned_empty`` (the same object, not a view of it)."""
    return _OWNED.get(id(array)) is array


def owned_rows(array: np.ndarray, sizes) -> list[np.ndarray]:
    """``array`` cut into consecutive blocks of ``sizes`` rows (views). Where ``array`` is owned, so is
    each block: the batches of the pipelines of a group, each taken whole by its pipeline, may then
    become its device arrays without a copy as the whole batch could (``jaxdali.pipeline.group``)."""
    owned = is_owned(array)
    parts, start = [], 0
    for n in sizes:
        part = array[start:start + n]
        if owned:
            _OWNED[id(part)] = part
        parts.append(part)
        start += n
    return parts
