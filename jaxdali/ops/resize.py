"""``fn.resize`` and ``fn.random_resized_crop``: resampling with DALI's size arithmetic and filters.

Two pure pieces do the work, and the operators only wire arguments to them:

* ``resize_geometry`` turns input extents, requested sizes, ``mode``, ``max_size``, a region of
  interest and ``subpixel_scale`` into output extents and the source window each output spans
  (vectorised over the batch; no I/O).
* ``resample`` resizes one sample. It is separable: one 1-D pass per spatial axis, each a gather of
  K neighbouring rows and a K-tap weighted sum (NumPy on whole images; ``cv2.resize`` where
  OpenCV computes the same thing).

Pixel-centre convention (DALI's, measured with a coordinate-ramp image): the source window
[lo, hi) along an axis of n output pixels puts output pixel i at source position
``c = lo + (i + 0.5) * (hi - lo) / n``, where input pixel j covers [j, j + 1) and has its centre at
j + 0.5. ``lo > hi`` is a flipped window. Along the outer spatial axes the positions are
accumulated in float32 from ``lo + 0.5 * step``, as DALI does, so nearest-neighbour picks the same
pixel at exact ties. Samples outside the image repeat the edge pixel.

Filters (their weights reproduce DALI 2.4's CPU output to within +-1 of rounding):

============  ==========================================  ========
interp_type   kernel                                      radius
============  ==========================================  ========
NN            the pixel that contains c (never smoothed)  --
LINEAR        triangle 1 - |x|                            1
CUBIC         Keys cubic with a = -0.5 (Catmull-Rom)      2
LANCZOS3      sinc(x) sinc(x / 3)                         3
GAUSSIAN      exp(-4 x^2)                                 1
TRIANGULAR    the same as LINEAR (deprecated name)        1
============  ==========================================  ========

A tap at input pixel j gets weight ``kernel((j + 0.5 - c) / k)``, normalised per output pixel, with
``k = max(1, step)`` when antialiasing (downscaling widens the kernel by the scale factor) and
``k = 1`` otherwise. OpenCV's own filters differ from these (INTER_AREA is a box, INTER_CUBIC uses
a = -0.75, INTER_LANCZOS4 has 8 taps), so ``cv2.resize(INTER_LINEAR)`` is used only where no
antialiasing applies and the window is the whole image, where it equals the LINEAR kernel; it runs
on float32 data, because its fixed-point integer path rounds with a bias.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Callable, Sequence

import cv2
import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.crop_window import check_ranges, crop_window_draws, random_crop_windows
from jaxdali.ops import resample as fast
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, REQUIRED, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, DALIInterpType, to_numpy_type

__all__ = [
    "MODES",
    "SpatialLayout",
    "resize_geometry",
    "axis_taps",
    "resample",
    "ResamplePlan",
    "plan_resample",
    "execute_plan",
    "allocate_batch",
    "RESIZE",
    "RANDOM_RESIZED_CROP",
]

#: Resize modes (DALI's ``mode`` argument).
MODES = ("default", "stretch", "not_larger", "not_smaller")

# -- size arithmetic ---------------------------------------------------------------------------------


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def resize_geometry(in_size, requested, mode: str = "default", max_size=None, roi_start=None, roi_end=None,
                    subpixel_scale: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Output extents and source windows of a resize, for a batch (DALI's size arithmetic).

    All per-axis arrays list the spatial axes in layout order (D, H, W).

    Args:
      in_size: (n, d) input extents.
      requested: (n, d) requested output extents; 0 = unspecified, negative = flip that axis.
        Fractional values are allowed (see ``subpixel_scale``).
      mode: how unspecified extents and ``max_size`` combine with the requested ones:
        ``default``: given extents are used as they are; missing ones are scaled by the geometric
        mean of the given scale factors; then each extent is clamped to ``max_size``.
        ``stretch``: given extents as they are; missing ones keep the input extent; clamped to
        ``max_size``.
        ``not_larger``: one scale for all axes, the smallest of the given scales and of
        ``max_size / extent``.
        ``not_smaller``: one scale for all axes, the largest of the given scales, reduced where
        it would exceed ``max_size``.
        With nothing specified the sample keeps its size (``max_size`` is not applied).
      max_size: None, or (d,) limits; entries <= 0 mean "no limit".
      roi_start, roi_end: None, or (n, d) absolute source window corners; start > end flips the
        axis, except an axis with an unspecified size in the default and stretch modes.
      subpixel_scale: when a requested (or derived) extent is fractional, the output extent is
        rounded, and the source window is resized around its centre so that the scale factor is
        the requested one. When False, the window is kept and the scale follows the rounded size.

    Returns:
      (out_size, src_lo, src_hi): int64 (n, d) output extents (round half away from zero, at least
      1 where the input axis is not empty, 0 where it is), and float64 (n, d) source window corners;
      output pixel i samples ``src_lo + (i + 0.5) * (src_hi - src_lo) / out_size``.
    """
    in_size = np.asarray(in_size, np.float64)
    n, d = in_size.shape
    req = np.broadcast_to(np.asarray(requested, np.float64), (n, d))
    lo = np.zeros((n, d)) if roi_start is None else np.broadcast_to(np.asarray(roi_start, np.float64), (n, d))
    hi = in_size if roi_end is None else np.broadcast_to(np.asarray(roi_end, np.float64), (n, d))
    # A window given backwards flips the axis, except (as in DALI) an axis whose size is unspecified
    # in the default and stretch modes, which reads it forwards. A negative size flips (again).
    unspecified = (req == 0) & (mode in ("default", "stretch"))
    lo, hi = np.where(unspecified, np.minimum(lo, hi), lo), np.where(unspecified, np.maximum(lo, hi), hi)
    flip = req < 0
    lo, hi = np.where(flip, hi, lo), np.where(flip, lo, hi)
    extent = np.abs(hi - lo)
    req = np.abs(req)
    empty_input = in_size <= 0
    # Axes that can carry a scale factor: requested, with a non-empty window.
    given = (req > 0) & (extent > 0) & ~empty_input
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(given, req / np.where(extent > 0, extent, 1.0), np.nan)
    limit = np.full(d, np.inf)
    if max_size is not None:
        m = np.broadcast_to(np.asarray(max_size, np.float64), (d,))
        limit = np.where(m > 0, m, np.inf)
    any_given = given.any(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        limit_scale = np.where(extent > 0, limit / np.where(extent > 0, extent, 1.0), np.inf)
    if mode in ("default", "stretch"):
        if mode == "default":
            logs = np.where(given, np.log(np.where(given, scale, 1.0)), 0.0)
            count = given.sum(axis=1, keepdims=True)
            mean_scale = np.exp(logs.sum(axis=1, keepdims=True) / np.maximum(count, 1))
            missing = extent * mean_scale
        else:
            missing = extent
        target = np.where(given, req, missing)
        target = np.where(any_given, np.minimum(target, limit), target)
    elif mode in ("not_larger", "not_smaller"):
        if mode == "not_larger":
            common = np.min(np.where(given, scale, np.inf), axis=1, keepdims=True)
            common = np.minimum(common, limit_scale.min(axis=1, keepdims=True))
        else:
            common = np.max(np.where(given, scale, -np.inf), axis=1, keepdims=True)
            common = np.minimum(common, limit_scale.min(axis=1, keepdims=True))
        target = np.where(any_given, extent * common, extent)
    else:
        raise ValueError(f"resize_geometry: mode must be one of {MODES}, got {mode!r}")
    # An axis whose window is empty (but whose input is not) gets the requested extent or 1.
    target = np.where((extent <= 0) & ~empty_input, np.where(req > 0, req, 1.0), target)
    out = np.maximum(_round_half_away(target), 1.0)
    out = np.where(empty_input, 0.0, out)
    if subpixel_scale:
        with np.errstate(divide="ignore", invalid="ignore"):
            new_extent = np.where(target > 0, out * extent / np.where(target > 0, target, 1.0), extent)
        centre = (lo + hi) / 2
        half = np.copysign(new_extent / 2, hi - lo)
        lo, hi = np.where(extent > 0, centre - half, lo), np.where(extent > 0, centre + half, hi)
    return out.astype(np.int64), np.asarray(lo, np.float64), np.asarray(hi, np.float64)


# -- filters and the 1-D passes ----------------------------------------------------------------------


def _triangle(x):
    return np.maximum(0.0, 1.0 - np.abs(x))


def _cubic(x):
    a = -0.5
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


def _lanczos3(x):
    return np.where(np.abs(x) < 3, np.sinc(x) * np.sinc(x / 3), 0.0)


def _gaussian(x):
    return np.where(np.abs(x) < 1, np.exp(-4.0 * x * x), 0.0)


@dataclasses.dataclass(frozen=True)
class _Filter:
    kernel: Callable[[np.ndarray], np.ndarray] | None  # None: nearest neighbour
    radius: float


_FILTERS = {
    DALIInterpType.INTERP_NN: _Filter(None, 0.0),
    DALIInterpType.INTERP_LINEAR: _Filter(_triangle, 1.0),
    DALIInterpType.INTERP_CUBIC: _Filter(_cubic, 2.0),
    DALIInterpType.INTERP_LANCZOS3: _Filter(_lanczos3, 3.0),
    DALIInterpType.INTERP_GAUSSIAN: _Filter(_gaussian, 1.0),
    # DALI 2.4 treats the deprecated TRIANGULAR as LINEAR: antialiased only when `antialias` is set
    # (its default), so TRIANGULAR with antialias=False gives plain linear interpolation.
    DALIInterpType.INTERP_TRIANGULAR: _Filter(_triangle, 1.0),
}


def _positions(out_len: int, lo: float, hi: float, accumulate: bool, single: bool = False) -> np.ndarray:
    """Source positions of the output pixel centres.

    DALI computes the positions along the innermost spatial axis (W) directly, and along the outer
    axes by adding the step in float32; the drift of the latter decides which pixel nearest
    neighbour picks at exact ties (e.g. 240 -> 600 rows), so it is reproduced. ``single``: compute
    the direct positions in float32 too, as DALI's nearest neighbour does (lo + (i + 0.5) * step,
    rounded after the product and after the sum), so that it floors to the same pixel at exact
    ties along W (e.g. 6 -> 147 columns).
    """
    step = (hi - lo) / out_len
    if not accumulate and single:
        f32 = np.float32
        step32 = f32(f32(hi) - f32(lo)) / f32(out_len)
        return (f32(lo) + (np.arange(out_len) + 0.5).astype(f32) * step32).astype(np.float64)
    if not accumulate:
        return lo + (np.arange(out_len) + 0.5) * step
    steps = np.full(out_len, np.float32(step), np.float32)
    steps[0] = np.float32(lo + 0.5 * float(np.float32(step)))
    return np.cumsum(steps, dtype=np.float32).astype(np.float64)


def axis_taps(in_len: int, out_len: int, lo: float, hi: float, interp: DALIInterpType,
              antialias: bool, accumulate: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Input indices and weights of a 1-D resampling pass.

    Returns ``(index, None)`` with index of shape (out_len,) for nearest neighbour, else
    ``(index, weights)`` of shape (out_len, K): output i = sum_k weights[i, k] * input[index[i, k]].
    Indices are clamped to the input (edge pixels repeat). ``accumulate``: compute the positions
    as DALI does along an outer spatial axis (see ``_positions``).
    """
    filt = _FILTERS[DALIInterpType(interp)]
    c = _positions(out_len, lo, hi, accumulate, single=filt.kernel is None)
    if filt.kernel is None:
        return np.clip(np.floor(c).astype(np.int64), 0, in_len - 1), None
    step = abs(hi - lo) / out_len
    k = max(1.0, step) if antialias else 1.0
    reach = filt.radius * k
    taps = max(1, int(math.ceil(2 * reach)))
    first = np.floor(c - 0.5 - reach).astype(np.int64) + 1
    j = first[:, None] + np.arange(taps)[None, :]
    w = filt.kernel((j + 0.5 - c[:, None]) / k)
    total = fast.tap_sum(w.T)[:, None]
    w = w / np.where(total != 0, total, 1.0)
    return np.clip(j, 0, in_len - 1), w.astype(np.float32)


def _rows(x: np.ndarray, index: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """A pass along axis 0 of a C-contiguous array: gather K rows per output row, weighted sum."""
    flat = x.reshape(x.shape[0], -1)
    if weights is None:
        out = flat[index]
    else:
        gathered = flat[index]  # (m, K, R): whole rows, so the gather is a row copy
        if gathered.dtype != np.float32:
            gathered = gathered.astype(np.float32)
        out = np.matmul(weights[:, None, :], gathered)
    return out.reshape((index.shape[0],) + x.shape[1:])


def _swap_hw(x: np.ndarray) -> np.ndarray:
    """(H, W, C) -> (W, H, C), C-contiguous (OpenCV's transpose for pixels of up to 32 bytes)."""
    if x.shape[2] == 1:
        return cv2.transpose(x[:, :, 0])[:, :, None]
    if x.shape[2] <= 4 and x.dtype.itemsize <= 8 and x.dtype != np.int8:
        return cv2.transpose(x)
    return np.ascontiguousarray(x.swapaxes(0, 1))


def _apply_pass(x: np.ndarray, axis: int, index: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """A pass along any axis (the general N-D path): move the axis first, then ``_rows``."""
    moved = np.ascontiguousarray(np.moveaxis(x, axis, 0))
    return np.moveaxis(_rows(moved, index, weights), 0, axis)


# -- one sample -----------------------------------------------------------------------------------------

_CV2_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int16), np.dtype(np.float32))


def _store(result: np.ndarray, out: np.ndarray, owned: bool = True) -> None:
    """Writes ``result`` into ``out``, rounding and saturating for integer outputs (in place in
    ``result`` when the caller ``owned`` it)."""
    if out.dtype.kind in "iu" and result.dtype.kind == "f":
        info = np.iinfo(out.dtype)
        if not owned:
            result = result.copy()
        np.clip(result, info.min, info.max, out=result)
        np.rint(result, out=result)
    np.copyto(out, result, casting="unsafe")


@dataclasses.dataclass(frozen=True)
class ResamplePlan:
    """How one sample is resized: nothing (a copy), ``cv2.resize``, or 1-D passes with their taps.

    Attributes:
      taps: spatial axis -> (index, weights) of its pass (see ``axis_taps``); axes that keep their
        extent and window are left out.
      cv2_linear: the whole resize is OpenCV's INTER_LINEAR (see ``_cv2_linear_ok``).
    """

    taps: dict
    cv2_linear: bool = False
    #: 2-D frames of up to 4 channels in OpenCV types: ``jaxdali.ops.resample`` runs the passes (the
    #: taps are then int32 indices and float32 weights).
    fast: bool = False


def plan_resample(shape: Sequence[int], dtype: np.dtype, axes: Sequence[int], out_size: Sequence[int],
                  lo: Sequence[float], hi: Sequence[float], min_filter: DALIInterpType, mag_filter: DALIInterpType,
                  antialias: bool, taps_cache: dict | None = None) -> ResamplePlan:
    """The plan of ``resample`` for a sample of ``shape`` and ``dtype`` (arguments as there).

    ``taps_cache`` (a dict kept by the caller across samples) shares the taps of equal geometries.
    Planning is light Python work; ``execute_plan`` does the heavy, GIL-free part.
    """
    axes = list(axes)
    passes = {}  # axis -> (filter, n, m, lo, hi)
    for a, m, l, h in zip(axes, out_size, lo, hi):
        n = shape[a]
        if not (l == 0 and h == n and m == n):  # else the identity
            passes[a] = (min_filter if abs(h - l) > m else mag_filter, n, int(m), float(l), float(h))
    if _is_2d(axes) and _cv2_linear_ok(dtype, int(np.prod(shape[axes[1] + 1:])), passes.values(), antialias):
        return ResamplePlan({}, cv2_linear=True)
    taps = {}
    for a, (f, n, m, l, h) in passes.items():
        key = (f, n, m, l, h, antialias, a != axes[-1])
        value = taps_cache.get(key) if taps_cache is not None else None
        if value is None:
            value = axis_taps(n, m, l, h, f, antialias, accumulate=a != axes[-1])
            if taps_cache is not None:
                taps_cache[key] = value
        taps[a] = value
    return ResamplePlan(taps)


def plan_batch(shapes: np.ndarray, dtype: np.dtype, out_dtype: np.dtype, axes: Sequence[int], out_size: np.ndarray,
               lo: np.ndarray, hi: np.ndarray, min_f: np.ndarray, mag_f: np.ndarray,
               antialias: bool) -> list[ResamplePlan]:
    """``plan_resample`` for every sample of a batch with two adjacent spatial axes, vectorised.

    Decisions (identity axes, filter per axis, the OpenCV path) are made with array operations, and
    the taps of all samples that share a filter and a tap count are computed together
    (``resample.batch_axis_taps``); the values are those of ``plan_resample``.
    """
    n = len(shapes)
    axes = list(axes)
    shapes = np.asarray(shapes, np.int64).reshape(n, -1)
    in_ext = shapes[:, axes].astype(np.float64)
    out_size = np.asarray(out_size, np.int64).reshape(n, len(axes))
    lo = np.asarray(lo, np.float64).reshape(n, len(axes))
    hi = np.asarray(hi, np.float64).reshape(n, len(axes))
    channels = np.prod(shapes[:, axes[1] + 1:], axis=1) if shapes.shape[1] > axes[1] + 1 else np.ones(n, np.int64)
    active = ~((lo == 0) & (hi == in_ext) & (out_size == in_ext))
    shrinks = np.abs(hi - lo) > out_size
    filt = np.where(shrinks, np.asarray(min_f, np.int64)[:, None], np.asarray(mag_f, np.int64)[:, None])
    # cv2.resize(INTER_LINEAR) where every resampled axis is LINEAR (not widened) over the whole image.
    linear, triangular = int(DALIInterpType.INTERP_LINEAR), int(DALIInterpType.INTERP_TRIANGULAR)
    axis_ok = (lo == 0) & (hi == in_ext) & np.isin(filt, [linear, triangular]) & ~(antialias & (out_size < in_ext))
    cv2_linear = (np.dtype(dtype) in _CV2_DTYPES) & (channels <= 4) & active.any(axis=1) & \
        (axis_ok | ~active).all(axis=1)
    fast_ok = fast.frame_supported(dtype, out_dtype, channels)
    nn = int(DALIInterpType.INTERP_NN)
    taps: list[dict] = [{} for _ in range(n)]
    uses_nn = np.zeros(n, bool)
    for ai, a in enumerate(axes):
        need = active[:, ai] & ~cv2_linear
        accumulate = a != axes[-1]
        for f in np.unique(filt[need, ai]):
            group = np.flatnonzero(need & (filt[:, ai] == f))
            if f == nn:
                uses_nn[group] = True
                for i in group:
                    taps[i][a] = axis_taps(int(in_ext[i, ai]), int(out_size[i, ai]), float(lo[i, ai]),
                                           float(hi[i, ai]), DALIInterpType(int(f)), antialias, accumulate)
                continue
            spec = _FILTERS[DALIInterpType(int(f))]
            step = np.abs(hi[group, ai] - lo[group, ai]) / out_size[group, ai]
            k = np.maximum(1.0, step) if antialias else np.ones(len(group))
            count = np.maximum(1, np.ceil(2 * spec.radius * k)).astype(np.int64)
            for kk in np.unique(count):
                sub = group[count == kk]
                result = fast.batch_axis_taps(spec.kernel, spec.radius, in_ext[sub, ai], out_size[sub, ai],
                                              lo[sub, ai], hi[sub, ai], np.full(len(sub), antialias), accumulate)
                for i, value in zip(sub, result):
                    taps[i][a] = value
    return [ResamplePlan({} if cv2_linear[i] else taps[i], cv2_linear=bool(cv2_linear[i]),
                         fast=bool(fast_ok[i] and not uses_nn[i])) for i in range(n)]


def execute_plan(image: np.ndarray, axes: Sequence[int], plan: ResamplePlan, out: np.ndarray) -> None:
    """Resizes ``image`` into ``out`` following ``plan`` (integers are rounded and saturated)."""
    if out.size == 0:
        return
    if not plan.taps and not plan.cv2_linear:
        _store(image, out, owned=False)
        return
    axes = list(axes)
    if _is_2d(axes):
        # (frames..., H, W, channels...) seen as (F, H, W, C): 2-D passes frame by frame.
        f, (h, w), c = math.prod(image.shape[:axes[0]]), image.shape[axes[0]:axes[1] + 1], \
            math.prod(image.shape[axes[1] + 1:])
        if plan.fast and f == 1 and image.ndim == 3:  # the common HWC frame: no reshapes
            frames, dst = (image,), (out,)
        else:
            frames = np.ascontiguousarray(image).reshape(f, h, w, c)
            dst = out.reshape(f, out.shape[axes[0]], out.shape[axes[1]], c)
        for src, d in zip(frames, dst):
            if plan.fast and plan.cv2_linear:
                fast.linear_frame(src, d)
            elif plan.fast:
                fast.resample_frame(src, plan.taps.get(axes[0]), plan.taps.get(axes[1]), d)
            elif plan.cv2_linear:
                _cv2_linear(src, d)
            else:
                _store(_resample_2d(src, plan.taps.get(axes[0]), plan.taps.get(axes[1])), d)
        return
    x = image
    for a in _cheapest_order(image.shape, plan.taps):
        x = _apply_pass(x, a, *plan.taps[a])
    _store(x, out)


def resample(image: np.ndarray, axes: Sequence[int], out_size: Sequence[int], lo: Sequence[float],
             hi: Sequence[float], min_filter: DALIInterpType, mag_filter: DALIInterpType, antialias: bool,
             out: np.ndarray) -> None:
    """Resizes one sample into ``out`` (preallocated; integers are rounded and saturated).

    Args:
      image: the sample, any layout; ``axes`` are its spatial axes in layout order.
      out_size, lo, hi: per spatial axis, the output extent and source window (see
        ``resize_geometry``).
      min_filter, mag_filter: the filter for axes that shrink (source step > 1) and for the others.
      antialias: widen the filter by the scale factor on shrinking axes (never for NN).
      out: destination of the output shape and type.
    """
    plan = plan_resample(image.shape, image.dtype, axes, out_size, lo, hi, min_filter, mag_filter, antialias)
    execute_plan(image, axes, plan, out)


def _is_2d(axes: Sequence[int]) -> bool:
    """Two adjacent spatial axes: the sample is (frames..., H, W, channels...)."""
    return len(axes) == 2 and axes[1] == axes[0] + 1


def _resample_2d(x: np.ndarray, taps_h, taps_w) -> np.ndarray:
    """Separable resampling of one (H, W, C) frame: rows, then columns through a transpose (or the
    reverse order when cheaper)."""
    h, w, c = x.shape
    if taps_w is None:
        return _rows(x, *taps_h)
    if taps_h is None:
        return _swap_hw(_rows(_swap_hw(x), *taps_w))
    mh, kh = taps_h[0].shape[0], (taps_h[1].shape[1] if taps_h[1] is not None else 1)
    mw, kw = taps_w[0].shape[0], (taps_w[1].shape[1] if taps_w[1] is not None else 1)
    rows_first = mh * kh * w + mw * kw * mh <= mw * kw * h + mh * kh * mw
    if rows_first:
        return _swap_hw(_rows(_swap_hw(_rows(x, *taps_h)), *taps_w))
    return _rows(_swap_hw(_rows(_swap_hw(x), *taps_w)), *taps_h)


def _cheapest_order(shape: Sequence[int], plans: dict) -> list[int]:
    """Orders the passes of the N-D path to minimise multiply-adds (the most shrinking first)."""
    best, best_cost = list(plans), None
    for order in itertools.permutations(plans):
        s = list(shape)
        cost = 0
        for a in order:
            index, weights = plans[a]
            s[a] = index.shape[0]
            cost += int(np.prod(s)) * (1 if weights is None else weights.shape[1])
        if best_cost is None or cost < best_cost:
            best, best_cost = list(order), cost
    return best


def _cv2_linear_ok(dtype: np.dtype, channels: int, passes, antialias: bool) -> bool:
    """Whether ``cv2.resize(INTER_LINEAR)`` computes the requested resampling: the LINEAR kernel, not
    widened, over the whole image, on every resampled axis (and at least one such axis)."""
    if np.dtype(dtype) not in _CV2_DTYPES or channels > 4:
        return False
    passes = list(passes)
    for f, n, m, l, h in passes:
        if not (l == 0 and h == n):
            return False
        if f not in (DALIInterpType.INTERP_LINEAR, DALIInterpType.INTERP_TRIANGULAR) or (antialias and m < n):
            return False
    return bool(passes)


def _cv2_linear(src: np.ndarray, dst: np.ndarray) -> None:
    """One (H, W, C) frame through ``cv2.resize``; ``dst`` is (H', W', C) of any supported type."""
    oh, ow = dst.shape[:2]
    if src.dtype != np.float32:  # OpenCV's fixed-point integer path rounds with a bias (-0.12 on average)
        src = src.astype(np.float32)
    res = cv2.resize(src[:, :, 0] if src.shape[2] == 1 else src, (ow, oh), interpolation=cv2.INTER_LINEAR)
    _store(res.reshape(dst.shape), dst)


# -- layouts -------------------------------------------------------------------------------------------

_DEFAULT_LAYOUTS = {2: "HW", 3: "HWC"}


@dataclasses.dataclass(frozen=True)
class SpatialLayout:
    """Which axes of a sample are spatial: ``axes`` lists them in layout order (D, H, W)."""

    layout: str
    axes: tuple[int, ...]

    @classmethod
    def parse(cls, op: str, layout: str, ndim: int, allow_depth: bool = True) -> "SpatialLayout":
        """Spatial axes of ``layout``. A layout is made of D (optional), H and W, in that order, plus
        F (frames, each resized the same way) and C (channels) anywhere. An empty layout means HW or
        HWC by rank."""
        if not layout:
            if ndim not in _DEFAULT_LAYOUTS:
                raise ValueError(f"fn.{op}: the input has no layout and {ndim} dimensions; give it a layout "
                                 f"(e.g. layout='FHWC' or 'DHWC' on the source) so the spatial axes are known")
            layout = _DEFAULT_LAYOUTS[ndim]
        allowed = "FCDHW" if allow_depth else "FCHW"
        spatial = [ch for ch in layout if ch in "DHW"]
        if (len(layout) != ndim or any(ch not in allowed for ch in layout) or len(set(layout)) != len(layout)
                or "H" not in layout or "W" not in layout or spatial != sorted(spatial, key="DHW".index)):
            kinds = "D (optional), H and W in that order" if allow_depth else "H and W in that order"
            raise ValueError(
                f"fn.{op}: input layout {layout!r} (for {ndim}-D samples) is not supported: expected {kinds}, "
                f"plus optional F (frames) and C (channels), e.g. HWC, CHW, FHWC"
                + (", DHWC" if allow_depth else ""))
        return cls(layout, tuple(layout.index(ch) for ch in spatial))


# -- argument helpers -------------------------------------------------------------------------------------

_INPUT_TYPES = (np.dtype(np.uint8), np.dtype(np.int16), np.dtype(np.uint16), np.dtype(np.float32))


def _output_dtype(op: str, input_dtype: np.dtype, dtype_arg) -> np.dtype:
    if input_dtype not in _INPUT_TYPES:
        raise TypeError(f"fn.{op}: input type {input_dtype} is not supported; supported types are uint8, int16, "
                        f"uint16 and float32 (convert with fn.cast first)")
    if dtype_arg is None:
        return input_dtype
    if DALIDataType(dtype_arg) == DALIDataType.FLOAT:
        return np.dtype(np.float32)
    if np.dtype(to_numpy_type(dtype_arg)) == input_dtype:
        return input_dtype
    raise TypeError(f"fn.{op}: argument 'dtype' must be the input type ({input_dtype}) or FLOAT, "
                    f"got {DALIDataType(dtype_arg).name}")


def _check_dtype_arg(op: str, dtype_arg) -> None:
    if dtype_arg is not None and DALIDataType(dtype_arg) not in (
            DALIDataType.UINT8, DALIDataType.INT16, DALIDataType.UINT16, DALIDataType.FLOAT):
        raise OpArgumentError(f"fn.{op}: argument 'dtype' must be FLOAT or the input type (UINT8, INT16 or UINT16), "
                              f"got {DALIDataType(dtype_arg).name}")


def _vector_arg(op: str, args, name: str, n: int, d: int) -> np.ndarray:
    """An argument with one value per spatial axis, given as a scalar or a list of ``d``: (n, d)."""
    if args.is_per_sample(name):
        rows = np.empty((n, d))
        for i in range(n):
            v = np.asarray(args.sample_value(name, i), np.float64).reshape(-1)
            if v.size not in (1, d):
                raise ValueError(f"fn.{op}: argument '{name}' expects a single value or {d} values per sample "
                                 f"(one per spatial axis), got {v.size} in sample {i}")
            rows[i] = v
        return rows
    v = np.asarray(args[name], np.float64).reshape(-1)
    if v.size not in (1, d):
        raise ValueError(f"fn.{op}: argument '{name}' expects either a single value or a list of {d} elements "
                         f"(one per spatial axis), {v.size} given")
    return np.broadcast_to(v, (n, d))


def _filters(op: str, args, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample (min_filter, mag_filter): explicit min/mag filters win over interp_type."""
    base = args.per_sample("interp_type", np.int64) if args.given("interp_type") \
        else np.full(n, int(DALIInterpType.INTERP_LINEAR))
    out = []
    for name in ("min_filter", "mag_filter"):
        f = args.per_sample(name, np.int64) if args.given(name) else base
        bad = sorted(set(np.asarray(f).tolist()) - {int(v) for v in DALIInterpType})
        if bad:
            raise ValueError(f"fn.{op}: argument '{name}' (or 'interp_type') holds unknown interpolation types "
                             f"{bad}; expected DALIInterpType values {[int(v) for v in DALIInterpType]}")
        out.append(np.broadcast_to(f, (n,)))
    return out[0], out[1]


def allocate_batch(shapes: np.ndarray, dtype: np.dtype):
    """One dense (n, ...) array when every sample has the same shape, else a list of arrays."""
    if len(shapes) and (shapes == shapes[0]).all():
        return owned_empty((len(shapes),) + tuple(int(v) for v in shapes[0]), dtype)
    return [np.empty(tuple(int(v) for v in s), dtype) for s in shapes]


def _describe(op: str, i: int, source_info) -> str:
    src = source_info[i] if source_info is not None and i < len(source_info) else None
    return f"fn.{op}: sample {i}" + (f" ({src})" if src else "")


def _resample_batch(ctx, op: str, images: TensorListCPU, layout: SpatialLayout, out_size: np.ndarray,
                    lo: np.ndarray, hi: np.ndarray, min_f: np.ndarray, mag_f: np.ndarray, antialias: bool,
                    dtype: np.dtype, windows: Sequence | None = None) -> TensorListCPU:
    """Resamples every sample on the worker pool, into one dense array where the shapes agree.

    ``windows``: per sample ``(anchor, shape)`` over all axes of the output sample: only that part of
    the output is computed and returned (see ``Resize.run_windowed``).
    """
    samples = images.samples()
    shapes = np.array([s.shape for s in samples], np.int64).reshape(len(samples), -1)
    out_shapes = shapes.copy()
    out_shapes[:, list(layout.axes)] = out_size
    kept = out_shapes if windows is None else np.array([w[1] for w in windows], np.int64).reshape(len(samples), -1)
    out = allocate_batch(kept, dtype)
    source_info = images.source_info
    filters = [DALIInterpType(v) for v in range(len(DALIInterpType))]

    # Plans (light Python work, shared between samples of equal geometry) are made here, so the
    # workers only run the heavy NumPy/OpenCV calls, which release the GIL.
    if _is_2d(layout.axes):
        plans = plan_batch(shapes, images.np_dtype, dtype, layout.axes, out_size, lo, hi, min_f, mag_f, antialias)
    else:
        taps_cache: dict = {}
        plans = [plan_resample(s.shape, s.dtype, layout.axes, out_size[i], lo[i], hi[i], filters[int(min_f[i])],
                               filters[int(mag_f[i])], antialias, taps_cache) for i, s in enumerate(samples)]

    def chunk(start: int, stop: int) -> None:
        for i in range(start, stop):
            try:
                if windows is None:
                    execute_plan(samples[i], layout.axes, plans[i], out[i])
                else:
                    _execute_window(samples[i], layout.axes, plans[i], out[i], windows[i], out_shapes[i])
            except Exception as e:
                e.add_note(f"{_describe(op, i, source_info)}, shape {tuple(shapes[i])} -> {tuple(out_shapes[i])}")
                raise

    ctx.parallel_for(chunk, len(samples))
    return TensorListCPU(out, layout.layout)


def _execute_window(image: np.ndarray, axes: Sequence[int], plan: ResamplePlan, out: np.ndarray, window,
                    full_shape: Sequence[int]) -> None:
    """The ``window`` (anchor, shape) of the resize of ``image`` into ``out``, with the values of the full
    resize: on the fast path only the window's rows and columns are computed (the same taps, the
    same pass order); otherwise the full result is computed and cut."""
    anchor, shape = window
    axes = list(axes)
    spatial = set(axes)
    whole_other = all(a == 0 and n == e for k, (a, n, e) in enumerate(zip(anchor, shape, full_shape))
                      if k not in spatial)
    if plan.fast and not plan.cv2_linear and _is_2d(axes) and image.ndim == 3 and axes == [0, 1] and whole_other:
        src = image
        taps = []
        for k, a in enumerate(axes):
            t = plan.taps.get(a)
            lo, n = int(anchor[a]), int(shape[a])
            if t is None:  # the axis keeps its extent: the window's rows are the input's
                src = src[(slice(None),) * k + (slice(lo, lo + n),)]
                taps.append(None)
            else:
                taps.append((np.ascontiguousarray(t[0][lo:lo + n]), np.ascontiguousarray(t[1][lo:lo + n])))
        rows_first = fast.rows_first(image.shape, full_shape, plan.taps.get(axes[0]), plan.taps.get(axes[1]))
        fast.resample_frame(src, taps[0], taps[1], out, rows_first)
        return
    full = np.empty(tuple(int(v) for v in full_shape), out.dtype)
    execute_plan(image, axes, plan, full)
    np.copyto(out, full[tuple(slice(int(a), int(a) + int(n)) for a, n in zip(anchor, shape))])


# -- fn.resize ---------------------------------------------------------------------------------------------

_SIZE_METHODS = (("resize_x", "resize_y", "resize_z"), ("size",), ("resize_shorter",), ("resize_longer",))


class Resize(Operator):
    """``fn.resize``: the host implementation (``device="gpu"`` runs the same code)."""

    def __init__(self, node, build):
        super().__init__(node, build)
        given = {name for name in node.schema.arg_map if name in node.arg_inputs or node.args.get(name) is not None}
        used = [group for group in _SIZE_METHODS if given & set(group)]
        if len(used) != 1:
            got = ", ".join(sorted(given & {a for g in _SIZE_METHODS for a in g})) or "none"
            raise OpArgumentError(
                "fn.resize: exactly one way of specifying the size must be used: resize_x/resize_y/resize_z, "
                f"size, resize_shorter or resize_longer; got {got}")
        self.method = used[0][0]
        exclusive = sorted(given & {"resize_shorter", "resize_longer", "mode"})
        if len(exclusive) > 1:
            raise OpArgumentError(
                f"fn.resize: arguments 'resize_shorter', 'resize_longer' and 'mode' are mutually exclusive; "
                f"got {exclusive}")
        if ("roi_start" in given) != ("roi_end" in given):
            raise OpArgumentError("fn.resize: arguments 'roi_start' and 'roi_end' must be given together")
        _check_dtype_arg("resize", self.args.get("dtype"))
        if self.method == "resize_shorter":
            self.mode = "not_smaller"
        elif self.method == "resize_longer":
            self.mode = "not_larger"
        else:
            self.mode = self.args.get("mode") or "default"

    def _requested(self, args, n: int, layout: SpatialLayout) -> np.ndarray:
        d = len(layout.axes)
        if self.method == "resize_x":
            names = {"D": "resize_z", "H": "resize_y", "W": "resize_x"}
            cols = []
            for a in layout.axes:
                name = names[layout.layout[a]]
                cols.append(args.per_sample(name, np.float64) if args.given(name) else np.zeros(n))
            return np.stack(cols, axis=1) if n else np.zeros((0, d))
        if self.method == "size":
            return _vector_arg("resize", args, "size", n, d)
        return np.repeat(args.per_sample(self.method, np.float64)[:, None], d, axis=1)

    def _geometry(self, inputs, args):
        """(images, layout, out_size, lo, hi, dtype, in_size) of this batch (DALI's size arithmetic)."""
        images = inputs[0]
        n = len(images)
        layout = SpatialLayout.parse("resize", images.layout(), images.ndim())
        d = len(layout.axes)
        dtype = _output_dtype("resize", images.np_dtype, self.args.get("dtype"))
        shapes = np.array(images.shape(), np.int64).reshape(n, -1)
        in_size = shapes[:, list(layout.axes)]
        requested = self._requested(args, n, layout)
        max_size = None
        if self.args.get("max_size") is not None:
            max_size = _vector_arg("resize", args, "max_size", 1, d)[0]  # a constant
        roi_start = roi_end = None
        if args.given("roi_start"):
            roi_start = _vector_arg("resize", args, "roi_start", n, d)
            roi_end = _vector_arg("resize", args, "roi_end", n, d)
            if self.args.get("roi_relative"):
                roi_start, roi_end = roi_start * in_size, roi_end * in_size
        out_size, lo, hi = resize_geometry(in_size, requested, self.mode, max_size, roi_start, roi_end,
                                           bool(self.args["subpixel_scale"]))
        return images, layout, out_size, lo, hi, dtype, in_size

    def run(self, ctx, inputs, args):
        return self.run_windowed(ctx, inputs, args, None)

    # -- output windows (see GraphRunner: a consumer that reads one window of each sample) --
    def output_shapes(self, inputs, args):
        """(per-sample output shapes, layout) of this batch, or None when it has a second output."""
        if self.args.get("save_attrs") or not len(inputs[0]):
            return None
        images, layout, out_size, _, _, _, _ = self._geometry(inputs, args)
        shapes = np.array(images.shape(), np.int64).reshape(len(images), -1)
        shapes[:, list(layout.axes)] = out_size
        return [tuple(int(v) for v in row) for row in shapes], layout.layout

    def run_windowed(self, ctx, inputs, args, windows):
        """``run``, returning only ``windows[i] = (anchor, shape)`` of each output sample (all of it when
        None); the values are those of the full output."""
        images = inputs[0]
        n = len(images)
        if n == 0:
            return [images, TensorListCPU([])] if self.args.get("save_attrs") else images
        images, layout, out_size, lo, hi, dtype, in_size = self._geometry(inputs, args)
        min_f, mag_f = _filters("resize", args, n)
        result = _resample_batch(ctx, "resize", images, layout, out_size, lo, hi, min_f, mag_f,
                                 bool(self.args["antialias"]), dtype, windows)
        if self.args.get("save_attrs"):
            return [result, TensorListCPU(in_size.astype(np.int32))]
        return result


_INTERP_ARGS = (
    Arg("interp_type", "interp_type", None,
        "Filter for both directions (default INTERP_LINEAR): NN, LINEAR, CUBIC, LANCZOS3, GAUSSIAN, or the "
        "deprecated TRIANGULAR (the same as LINEAR).", tensor=True),
    Arg("min_filter", "interp_type", None, "Filter where the image shrinks; overrides interp_type.", tensor=True),
    Arg("mag_filter", "interp_type", None, "Filter where the image grows; overrides interp_type.", tensor=True),
    Arg("antialias", "bool", True,
        "When shrinking, widen the filter by the scale factor (area-style antialiasing); NN never does."),
    Arg("dtype", "dtype", None, "Output type: the input type (rounded and saturated) or FLOAT."),
    Arg("minibatch_size", "int", 32, "Samples per kernel launch in DALI's GPU implementation.", hint=True),
    Arg("temp_buffer_hint", "int", 0, "Initial temporary buffer size in DALI.", hint=True),
)

RESIZE = register(OpSchema(
    name="resize", impl=Resize, devices=("cpu", "gpu"),
    num_outputs=lambda a: 2 if a.get("save_attrs") else 1,
    doc="""Resizes images, sequences (frame by frame) and volumes.

Exactly one way of giving the size: ``resize_x``/``resize_y``/``resize_z``, ``size``,
``resize_shorter`` (= ``size`` on every axis with mode not_smaller) or ``resize_longer`` (= mode
not_larger). ``mode`` decides how missing extents and ``max_size`` combine with the given ones
(see ``resize_geometry``). A negative size, or a ``roi_start`` past ``roi_end``, flips that axis.
Output extents are rounded (half away from zero) and at least 1.

Layouts: HWC, CHW, FHWC, FCHW, CFHW, DHWC, CDHW, FDHWC, ... (also HW; an empty layout means HW or HWC).
Input types: uint8, int16, uint16, float32. ``device="gpu"`` runs the host implementation; the
result moves to the pipeline's device.

.. note:: The filters are DALI's (triangle, Catmull-Rom cubic, Lanczos-3, Gaussian, widened by the
   scale factor when shrinking with ``antialias``), not OpenCV's; on flower photos the uint8 output
   is within +-1 of DALI 2.4's CPU output, with a mean absolute difference below 0.01 (0 for NN).""",
    args=(
        Arg("resize_x", "float", None, "Output width (0 or unset: derived from the other extents).", tensor=True),
        Arg("resize_y", "float", None, "Output height.", tensor=True),
        Arg("resize_z", "float", None, "Output depth (volumes).", tensor=True),
        Arg("size", "floats", None, "Output extents in layout order (D, H, W), or one value for all; 0 = unset.",
            tensor=True),
        Arg("resize_shorter", "float", None, "Length of the shorter side; the aspect ratio is kept.", tensor=True),
        Arg("resize_longer", "float", None, "Length of the longer side; the aspect ratio is kept.", tensor=True),
        Arg("mode", "str", None, "How missing extents and max_size combine with the given ones (default "
            "'default').", choices=MODES),
        Arg("max_size", "floats", None, "Limit of the output extents (one value, or one per spatial axis)."),
        Arg("roi_start", "floats", None, "Start of the source region, in layout order.", tensor=True),
        Arg("roi_end", "floats", None, "End of the source region, in layout order.", tensor=True),
        Arg("roi_relative", "bool", False, "roi_start/roi_end are fractions of the input size."),
        Arg("subpixel_scale", "bool", True,
            "A fractional size moves the source region's edges so the scale factor is exactly the requested one."),
        Arg("save_attrs", "bool", False, "Adds a second output: each sample's input spatial shape (int32)."),
        Arg("image_type", "image_type", None, "Deprecated in DALI; no effect.", hint=True),
    ) + _INTERP_ARGS,
))


# -- fn.random_resized_crop ------------------------------------------------------------------------------------


class RandomResizedCrop(Operator):
    """``fn.random_resized_crop``: a random window (the one ``fn.decoders.image_random_crop`` draws),
    resized to ``size``. Frames of a sequence share their sample's window."""

    #: Stream of ``rng.uniform`` used for the window draws (the decoder's, so equal seeds give equal windows).
    STREAM = 0

    def __init__(self, node, build):
        super().__init__(node, build)
        op = "random_resized_crop"
        self.area, self.ratio = check_ranges(op, self.args["random_area"], self.args["random_aspect_ratio"],
                                             self.args["num_attempts"])
        self.num_attempts = int(self.args["num_attempts"])
        size = [int(v) for v in self.args["size"]]  # DALI converts to integers by truncation
        if len(size) == 1:
            size = size * 2
        if len(size) != 2 or min(size) <= 0:
            raise OpArgumentError(f"fn.{op}: argument 'size' must be one positive value or two [height, width], "
                                  f"got {list(self.args['size'])}")
        self.size = np.array(size, np.int64)
        _check_dtype_arg(op, self.args.get("dtype"))

    def windows(self, ctx, heights: np.ndarray, widths: np.ndarray):
        """Per-sample (y, x, h, w) windows for this iteration."""
        u = rng.uniform(ctx.sample_keys(self.seed), crop_window_draws(self.num_attempts), self.STREAM)
        return random_crop_windows(heights, widths, u, self.area, self.ratio, self.num_attempts)

    def run(self, ctx, inputs, args):
        op = "random_resized_crop"
        images = inputs[0]
        n = len(images)
        if n == 0:
            return images
        layout = SpatialLayout.parse(op, images.layout(), images.ndim(), allow_depth=False)
        dtype = _output_dtype(op, images.np_dtype, self.args.get("dtype"))
        in_hw = np.array(images.shape(), np.int64).reshape(n, -1)[:, list(layout.axes)]
        if in_hw.min() < 1:
            bad = int(np.argmin(in_hw.min(axis=1)))
            raise ValueError(f"{_describe(op, bad, images.source_info)} is empty (shape {tuple(images.shape()[bad])})")
        y, x, h, w = self.windows(ctx, in_hw[:, 0], in_hw[:, 1])
        lo = np.stack([y, x], axis=1).astype(np.float64)
        hi = lo + np.stack([h, w], axis=1)
        out_size = np.broadcast_to(self.size, (n, 2))
        min_f, mag_f = _filters(op, args, n)
        return _resample_batch(ctx, op, images, layout, out_size, lo, hi, min_f, mag_f,
                               bool(self.args["antialias"]), dtype)


RANDOM_RESIZED_CROP = register(OpSchema(
    name="random_resized_crop", impl=RandomResizedCrop, devices=("cpu", "gpu"),
    doc="""Crops a random window and resizes it to ``size`` (Inception-style augmentation).

The window is drawn as in ``fn.decoders.image_random_crop`` (see ``jaxdali.ops.crop_window``): area
a fraction ``random_area`` of the image, aspect ratio (width / height) log-uniform in
``random_aspect_ratio``, up to ``num_attempts`` tries before a clamped fallback. With the same
``seed`` both operators draw the same windows. Frames of a sequence (FHWC) share one window.
Layouts HWC, CHW, FHWC, FCHW, CFHW; types uint8, int16, uint16, float32. ``device="gpu"`` runs the
host implementation; the result moves to the pipeline's device.""",
    args=(
        Arg("size", "floats", REQUIRED, "Output [height, width], or one value for both (truncated to integers)."),
        Arg("random_area", "floats", (0.08, 1.0), "[min, max] of the window's area as a fraction of the image's."),
        Arg("random_aspect_ratio", "floats", (3 / 4, 4 / 3), "[min, max] of the window's width / height."),
        Arg("num_attempts", "int", 10, "Windows drawn before the fallback."),
    ) + _INTERP_ARGS,
))
