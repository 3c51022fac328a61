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

__all__ = ["owned_empty", "is_owned", "POOL_MIN_BYTES", "POOL_LIMIT_BYTES"]

_ALIGN = 64
#: Buffers of at least this many bytes are leased from the pool (smaller ones are cheap to allocate).
POOL_MIN_BYTES = 1 << 20
#: At most this many bytes of free buffers are kept for reuse; beyond it the oldest are freed.
POOL_LIMIT_BYTES = 512 << 20

_OWNED: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()
# Reentrant: a lease may be released (by the garbage collector) inside the pool's own critical section.
_LOCK = threading.RLock()
_RELEASED: "collections.OrderedDict[int, np.ndarray]" = collections.OrderedDict()  # id -> free block, oldest first
_FREE: dict[int, list[int]] = {}  # block size -> ids of the free blocks of that size, newest last
_free_bytes = 0


class _Lease:
    """The base object of a pooled buffer: exposes the block's memory to NumPy and gives the block
    back to the pool when it is collected (when no array uses the memory any more)."""

    def __init__(self, block: np.ndarray, start: int, nbytes: int):
        self.block = block
        self.__array_interface__ = {"data": (block.ctypes.data + start, False), "shape": (nbytes,),
                                    "typestr": "|u1", "version": 3}

    def __del__(self) -> None:
        _release(self.block)


def _take(size: int) -> np.ndarray | None:
    global _free_bytes
    with _LOCK:
        ids = _FREE.get(size)
        if not ids:
            return None
        _free_bytes -= size
        return _RELEASED.pop(ids.pop())


def _release(block: np.ndarray) -> None:
    global _free_bytes
    if block.nbytes > POOL_LIMIT_BYTES:
        return
    with _LOCK:
        while _free_bytes + block.nbytes > POOL_LIMIT_BYTES:  # forget the oldest (freed with them)
            key, oldest = _RELEASED.popitem(last=False)
            _FREE[oldest.nbytes].remove(key)
            _free_bytes -= oldest.nbytes
        _RELEASED[id(block)] = block
        _FREE.setdefault(block.nbytes, []).append(id(block))
        _free_bytes += block.nbytes


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
        raw = np.empty(nbytes + _ALIGN, np.uint8)
        start = (-raw.ctypes.data) % _ALIGN
        array = raw[start:start + nbytes].view(dtype).reshape(shape)
    _OWNED[id(array)] = array
    return array


def is_owned(array: np.ndarray) -> bool:
    """Whether ``array`` is a buffer from ``owned_empty`` (the same object, not a view of it)."""
    return _OWNED.get(id(array)) is array
