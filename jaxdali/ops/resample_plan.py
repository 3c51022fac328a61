"""What a resize computes, as pure arithmetic: DALI's size arithmetic, its filters and the taps.

* ``resize_geometry`` turns input extents, requested sizes, ``mode``, ``max_size``, a region of
  interest and ``subpixel_scale`` into output extents and the source window each output spans
  (vectorised over the batch).
* ``axis_taps`` is the one tap planner: for the samples of a batch that share a filter, the input
  indices and weights of a 1-D pass along one axis (a resize is separable: one pass per spatial axis,
  each a gather of K neighbouring rows and a K-tap weighted sum).
* ``plan_resample`` makes the plan of every sample of a batch: which axes are resampled, with which
  taps, or whether the whole resize is OpenCV's INTER_LINEAR. ``jaxdali.ops.resample`` executes plans.

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
a = -0.75, INTER_LANCZOS4 has 8 taps), so ``cv2.resize(INTER_LINEAR)`` is planned only where no
antialiasing applies and the window is the whole image, where it equals the LINEAR kernel.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable, Sequence

import numpy as np

from jaxdali.ops.convert import round_half_away
from jaxdali.types import DALIInterpType

__all__ = ["MODES", "resize_geometry", "FILTERS", "tap_sum", "axis_taps", "ResamplePlan", "plan_resample",
           "BoundedCache", "FRAME_TYPES", "is_2d"]

#: Resize modes (DALI's ``mode`` argument).
MODES = ("default", "stretch", "not_larger", "not_smaller")

#: Types of 2-D frames that OpenCV and the compiled kernel take.
FRAME_TYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int16), np.dtype(np.float32))

# -- size arithmetic ---------------------------------------------------------------------------------


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
    out = np.maximum(round_half_away(target), 1.0)
    out = np.where(empty_input, 0.0, out)
    if subpixel_scale:
        with np.errstate(divide="ignore", invalid="ignore"):
            new_extent = np.where(target > 0, out * extent / np.where(target > 0, target, 1.0), extent)
        centre = (lo + hi) / 2
        half = np.copysign(new_extent / 2, hi - lo)
        lo, hi = np.where(extent > 0, centre - half, lo), np.where(extent > 0, centre + half, hi)
    return out.astype(np.int64), np.asarray(lo, np.float64), np.asarray(hi, np.float64)


# -- filters and taps --------------------------------------------------------------------------------


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


FILTERS = {
    DALIInterpType.INTERP_NN: _Filter(None, 0.0),
    DALIInterpType.INTERP_LINEAR: _Filter(_triangle, 1.0),
    DALIInterpType.INTERP_CUBIC: _Filter(_cubic, 2.0),
    DALIInterpType.INTERP_LANCZOS3: _Filter(_lanczos3, 3.0),
    DALIInterpType.INTERP_GAUSSIAN: _Filter(_gaussian, 1.0),
    # DALI 2.4 treats the deprecated TRIANGULAR as LINEAR: antialiased only when `antialias` is set
    # (its default), so TRIANGULAR with antialias=False gives plain linear interpolation.
    DALIInterpType.INTERP_TRIANGULAR: _Filter(_triangle, 1.0),
}


def tap_sum(w: np.ndarray) -> np.ndarray:
    """The sum over the leading (tap) axis of ``w``, added in tap order: ((w0 + w1) + w2) + ... (NumPy's
    own sums switch to pairwise order from 8 terms, and their order depends on the memory layout)."""
    total = w[0].copy()
    for t in range(1, len(w)):
        total += w[t]
    return total


def axis_taps(interp: DALIInterpType, in_len, out_len, lo, hi, antialias: bool,
              accumulate: bool) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """Input indices and weights of a 1-D resampling pass, for n samples that share a filter.

    Args:
      interp: the filter (a key of ``FILTERS``).
      in_len, out_len, lo, hi: (n,) input extent, output extent and source window of each sample.
      antialias: widen the kernel by the scale factor when shrinking (never for NN).
      accumulate: positions as DALI computes them along an outer spatial axis (a float32 running sum
        of the step); along the innermost axis they are computed directly.

    Returns:
      Per sample ``(index, weights)``: output i = sum_k weights[i, k] * input[index[i, k]], int32 and
      float32 (m, K), K the sample's own tap count (``ceil(2 * radius * k)``); for nearest neighbour
      ``(index, None)`` with index of shape (m,). Indices are clamped to the input (edge pixels repeat).
    """
    filt = FILTERS[DALIInterpType(interp)]
    n = len(in_len)
    in_len = np.asarray(in_len, np.int64)
    out_len = np.asarray(out_len, np.int64)
    lo = np.asarray(lo, np.float64)
    hi = np.asarray(hi, np.float64)
    m_max = int(out_len.max())
    step = (hi - lo) / out_len
    if accumulate:
        steps = np.broadcast_to(step.astype(np.float32)[:, None], (n, m_max)).copy()
        steps[:, 0] = (lo + 0.5 * step.astype(np.float32).astype(np.float64)).astype(np.float32)
        c = np.cumsum(steps, axis=1, dtype=np.float32).astype(np.float64)
    elif filt.kernel is None:
        # DALI's nearest neighbour computes the direct positions in float32 too (rounded after the
        # product and after the sum), so it floors to the same pixel at exact ties (e.g. 6 -> 147).
        f32 = np.float32
        step32 = (hi.astype(f32) - lo.astype(f32)) / out_len.astype(f32)
        c = (lo.astype(f32)[:, None] + (np.arange(m_max) + 0.5).astype(f32)[None, :] * step32[:, None]).astype(
            np.float64)
    else:
        c = lo[:, None] + (np.arange(m_max) + 0.5)[None, :] * step[:, None]
    if filt.kernel is None:
        index = np.clip(np.floor(c).astype(np.int64), 0, (in_len - 1)[:, None]).astype(np.int32)
        return [(index[i, :m], None) for i, m in enumerate(out_len.tolist())]
    k = np.maximum(1.0, np.abs(step)) if antialias else np.ones(n)
    reach = filt.radius * k
    taps = np.maximum(1, np.ceil(2 * reach)).astype(np.int64)
    k_max = int(taps.max())
    first = np.floor(c - 0.5 - reach[:, None]).astype(np.int64) + 1
    # Element-wise work in (K, n, m) order: NumPy's inner loops then run over m, not over K (a few
    # taps), ~3x faster; the weights are normalised by their sum in tap order.
    j = first[None] + np.arange(k_max)[:, None, None]
    w = filt.kernel((j + 0.5 - c[None]) / k[None, :, None])
    if int(taps.min()) < k_max:  # a sample's taps past its own count are zeros: its sum is its own taps' sum
        w[np.arange(k_max)[:, None] >= taps[None, :]] = 0.0
    total = tap_sum(w)
    w = (w / np.where(total != 0, total, 1.0)[None]).astype(np.float32)
    j = np.clip(j, 0, (in_len - 1)[None, :, None]).astype(np.int32)
    j, w = np.ascontiguousarray(j.transpose(1, 2, 0)), np.ascontiguousarray(w.transpose(1, 2, 0))
    # A sample with the batch's tap count gets views (its rows of a C-contiguous block), not copies.
    return [(j[i, :m], w[i, :m]) if kk == k_max else (np.ascontiguousarray(j[i, :m, :kk]),
                                                       np.ascontiguousarray(w[i, :m, :kk]))
            for i, (m, kk) in enumerate(zip(out_len.tolist(), taps.tolist()))]


# -- plans -------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ResamplePlan:
    """How one sample is resized: nothing (a copy), ``cv2.resize``, or 1-D passes with their taps.

    Attributes:
      taps: spatial axis -> (index, weights) of its pass (see ``axis_taps``); axes that keep their
        extent and window are left out.
      cv2_linear: the whole resize is OpenCV's INTER_LINEAR: every resampled axis is LINEAR, not
        widened, over the whole image (2-D frames of up to 4 channels in ``FRAME_TYPES``).
      geometry: what the taps are a function of, per axis in ``taps`` ((axis, filter, antialias,
        accumulated, input extent, output extent, window start, window end)): plans with equal
        geometries have equal taps, so work planned from the taps can be reused by value.
    """

    taps: dict
    cv2_linear: bool = False
    geometry: tuple = ()


def is_2d(axes: Sequence[int]) -> bool:
    """Two adjacent spatial axes: the sample is (frames..., H, W, channels...)."""
    return len(axes) == 2 and axes[1] == axes[0] + 1


class BoundedCache:
    """A dict of at most ``size`` entries shared by threads: the oldest entry goes first."""

    def __init__(self, size: int):
        self._size = size
        self._entries: dict = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key) -> bool:
        return key in self._entries

    def get(self, key, default=None):
        return self._entries.get(key, default)

    def put(self, key, value) -> None:
        with self._lock:
            if key not in self._entries and len(self._entries) >= self._size:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = value

    def keys(self) -> list:
        return list(self._entries)


class _TapsCache:
    """The taps of geometries that recur, kept between batches: the photos of a data set share a few sizes
    (ImageNet's 500 x 375 and 375 x 500), so a validation resize plans each of them once. A geometry is
    kept from its second appearance on (within a batch or across batches; the keys of the last
    ``4 * size`` geometries seen are remembered), so random crops, all different, cost a key each and
    churn nothing. Entries are compact read-only copies, so they keep no batch's block of taps alive."""

    def __init__(self, size: int):
        self.entries = BoundedCache(size)
        self._seen = BoundedCache(4 * size)

    def get(self, key):
        return self.entries.get(key)

    def offer(self, key, pair, repeated: bool) -> None:
        """Keeps ``pair`` if its geometry recurs: ``repeated`` in this batch, or seen in an earlier one."""
        if not repeated and key not in self._seen:
            self._seen.put(key, None)
            return
        self.entries.put(key, tuple(None if array is None else _read_only(array.copy()) for array in pair))


def _read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


#: 512 geometries: ~2-4 MB of taps (224 outputs x 3-5 taps per axis each).
_TAPS_CACHE = _TapsCache(512)


def plan_resample(shapes: np.ndarray, dtype: np.dtype, axes: Sequence[int], out_size: np.ndarray, lo: np.ndarray,
                  hi: np.ndarray, min_f: np.ndarray, mag_f: np.ndarray, antialias: bool) -> list[ResamplePlan]:
    """The plans of a batch of samples of ``dtype`` with ``shapes`` and spatial ``axes`` (layout order).

    ``out_size``, ``lo``, ``hi``: (n, d) output extents and source windows (see ``resize_geometry``);
    ``min_f``, ``mag_f``: (n,) filters for axes that shrink (source step > 1) and for the others.
    Decisions (identity axes, filter per axis, the OpenCV path) are made with array operations, and
    the taps of all samples that share a filter are computed together, each distinct geometry once
    (recurring geometries once per process: ``_TapsCache``).
    """
    n = len(shapes)
    axes = list(axes)
    d = len(axes)
    shapes = np.asarray(shapes, np.int64).reshape(n, -1)
    in_ext = shapes[:, axes].astype(np.float64)
    out_size = np.asarray(out_size, np.int64).reshape(n, d)
    lo = np.asarray(lo, np.float64).reshape(n, d)
    hi = np.asarray(hi, np.float64).reshape(n, d)
    active = ~((lo == 0) & (hi == in_ext) & (out_size == in_ext))
    shrinks = np.abs(hi - lo) > out_size
    filt = np.where(shrinks, np.asarray(min_f, np.int64)[:, None], np.asarray(mag_f, np.int64)[:, None])
    cv2_linear = np.zeros(n, bool)
    if is_2d(axes):
        channels = np.prod(shapes[:, axes[1] + 1:], axis=1) if shapes.shape[1] > axes[1] + 1 else np.ones(n, np.int64)
        linear, triangular = int(DALIInterpType.INTERP_LINEAR), int(DALIInterpType.INTERP_TRIANGULAR)
        axis_ok = (lo == 0) & (hi == in_ext) & np.isin(filt, [linear, triangular]) & \
            ~(antialias & (out_size < in_ext))
        cv2_linear = (np.dtype(dtype) in FRAME_TYPES) & (channels <= 4) & active.any(axis=1) & \
            (axis_ok | ~active).all(axis=1)
    taps: list[dict] = [{} for _ in range(n)]
    geometry: list[list] = [[] for _ in range(n)]
    for ai, a in enumerate(axes):
        need = active[:, ai] & ~cv2_linear
        for f in np.unique(filt[need, ai]):
            group = np.flatnonzero(need & (filt[:, ai] == f))
            # Samples with the same extents and window share their taps (photos of one camera, say):
            # each distinct geometry is planned once, and its samples get the same read-only arrays.
            # Samples of one tap count are planned together (their taps are views of one block).
            rows = np.stack([in_ext[group, ai], out_size[group, ai], lo[group, ai], hi[group, ai]], axis=1).tolist()
            first_seen: dict = {}
            which = [first_seen.setdefault(tuple(row), len(first_seen)) for row in rows]
            accumulate = a != axes[-1]
            geometries = list(first_seen)
            keys = [(int(f), bool(antialias), accumulate) + row for row in geometries]
            planned: list = [_TAPS_CACHE.get(key) for key in keys]
            missing = [u for u, pair in enumerate(planned) if pair is None]
            if missing:
                distinct = np.array([geometries[u] for u in missing], np.float64).reshape(-1, 4)
                spec = FILTERS[DALIInterpType(int(f))]
                step = np.abs(distinct[:, 3] - distinct[:, 2]) / distinct[:, 1]
                k = np.maximum(1.0, step) if antialias else np.ones(len(distinct))
                count = np.maximum(1, np.ceil(2 * spec.radius * k)).astype(np.int64)
                repeats = np.bincount(which, minlength=len(keys))
                for kk in np.unique(count):
                    sub = np.flatnonzero(count == kk)
                    result = axis_taps(DALIInterpType(int(f)), distinct[sub, 0], distinct[sub, 1].astype(np.int64),
                                       distinct[sub, 2], distinct[sub, 3], antialias, accumulate=accumulate)
                    for s, pair in zip(sub.tolist(), result):
                        u = missing[s]
                        for array in pair:
                            if array is not None:
                                array.flags.writeable = False
                        planned[u] = pair
                        _TAPS_CACHE.offer(keys[u], pair, repeated=repeats[u] > 1)
            for i, u in zip(group.tolist(), which):
                taps[i][a] = planned[u]
                geometry[i].append((a,) + keys[u])
    return [ResamplePlan({}, cv2_linear=True) if cv2_linear[i] else ResamplePlan(taps[i], geometry=tuple(geometry[i]))
            for i in range(n)]
