"""Host batch buffers that operators own and that the device stage may hand to JAX without a copy."""

from __future__ import annotations

import math
import weakref

import numpy as np

__all__ = ["owned_empty", "is_owned"]


_OWNED: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()


def owned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised array, 64-byte aligned, registered as a pipeline-owned batch buffer.

    Operators allocate their dense outputs with it. Such a buffer is written once by its operator and
    never handed out as a NumPy array in device-output mode, so ``place_on_device`` may let the
    ``jax.Array`` use its memory directly (no copy on a CPU device).
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    array = raw[start:start + nbytes].view(dtype).reshape(shape)
    _OWNED[id(array)] = array
    return array


def is_owned(array: np.ndarray) -> bool:
    """Whether ``array`` is a buffer from ``owned_empty`` (the same object, not a view of it)."""
    return _OWNED.get(id(array)) is array
