"""The fast path of ``fn.resize`` for 2-D frames: batched tap planning and sparse separable passes.

``jaxdali.ops.resize`` defines what a resize computes (DALI's geometry, filters and pixel centres);
this module computes the same thing faster for the common case, a (H, W, C) frame with C <= 4:

* ``batch_axis_taps`` computes the taps (input rows and weights) of one axis for a whole batch with
  a handful of NumPy calls, instead of a few dozen small calls per sample. Its arithmetic is the
  per-sample ``resize.axis_taps`` element for element, so the weights are the same bits.
* ``resample_frame`` runs the two 1-D passes as sparse (CSR) matrix products with SciPy's compiled
  kernel, which releases the GIL, on float32 data; the second pass runs on the transposed
  intermediate (``cv2.transpose``), and the result is rounded and saturated by OpenCV
  (``cv2.add(..., dtype=...)``, round half to even, the same as ``np.rint``). Intermediates live in
  per-thread scratch buffers that are reused from sample to sample, so a batch does not allocate
  (and page-fault) megabytes per image.

A sample costs about ten library calls here, so worker threads spend their time outside the GIL.
SciPy is already installed as a dependency of JAX; when its private kernel module is missing, the
public ``csr_matrix @ x`` product is used (same values, one allocation more).
"""

from __future__ import annotations

import math
import threading

import cv2
import numpy as np

__all__ = ["batch_axis_taps", "resample_frame", "frame_supported"]

_csr_kernels = None  # SciPy's compiled CSR kernels (y += A @ x, in place, without the GIL); see _kernels


def _kernels():
    """SciPy's compiled ``_sparsetools`` module, loaded on first use, or False where this SciPy has none.

    The extension is loaded from its file without importing the ``scipy.sparse`` package: that import
    takes ~0.13 s (array-API shims, the sparse classes), which the first batch of every pipeline that
    resizes would otherwise wait for, and the kernel needs none of it (only NumPy's C API).
    """
    global _csr_kernels
    if _csr_kernels is None:
        _csr_kernels = _load_sparsetools()
    return _csr_kernels


def _load_sparsetools():
    import importlib.machinery
    import importlib.util
    import os
    import sys

    import scipy

    name = "scipy.sparse._sparsetools"
    if name in sys.modules:
        return sys.modules[name]
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(scipy.__path__[0], "sparse", "_sparsetools" + suffix)
        if os.path.exists(path):
            spec = importlib.util.spec_from_loader(name, importlib.machinery.ExtensionFileLoader(name, path))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    try:  # pragma: no cover - a SciPy that lays its modules out differently
        from scipy.sparse import _sparsetools
        return _sparsetools
    except ImportError:  # pragma: no cover
        return False

_CV2_DEPTH = {np.dtype(np.uint8): cv2.CV_8U, np.dtype(np.uint16): cv2.CV_16U, np.dtype(np.int16): cv2.CV_16S,
              np.dtype(np.float32): cv2.CV_32F}


def frame_supported(dtype: np.dtype, out_dtype: np.dtype, channels: int) -> bool:
    """Whether ``resample_frame`` handles frames of this input type, output type and channel count."""
    return np.dtype(dtype) in _CV2_DEPTH and np.dtype(out_dtype) in _CV2_DEPTH and 1 <= channels <= 4


# -- taps for a batch ------------------------------------------------------------------------------------


def batch_axis_taps(kernel, radius: float, in_len: np.ndarray, out_len: np.ndarray, lo: np.ndarray,
                    hi: np.ndarray, antialias: np.ndarray, accumulate: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """``resize.axis_taps`` for n samples at once (one filter; the filter must have a kernel).

    Args:
      kernel, radius: the filter (``resize._FILTERS[...]``).
      in_len, out_len, lo, hi: (n,) input extent, output extent and source window of each sample.
      antialias: (n,) bool, whether the kernel is widened by the scale factor when shrinking.
      accumulate: positions as DALI computes them along an outer spatial axis (float32 running sum).

    Returns:
      Per sample ``(index, weights)``: int32 (m, K) input rows, clamped to the input, and float32
      (m, K) weights, K the sample's own tap count (``ceil(2 * radius * max(1, step))``).
    """
    n = len(in_len)
    out_len = np.asarray(out_len, np.int64)
    lo = np.asarray(lo, np.float64)
    hi = np.asarray(hi, np.float64)
    m_max = int(out_len.max())
    step = (hi - lo) / out_len
    if accumulate:
        steps = np.broadcast_to(step.astype(np.float32)[:, None], (n, m_max)).copy()
        steps[:, 0] = (lo + 0.5 * step.astype(np.float32).astype(np.float64)).astype(np.float32)
        c = np.cumsum(steps, axis=1, dtype=np.float32).astype(np.float64)
    else:
        c = lo[:, None] + (np.arange(m_max) + 0.5)[None, :] * step[:, None]
    k = np.where(antialias, np.maximum(1.0, np.abs(step)), 1.0)
    reach = radius * k
    taps = np.maximum(1, np.ceil(2 * reach)).astype(np.int64)
    k_max = int(taps.max())
    first = np.floor(c - 0.5 - reach[:, None]).astype(np.int64) + 1
    j = first[:, :, None] + np.arange(k_max)[None, None, :]
    w = kernel((j + 0.5 - c[:, :, None]) / k[:, None, None])
    total = w.sum(axis=2, keepdims=True)
    w = (w / np.where(total != 0, total, 1.0)).astype(np.float32)
    j = np.clip(j, 0, (np.asarray(in_len, np.int64) - 1)[:, None, None]).astype(np.int32)
    result = []
    for i in range(n):
        m, kk = int(out_len[i]), int(taps[i])
        result.append((np.ascontiguousarray(j[i, :m, :kk]), np.ascontiguousarray(w[i, :m, :kk])))
    return result


# -- one frame -------------------------------------------------------------------------------------------


class _Scratch(threading.local):
    """Per-thread float32/uint8 buffers, grown on demand and reused between samples."""

    def __init__(self):
        self.buffers: dict = {}

    def get(self, name: str, shape: tuple, dtype=np.float32) -> np.ndarray:
        size = math.prod(shape)
        if size > _SCRATCH_LIMIT:  # a rare large image: a temporary, not kept for the thread's lifetime
            return np.empty(shape, dtype)
        buf = self.buffers.get((name, dtype))
        if buf is None or buf.size < size:
            buf = np.empty(max(size, 1 << 15), dtype)
            self.buffers[(name, dtype)] = buf
        return buf[:size].reshape(shape)


#: Largest scratch buffer (elements) kept per thread and name: 1.5 M elements, e.g. a 500 x 1000 RGB
#: frame (6 MB of float32).
_SCRATCH_LIMIT = 1 << 20 | 1 << 19


_SCRATCH = _Scratch()
_INDPTR: dict = {}


def _indptr(m: int, k: int) -> np.ndarray:
    key = (m, k)
    ptr = _INDPTR.get(key)
    if ptr is None:
        ptr = np.arange(0, m * k + 1, k, dtype=np.int32)
        if len(_INDPTR) < 4096:
            _INDPTR[key] = ptr
    return ptr


def _sparse_pass(index: np.ndarray, weights: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """y (m, R) = W @ x for x (n, R), W the (m, n) matrix with ``weights`` at ``index`` per row."""
    m, k = index.shape
    kernels = _csr_kernels or _kernels()
    if kernels:
        y.view(np.uint8).fill(0)  # byte fill: a plain memset, faster than a float32 fill
        kernels.csr_matvecs(m, x.shape[0], x.shape[1], _indptr(m, k), index.reshape(-1),
                                 weights.reshape(-1), x.reshape(-1), y.reshape(-1))
        return
    import scipy.sparse  # pragma: no cover - older or newer SciPy layouts

    a = scipy.sparse.csr_matrix((weights.reshape(-1), index.reshape(-1), _indptr(m, k)), shape=(m, x.shape[0]))
    np.copyto(y, a @ x)


def _finish(result: np.ndarray, out: np.ndarray, non_negative: bool = False) -> None:
    """float32 ``result`` into ``out``: rounded half to even and saturated for integer types.

    ``non_negative``: ``result`` holds no negative values, so for uint8 OpenCV's fastest conversion
    (``convertScaleAbs``: round, saturate, with an absolute value that changes nothing) applies.
    """
    if out.dtype == np.float32:
        np.copyto(out, result)
    elif non_negative and out.dtype == np.uint8:
        cv2.convertScaleAbs(result, dst=out)
    else:
        cv2.add(result, 0.0, dst=out, dtype=_CV2_DEPTH[out.dtype])


def resample_frame(src: np.ndarray, taps_h, taps_w, out: np.ndarray, non_negative_weights: bool = False,
                   order: bool | None = None) -> None:
    """Resizes one (H, W, C) frame into ``out`` (H', W', C) with separable taps.

    ``taps_h``/``taps_w`` are ``(index, weights)`` pairs as from ``batch_axis_taps`` (int32, float32),
    or None for an axis that keeps its extent and window. ``out`` must be C-contiguous; its type is
    one of those in ``frame_supported``. ``non_negative_weights``: every weight is >= 0 (LINEAR,
    TRIANGULAR, GAUSSIAN), which allows a faster final conversion for unsigned inputs. ``order``: run
    the H pass first (True) or the W pass first (False); None: ``rows_first`` of these shapes (a
    window of a larger output passes the full output's order, so its values are the full output's).
    """
    h, w, c = src.shape
    non_negative = non_negative_weights and src.dtype.kind == "u"
    if order is None:
        order = rows_first(src.shape, out.shape, taps_h, taps_w)
    if taps_h is None and taps_w is None:
        _finish(np.ascontiguousarray(src, np.float32), out)
        return
    scratch = _SCRATCH
    if order:
        _two_passes(src, taps_h, taps_w, out, False, non_negative, scratch)
        return
    t = scratch.get("t", (w, h, c), src.dtype)
    _transpose(np.ascontiguousarray(src), t)
    _two_passes(t, taps_w, taps_h, out, True, non_negative, scratch)


#: Elements of one strip of the first pass's output (see ``_two_passes``). Strips that fit a core's
#: L2 cache (64 K elements) were measured: no faster with one thread and slower with two (more
#: Python calls per image, so more GIL hand-offs), so by default a strip is the whole frame.
STRIP_ELEMENTS = 1 << 24


def _two_passes(a: np.ndarray, first, second, out: np.ndarray, out_transposed: bool, non_negative: bool,
                scratch: "_Scratch") -> None:
    """Both passes over ``a`` (n1, n2, C), the first along axis 0, in strips of its output rows.

    The result R (m1, m2, C) is ``out`` (``out_transposed`` False) or ``out`` transposed. Each strip
    of R's rows is computed from the input rows its taps read (converted to float32 there), through
    the first pass, a transpose and the second pass, then rounded into ``out``: the arithmetic of
    every output value is the same whatever the strip size; only the memory traffic shrinks.
    """
    n1, n2, c = a.shape
    m1 = first[0].shape[0] if first is not None else n1
    m2 = second[0].shape[0] if second is not None else n2
    rows = max(1, min(m1, STRIP_ELEMENTS // max(1, n2 * c)))
    for r0 in range(0, m1, rows):
        r1 = min(m1, r0 + rows)
        s = r1 - r0
        if first is not None and s == m1:  # one strip (the default): the whole input, no index shift
            x = scratch.get("x", (n1, n2 * c))
            np.copyto(x.reshape(n1, n2, c), a, casting="unsafe")
            v = scratch.get("v", (s, n2 * c))
            _sparse_pass(first[0], first[1], x, v)
        elif first is not None:
            index = first[0][r0:r1]
            lo, hi = int(index.min()), int(index.max()) + 1
            x = scratch.get("x", (hi - lo, n2 * c))
            np.copyto(x.reshape(hi - lo, n2, c), a[lo:hi], casting="unsafe")
            v = scratch.get("v", (s, n2 * c))
            _sparse_pass(index - np.int32(lo), first[1][r0:r1], x, v)
        else:
            v = scratch.get("v", (s, n2 * c))
            np.copyto(v.reshape(s, n2, c), a[r0:r1], casting="unsafe")
        if second is None:
            _store_strip(v.reshape(s, n2, c), out, r0, r1, out_transposed, False, non_negative, scratch)
            continue
        vt = scratch.get("vt", (n2, s, c))
        _transpose(v.reshape(s, n2, c), vt)
        r = scratch.get("r", (m2, s * c))
        _sparse_pass(*second, vt.reshape(n2, s * c), r)
        _store_strip(r.reshape(m2, s, c), out, r0, r1, out_transposed, True, non_negative, scratch)


def _store_strip(block: np.ndarray, out: np.ndarray, r0: int, r1: int, out_transposed: bool, block_transposed: bool,
                 non_negative: bool, scratch: "_Scratch") -> None:
    """Rows r0:r1 of R, given as ``block`` = R[r0:r1] or its transpose, rounded into ``out``."""
    # In out's orientation the strip is out[r0:r1] (rows) when R is out, else out[:, r0:r1] (columns).
    if block_transposed == out_transposed:  # the block is already in out's orientation
        if not out_transposed:
            _finish(block, out[r0:r1], non_negative)
        else:
            narrow = scratch.get("narrow", block.shape, out.dtype)
            _finish(block, narrow, non_negative)
            np.copyto(out[:, r0:r1], narrow)
        return
    narrow = scratch.get("narrow", block.shape, out.dtype)
    _finish(block, narrow, non_negative)
    if not out_transposed:
        _transpose(narrow, out[r0:r1])
    else:
        t = scratch.get("narrow_t", (block.shape[1], block.shape[0], block.shape[2]), out.dtype)
        _transpose(narrow, t)
        np.copyto(out[:, r0:r1], t)


def rows_first(src_shape, out_shape, taps_h, taps_w) -> bool:
    """The pass order of ``resample_frame``: passes run along the leading axis, the second one on the
    transposed intermediate; ordered by multiply-adds plus the float32 transpose of the intermediate."""
    h, w = src_shape[:2]
    oh, ow = out_shape[:2]
    kh = taps_h[0].shape[1] if taps_h is not None else 0
    kw = taps_w[0].shape[1] if taps_w is not None else 0
    return (oh * kh * w + ow * kw * oh + oh * w) <= (ow * kw * h + oh * kh * ow + ow * h)


def _transpose(src: np.ndarray, dst: np.ndarray) -> None:
    """(A, B, C) -> (B, A, C) into ``dst`` with OpenCV (C <= 4, any supported depth)."""
    if src.shape[2] == 1:
        cv2.transpose(src[:, :, 0], dst=dst[:, :, 0])
    else:
        cv2.transpose(src, dst=dst)


def linear_frame(src: np.ndarray, out: np.ndarray) -> None:
    """``cv2.resize(INTER_LINEAR)`` of a whole (H, W, C) frame into ``out``, computed on float32 (OpenCV's
    fixed-point integer path rounds with a bias) and rounded into ``out``'s type."""
    h, w, c = src.shape
    oh, ow = out.shape[:2]
    scratch = _SCRATCH
    x = scratch.get("x", (h, w, c))
    np.copyto(x, src, casting="unsafe")
    r = scratch.get("r", (oh, ow, c))
    if c == 1:
        cv2.resize(x[:, :, 0], (ow, oh), dst=r[:, :, 0], interpolation=cv2.INTER_LINEAR)
    else:
        cv2.resize(x, (ow, oh), dst=r, interpolation=cv2.INTER_LINEAR)
    _finish(r, out, src.dtype.kind == "u")
