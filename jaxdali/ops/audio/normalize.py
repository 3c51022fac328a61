"""DALI's normalising type conversion of audio samples (``ConvertSatNorm``).

Integers stand for the range -1..1: a signed type maps ``x`` to ``x / max``, an unsigned type maps
its midpoint to 0 (``(x - max / 2) / (max / 2)``). Converting goes through that range in float64
and rounds half away from zero, saturating at the target type's limits.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.convert import round_half_away

__all__ = ["to_unit_range", "from_unit_range", "convert_normalized"]


def to_unit_range(x: np.ndarray, dtype: np.dtype | None = None, source: np.dtype | None = None) -> np.ndarray:
    """``x`` as float (``dtype``, default float32) in -1..1: values of an integer ``source`` type (by
    default ``x``'s own type) are scaled down; float sources are kept as they are."""
    out_dtype = np.dtype(dtype or np.float32)
    src = np.dtype(source or x.dtype)
    if src.kind == "f":
        return x.astype(out_dtype, copy=False)
    info = np.iinfo(src)
    if src.kind == "u":
        half = info.max / 2.0
        return ((x.astype(np.float64) - half) / half).astype(out_dtype)
    return (x.astype(np.float64) / info.max).astype(out_dtype)


def from_unit_range(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Float samples in -1..1 as ``dtype``: integers scaled to their full range, rounded, saturated."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return x.astype(dtype, copy=False)
    info = np.iinfo(dtype)
    if dtype.kind == "u":
        half = info.max / 2.0
        scaled = x.astype(np.float64) * half + half
    else:
        scaled = x.astype(np.float64) * info.max
    return np.clip(round_half_away(scaled), info.min, info.max).astype(dtype)


def convert_normalized(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` converted to ``dtype`` through the -1..1 range (no change when the type is the same)."""
    dtype = np.dtype(dtype)
    if np.dtype(x.dtype) == dtype:
        return x
    return from_unit_range(to_unit_range(x, np.float64), dtype)
