"""The compiled kernel's ``resample`` (``_resample_kernel.c``) in NumPy: same arguments, checks and values.

``jaxdali.ops.resample`` runs this where the kernel is not built, is disabled (``JAXDALI_DISABLE_KERNEL``)
or was built from another version of its source. Every pass is computed tap by tap with whole-array
float32 operations, ``acc = 0 + w[0] * x[0]``, then ``acc = acc + w[j] * x[j]``: the kernel's sums in the
kernel's order (NumPy neither fuses a multiply with an add nor reorders element-wise operations), so
the outputs are the kernel's bit for bit. Slower than the kernel (it holds float32 copies of the
gathered rows and does not release the GIL between passes), never different.
"""

from __future__ import annotations

import numpy as np

__all__ = ["resample"]

_TYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int16), np.dtype(np.float32))


def resample(src: np.ndarray, taps_h, taps_w, out: np.ndarray, rows_first: bool) -> None:
    """Resizes the (H, W, C) frame ``src`` into ``out`` (H', W', C) with separable taps (as the kernel).

    ``taps_h``, ``taps_w``: (index, weights) pairs, int32 and float32 arrays of shape (H', K) and
    (W', K), or None for an axis that keeps its extent. ``rows_first``: apply ``taps_h`` first (True)
    or ``taps_w`` first. Integer outputs are rounded half to even and saturated (NaN gives the type's
    minimum).
    """
    _check_frame(src, "src")
    _check_frame(out, "out")
    if not out.flags.writeable:
        raise ValueError("resample: out is read-only")
    h, w, c = src.shape
    oh, ow = out.shape[:2]
    if out.shape[2] != c:
        raise ValueError(f"resample: out has {out.shape[2]} channels, src {c}")
    taps_h = _check_taps(taps_h, h, oh, "H")
    taps_w = _check_taps(taps_w, w, ow, "W")
    if (taps_h is None and oh != h) or (taps_w is None and ow != w):
        raise ValueError("resample: an axis without taps must keep its extent")
    if out.size == 0:
        return
    if not rows_first and taps_w is not None:
        # Only the input rows the H taps read, each resampled along W, then combined along H.
        lo, hi = (taps_h[0].min(), taps_h[0].max()) if taps_h is not None else (0, h - 1)
        result = _pass(src[lo:hi + 1], _shifted(taps_w, 0), axis=1)
        if taps_h is not None:
            result = _pass(result, _shifted(taps_h, lo), axis=0)
    else:
        # Only the columns the W taps read are combined along H.
        lo, hi = (taps_w[0].min(), taps_w[0].max()) if taps_w is not None else (0, w - 1)
        window = src[:, lo:hi + 1]
        result = _pass(window, taps_h, axis=0) if taps_h is not None else window.astype(np.float32)
        if taps_w is not None:
            result = _pass(result, _shifted(taps_w, lo), axis=1)
    _store(result, out)


def _pass(x: np.ndarray, taps, axis: int) -> np.ndarray:
    """One pass along ``axis`` (0: rows, 1: columns) of an (H, W, C) array: the float32 sums in tap order."""
    index, weights = taps
    x = x.astype(np.float32, copy=False)  # exact for every input type; float32 loops are the fast ones
    if axis == 1:  # columns as rows: a gather of whole rows is a row copy, a gather of columns is not
        x = np.ascontiguousarray(x.transpose(1, 0, 2))
    acc = np.take(x, index[:, 0], axis=0)
    acc *= weights[:, 0, None, None]
    acc += np.float32(0)  # the kernel's 0 + w * x: a product of -0 becomes +0, as there
    term = np.empty_like(acc)
    for j in range(1, index.shape[1]):
        np.take(x, index[:, j], axis=0, out=term)
        term *= weights[:, j, None, None]
        acc += term
    return acc if axis == 0 else acc.transpose(1, 0, 2)


def _shifted(taps, lo: int):
    """Taps whose indices count from ``lo`` (they read a window of the input that starts there)."""
    return taps if lo == 0 else (taps[0] - np.int32(lo), taps[1])


def _store(result: np.ndarray, out: np.ndarray) -> None:
    if out.dtype.kind in "iu":
        info = np.iinfo(out.dtype)
        np.fmax(result, np.float32(info.min), out=result)  # fmax: NaN gives the minimum, as in the kernel
        np.fmin(result, np.float32(info.max), out=result)
        np.rint(result, out=result)
    np.copyto(out, result, casting="unsafe")


def _check_frame(x, name: str) -> None:
    if not isinstance(x, np.ndarray) or x.ndim != 3 or x.dtype not in _TYPES:
        raise ValueError(f"resample: {name} must be an (H, W, C) uint8, uint16, int16 or float32 array "
                         f"(got {getattr(x, 'ndim', '?')} dimensions, dtype {getattr(x, 'dtype', type(x))})")


def _check_taps(pair, in_len: int, out_len: int, axis: str):
    if pair is None:
        return None
    index, weights = (np.asarray(a) for a in pair)
    if index.ndim != 2 or weights.ndim != 2 or index.dtype != np.int32 or weights.dtype != np.float32 or \
            index.shape != weights.shape or index.shape[0] != out_len or index.shape[1] < 1:
        raise ValueError(f"resample: the {axis} taps must be int32 and float32 arrays of shape ({out_len}, K >= 1)")
    bad = np.flatnonzero((index < 0) | (index >= in_len))
    if bad.size:
        raise ValueError(f"resample: {axis} tap index {index.flat[bad[0]]} is outside the input's {in_len}")
    return index, weights
