"""The fast path of ``fn.resize`` for 2-D frames: batched tap planning and a compiled separable kernel.

``jaxdali.ops.resize`` defines what a resize computes (DALI's geometry, filters and pixel centres);
this module computes the same thing faster for the common case, a (H, W, C) frame with C <= 4:

* ``batch_axis_taps`` computes the taps (input rows and weights) of one axis for a whole batch with
  a handful of NumPy calls, instead of a few dozen small calls per sample. Its arithmetic is the
  per-sample ``resize.axis_taps`` element for element, so the weights are the same bits.
* ``resample_frame`` applies both axes' taps in one call to the compiled kernel
  (``_resample_kernel.c``), which releases the GIL, reads the input in its own type and writes the
  rounded, saturated output directly: no float32 copy of the frame, no transposes, and at most one
  float32 block of the size of the W-resampled input (none when rows go first).

The kernel is optional: where it is not built, was built from another version of its source (a stale
editable install), or config ``disable_kernel`` (``JAXDALI_DISABLE_KERNEL=1``) is set, ``resample_frame``
runs ``_resample_numpy``, which computes the same values bit for bit, slower. ``kernel_status()`` says
which path runs and why.
"""

from __future__ import annotations

import hashlib
import math
import pathlib
import threading
import warnings

import cv2
import numpy as np

from jaxdali.core import options
from jaxdali.ops import _resample_numpy

__all__ = ["batch_axis_taps", "tap_sum", "resample_frame", "frame_supported", "kernel_status"]

_KERNEL_SOURCE = pathlib.Path(__file__).with_name("_resample_kernel.c")


def _load_kernel():
    """The compiled kernel's ``resample`` and why it is used, or None and why not."""
    try:
        from jaxdali.ops import _resample_kernel as module
    except ImportError as e:
        return None, f"not built ({e}); a C compiler at install time builds it"
    if not _KERNEL_SOURCE.is_file():  # an installation without the source: nothing to compare with
        return module.resample, f"{module.__file__} (source not installed, not checked)"
    # setup.py compiles the hash of the source (line endings normalised) into the module.
    expected = "0x" + hashlib.sha256(_KERNEL_SOURCE.read_bytes().replace(b"\r\n", b"\n")).hexdigest()
    built = getattr(module, "SOURCE_SHA256", None)
    if built != expected:
        reason = (f"{module.__file__} was built from another version of {_KERNEL_SOURCE.name}; rebuild it with "
                  "`pip install -e .` (or `python setup.py build_ext --inplace`)")
        warnings.warn(f"jaxdali ignores its compiled resize kernel: {reason}. Resizing uses the NumPy path "
                      "(same results, slower).", RuntimeWarning, stacklevel=2)
        return None, f"stale: {reason}"
    return module.resample, f"{module.__file__}, built from this source"


_KERNEL, _KERNEL_REASON = _load_kernel()


def kernel_status() -> tuple[str, str]:
    """Which implementation ``resample_frame`` runs, ``"compiled kernel"`` or ``"numpy fallback"``, and why."""
    if options.get("disable_kernel"):
        return "numpy fallback", "disabled by config 'disable_kernel' (JAXDALI_DISABLE_KERNEL)"
    if _KERNEL is None:
        return "numpy fallback", f"compiled kernel {_KERNEL_REASON}"
    return "compiled kernel", _KERNEL_REASON

_CV2_DEPTH = {np.dtype(np.uint8): cv2.CV_8U, np.dtype(np.uint16): cv2.CV_16U, np.dtype(np.int16): cv2.CV_16S,
              np.dtype(np.float32): cv2.CV_32F}


def frame_supported(dtype: np.dtype, out_dtype: np.dtype, channels: np.ndarray) -> np.ndarray:
    """Whether ``resample_frame`` handles frames of this input type, output type and channel count, for
    each of ``channels`` (an array: one answer per sample)."""
    channels = np.asarray(channels)
    types_ok = np.dtype(dtype) in _CV2_DEPTH and np.dtype(out_dtype) in _CV2_DEPTH
    return types_ok & (channels >= 1) & (channels <= 4)


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
    # Element-wise work in (K, n, m) order: NumPy's inner loops then run over m, not over K (a few
    # taps), ~3x faster; the weights are normalised by their sum in tap order, as in axis_taps.
    j = first[None] + np.arange(k_max)[:, None, None]
    w = kernel((j + 0.5 - c[None]) / k[None, :, None])
    total = tap_sum(w)
    w = (w / np.where(total != 0, total, 1.0)[None]).astype(np.float32)
    j = np.clip(j, 0, (np.asarray(in_len, np.int64) - 1)[None, :, None]).astype(np.int32)
    j, w = np.ascontiguousarray(j.transpose(1, 2, 0)), np.ascontiguousarray(w.transpose(1, 2, 0))
    # A sample with the batch's tap count gets views (its rows of a C-contiguous block), not copies.
    return [(j[i, :m], w[i, :m]) if kk == k_max else (np.ascontiguousarray(j[i, :m, :kk]),
                                                       np.ascontiguousarray(w[i, :m, :kk]))
            for i, (m, kk) in enumerate(zip(out_len.tolist(), taps.tolist()))]


def tap_sum(w: np.ndarray) -> np.ndarray:
    """The sum over the leading (tap) axis of ``w``, added in tap order: ((w0 + w1) + w2) + ... (NumPy's
    own sums switch to pairwise order from 8 terms, and their order depends on the memory layout)."""
    total = w[0].copy()
    for t in range(1, len(w)):
        total += w[t]
    return total


# -- one frame -------------------------------------------------------------------------------------------


def resample_frame(src: np.ndarray, taps_h, taps_w, out: np.ndarray, order: bool | None = None) -> None:
    """Resizes one (H, W, C) frame into ``out`` (H', W', C) with separable taps.

    ``taps_h``/``taps_w`` are ``(index, weights)`` pairs as from ``batch_axis_taps`` (int32, float32),
    or None for an axis that keeps its extent and window. ``src`` and ``out`` have contiguous rows
    (a window of rows or whole columns of a larger frame is fine); their types are those in
    ``frame_supported``. ``order``: run the H pass first (True) or the W pass first (False); None:
    ``rows_first`` of these shapes (a window of a larger output passes the full output's order, so
    its values are the full output's). Integer outputs are rounded half to even and saturated.
    """
    if order is None:
        order = rows_first(src.shape, out.shape, taps_h, taps_w)
    if src.strides[1:] != (src.shape[2] * src.itemsize, src.itemsize):
        src = np.ascontiguousarray(src)
    kernel = _KERNEL if _KERNEL is not None and not options.get("disable_kernel") else _resample_numpy.resample
    kernel(src, taps_h, taps_w, out, order)


def rows_first(src_shape, out_shape, taps_h, taps_w) -> bool:
    """The pass order of ``resample_frame``: the cheaper one for the kernel, by multiply-adds, where a
    W-pass tap (gathered, one vector per pixel) costs ``_GATHER_COST`` times a channel's H-pass tap
    (contiguous rows, vectorised)."""
    h, w = src_shape[:2]
    oh, ow = out_shape[:2]
    kh = taps_h[0].shape[1] if taps_h is not None else 0
    kw = taps_w[0].shape[1] if taps_w is not None else 0
    return oh * kh * w + _GATHER_COST * oh * ow * kw <= _GATHER_COST * h * ow * kw + oh * kh * ow


#: Time of a W-pass tap relative to an H-pass tap, per channel (measured: ~0.21 against ~0.13 ns).
_GATHER_COST = 1.6


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
