"""DALI's value arithmetic shared by host (NumPy) and device (``jax.numpy``) implementations.

* ``round_half_away``: C's ``round``, exact on host and device;
* ``separate_product``: keeps a product out of a fused multiply-add on the device;
* ``convert``: DALI's saturating type conversion.

Each is written once as a function of ``xp`` so host and device give the same bits.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["round_half_away", "separate_product", "convert"]


def round_half_away(x, xp=np):
    """Rounds to the nearest integer, halves away from zero (C's ``round``); exact on host and device."""
    if xp is np:
        r = np.rint(x)  # halves to even; x - r is exact, so the halves are found exactly and moved away
        tie = np.abs(x - r) == 0.5
        return np.where(tie, x + np.copysign(0.5, x).astype(r.dtype), r) if tie.any() else r
    from jax import lax

    return lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO)


def separate_product(p, xp=np):
    """Returns the float product ``p`` unchanged, rounded on its own.

    XLA (CPU and GPU) contracts ``a * b + c`` into a fused multiply-add, which rounds once where
    NumPy rounds twice. On the device the product goes through a select that LLVM cannot prove
    redundant (``p > max`` holds only for +inf, which it maps to +inf), so the addition stays
    separate and device results equal host results bit for bit. (A NaN test is not enough: LLVM
    knows that products of converted integers are never NaN.) On the host this is the identity.
    """
    if xp is np:
        return p
    big = np.finfo(p.dtype).max
    return xp.where(p > big, xp.asarray(np.inf, p.dtype), p)


def _float_bounds(src: np.dtype, info: np.iinfo) -> tuple[float, float]:
    fmax = float(np.finfo(src).max)
    hi = float(info.max) + 1.0  # a power of two: exact in every float type that can hold it
    lo = float(info.min)
    return (hi if hi <= fmax else math.inf), (lo if lo >= -fmax else -math.inf)


def convert(x, dtype: Any, xp=np, rounding: str = "round"):
    """Converts ``x`` to ``dtype`` as DALI does: saturating, with float -> integer rounding.

    * float -> integer: round (``"round"``: half away from zero; ``"truncate"``: toward zero), then
      clamp to the type's range; NaN becomes 0.
    * integer -> narrower integer: clamp.
    * anything -> bool: non-zero (after rounding a float) is True; -> float: the nearest value (inf when out of range).

    ``xp`` is ``numpy`` or ``jax.numpy``; both give identical results.
    """
    dtype = np.dtype(dtype)
    if np.dtype(x.dtype) == dtype:
        return x
    if xp is np:
        with np.errstate(invalid="ignore", over="ignore"):  # NaN and overflow are handled below
            return _convert(x, dtype, np, rounding)
    return _convert(x, dtype, xp, rounding)


def _convert(x, dtype: np.dtype, xp, rounding: str):
    src = np.dtype(x.dtype)
    if dtype == np.bool_:  # as DALI: a float is rounded first (0.49 -> False, NaN -> True)
        return (round_half_away(x, xp) if src.kind == "f" else x) != 0
    if dtype.kind == "f" or src == np.bool_:
        return x.astype(dtype)
    info = np.iinfo(dtype)
    top = xp.asarray(info.max, dtype=dtype)
    bottom = xp.asarray(info.min, dtype=dtype)
    if src.kind == "f":
        r = round_half_away(x, xp) if rounding == "round" else xp.trunc(x)
        if xp is np and float(src.type(info.max)) == info.max:  # the bounds are exact in src: clamp in place
            r = np.asarray(r)
            np.clip(r, src.type(info.min), src.type(info.max), out=r)
            np.copyto(r, 0, where=np.isnan(r))
            return r.astype(dtype)
        hi, lo = _float_bounds(src, info)
        inside = (r < hi) & (r > lo)
        safe = xp.where(inside, r, xp.zeros((), src)).astype(dtype)
        return xp.where(r >= hi, top, xp.where(r <= lo, bottom, safe))
    src_info = np.iinfo(src)
    lo, hi = max(info.min, src_info.min), min(info.max, src_info.max)
    if lo > src_info.min or hi < src_info.max:
        x = xp.clip(x, xp.asarray(lo, dtype=src), xp.asarray(hi, dtype=src))
    return x.astype(dtype)
