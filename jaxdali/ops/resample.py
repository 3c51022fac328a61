"""Executes resize plans (``jaxdali.ops.resample_plan``): one entry point per case.

* ``resample_sample``: one sample of any layout, following its plan (a copy, OpenCV, or 1-D passes);
  it runs the 2-D frames of a sample one by one, or the N-D passes.
* ``resample_frame``: one (H, W, C) frame with separable taps. The compiled kernel
  (``_resample_kernel.c``) runs it where it applies (types in ``FRAME_TYPES``, up to 4 channels,
  no nearest-neighbour axis): it releases the GIL, reads the input in its own type and writes the
  rounded, saturated output directly. Elsewhere the NumPy passes of ``resample_nd`` run.
* ``resample_nd``: the passes along any number of axes, in the order with the fewest multiply-adds,
  each a gather of whole rows and a K-tap weighted sum (NumPy).
* ``resample_window``: a window of the output of a resize, with the values of the full output.
* ``linear_frame``: a plan's ``cv2_linear`` case, ``cv2.resize(INTER_LINEAR)`` computed on float32
  (OpenCV's fixed-point integer path rounds with a bias).

The kernel is optional: where it is not built, was built from another version of its source (a stale
editable install), or config ``disable_kernel`` (``JAXDALI_DISABLE_KERNEL=1``) is set,
``resample_frame`` runs ``_resample_numpy``, which computes the kernel's values bit for bit, slower.
``kernel_status()`` says which path runs and why.
"""

from __future__ import annotations

import itertools
import math
import pathlib
import threading
from typing import Sequence

import cv2
import numpy as np

from jaxdali.core import options
from jaxdali.ops import _resample_numpy
from jaxdali.ops.kernel_loader import load_kernel
from jaxdali.ops.resample_plan import FRAME_TYPES, ResamplePlan, is_2d

__all__ = ["kernel_status", "resample_sample", "resample_frame", "resample_nd", "resample_window", "window_job",
           "part_job", "WindowJob", "linear_frame", "rows_first", "store"]

_KERNEL_SOURCE = pathlib.Path(__file__).with_name("_resample_kernel.c")


_KERNEL_MODULE, _KERNEL_REASON = load_kernel("jaxdali.ops._resample_kernel", _KERNEL_SOURCE, "resize kernel")
_KERNEL = _KERNEL_MODULE.resample if _KERNEL_MODULE is not None else None


def kernel_status() -> tuple[str, str]:
    """Which implementation ``resample_frame`` runs, ``"compiled kernel"`` or ``"numpy fallback"``, and why."""
    if options.get("disable_kernel"):
        return "numpy fallback", "disabled by config 'disable_kernel' (JAXDALI_DISABLE_KERNEL)"
    if _KERNEL is None:
        return "numpy fallback", f"compiled kernel {_KERNEL_REASON}"
    return "compiled kernel", _KERNEL_REASON


_CV2_DEPTH = {np.dtype(np.uint8): cv2.CV_8U, np.dtype(np.uint16): cv2.CV_16U, np.dtype(np.int16): cv2.CV_16S,
              np.dtype(np.float32): cv2.CV_32F}

# -- one sample --------------------------------------------------------------------------------------


def resample_sample(image: np.ndarray, axes: Sequence[int], plan: ResamplePlan, out: np.ndarray) -> None:
    """Resizes ``image`` (spatial ``axes`` in layout order) into ``out`` following ``plan`` (integers are
    rounded and saturated)."""
    if out.size == 0:
        return
    if not plan.taps and not plan.cv2_linear:
        store(image, out, owned=False)
        return
    axes = list(axes)
    if not is_2d(axes):
        resample_nd(image, plan.taps, out)
        return
    # (frames..., H, W, channels...) seen as (F, H, W, C): 2-D passes frame by frame.
    f, (h, w), c = math.prod(image.shape[:axes[0]]), image.shape[axes[0]:axes[1] + 1], \
        math.prod(image.shape[axes[1] + 1:])
    if f == 1 and image.ndim == 3:  # the common HWC frame: no reshapes
        frames, dst = (image,), (out,)
    else:
        frames = np.ascontiguousarray(image).reshape(f, h, w, c)
        dst = out.reshape(f, out.shape[axes[0]], out.shape[axes[1]], c)
    for src, d in zip(frames, dst):
        if plan.cv2_linear:
            linear_frame(src, d)
        else:
            resample_frame(src, plan.taps.get(axes[0]), plan.taps.get(axes[1]), d)


def _windowed_taps(axes: Sequence[int], plan: ResamplePlan, window, full_shape: Sequence[int], ndim: int,
                   dtype: np.dtype, out_dtype: np.dtype, channels: int):
    """Per spatial axis of an HWC frame, the output window's taps (None: the axis keeps its extent), when
    the kernel computes just the window; None when the full resize must be computed and cut."""
    anchor, shape = window
    axes = list(axes)
    whole_other = all(a == 0 and n == e for k, (a, n, e) in enumerate(zip(anchor, shape, full_shape)) if k not in axes)
    taps_h, taps_w = plan.taps.get(axes[0]), plan.taps.get(axes[-1])
    if plan.cv2_linear or axes != [0, 1] or ndim != 3 or not whole_other or \
            not _kernel_runs(dtype, out_dtype, channels, taps_h, taps_w):
        return None
    rows = [slice(int(anchor[k]), int(anchor[k]) + int(shape[k])) for k in range(2)]
    return [None if t is None else (t[0][rows[k]], t[1][rows[k]]) for k, t in enumerate((taps_h, taps_w))]


class WindowJob:
    """How the kernel computes one output window of an HWC frame (``window_job``): the part of the
    input it reads and the taps relative to that part, planned once per geometry."""

    __slots__ = ("part", "taps_h", "taps_w", "keep", "order")

    def __init__(self, part, taps_h, taps_w, keep, order: bool):
        #: (y, x, h, w) of the input the window reads (every row and column of it), or None when the
        #: job is to run on the whole input.
        self.part = part
        self.taps_h, self.taps_w = taps_h, taps_w
        #: Per axis that keeps its extent (no taps), the rows/columns of the given input to use.
        self.keep = keep
        #: The full output's pass order, so that the window's values are the full output's.
        self.order = order

    def run(self, image: np.ndarray, out: np.ndarray) -> None:
        """Computes the window into ``out`` from ``image`` (the ``part``, or the whole input)."""
        src = image
        for k, rows in enumerate(self.keep):
            if rows is not None:
                src = src[(slice(None),) * k + (rows,)]
        _run_kernel(src, self.taps_h, self.taps_w, out, self.order)  # window_job checked that the kernel runs


def window_job(in_shape: Sequence[int], dtype: np.dtype, axes: Sequence[int], plan: ResamplePlan,
               out_dtype: np.dtype, window, full_shape: Sequence[int], part: bool) -> WindowJob | None:
    """The kernel's job for the ``window`` (anchor, shape) of the resize of an input of ``in_shape`` into
    ``full_shape``, or None where the full resize must be computed and cut (``resample_window``).
    ``part``: the job will be given only the part of the input it reads (``WindowJob.part``)."""
    taps = _windowed_taps(axes, plan, window, full_shape, len(in_shape), dtype, out_dtype, int(in_shape[-1]))
    if taps is None:
        return None
    anchor, shape = window
    region = []  # per axis: (first, extent) of the input read
    for k, t in enumerate(taps):
        if t is None:
            region.append((int(anchor[k]), int(shape[k])))
        else:
            first = int(t[0].min())
            region.append((first, int(t[0].max()) - first + 1))
    offset = [r[0] for r in region] if part else [0, 0]
    keep = tuple(None if t is not None else slice(region[k][0] - offset[k], region[k][0] - offset[k] + region[k][1])
                 for k, t in enumerate(taps))
    # Copies (compact): a job may be kept between batches, and must not keep a batch's block of taps alive.
    taps = [None if t is None else (t[0] - offset[k] if offset[k] else t[0].copy(), t[1].copy())
            for k, t in enumerate(taps)]
    order = rows_first(in_shape, full_shape, plan.taps.get(axes[0]), plan.taps.get(axes[-1]))
    where = (region[0][0], region[1][0], region[0][1], region[1][1]) if part else None
    return WindowJob(where, taps[0], taps[1], keep, order)


def part_job(in_shape: Sequence[int], dtype: np.dtype, axes: Sequence[int], plan: ResamplePlan,
             out_dtype: np.dtype, out_shape: Sequence[int]) -> WindowJob | None:
    """The kernel's job for the whole resize of an HWC frame from only the part of the input its taps read
    (a crop, a region of interest), or None where the kernel does not run it or it reads the whole input.
    For one batch: the job shares the plan's weights."""
    taps_h, taps_w = plan.taps.get(0), plan.taps.get(1)
    if plan.cv2_linear or list(axes) != [0, 1] or len(in_shape) != 3 or \
            not _kernel_runs(dtype, out_dtype, int(in_shape[2]), taps_h, taps_w):
        return None
    part, taps = [], []
    for t, extent in ((taps_h, int(in_shape[0])), (taps_w, int(in_shape[1]))):
        if t is None:
            part.append((0, extent))
            taps.append(None)
            continue
        first = int(t[0].min())
        part.append((first, int(t[0].max()) - first + 1))
        taps.append((t[0] - first if first else t[0], t[1]))
    if part[0][1] == in_shape[0] and part[1][1] == in_shape[1]:
        return None
    order = rows_first(in_shape, out_shape, taps_h, taps_w)
    return WindowJob((part[0][0], part[1][0], part[0][1], part[1][1]), taps[0], taps[1], (None, None), order)


def resample_window(image: np.ndarray, axes: Sequence[int], plan: ResamplePlan, out: np.ndarray, window,
                    full_shape: Sequence[int]) -> None:
    """The ``window`` (anchor, shape) of the resize of ``image`` into ``out``: the full resize (into
    ``full_shape``), cut. Where the kernel runs on an HWC frame, ``window_job`` computes just the window's
    rows and columns instead, with the same values."""
    anchor, shape = window
    full = np.empty(tuple(int(v) for v in full_shape), out.dtype)
    resample_sample(image, axes, plan, full)
    np.copyto(out, full[tuple(slice(int(a), int(a) + int(n)) for a, n in zip(anchor, shape))])


# -- 2-D frames --------------------------------------------------------------------------------------


def _kernel_runs(dtype: np.dtype, out_dtype: np.dtype, channels: int, taps_h, taps_w) -> bool:
    """Whether the kernel (or its NumPy twin) takes this frame: its types, 1 to 4 channels, and no
    nearest-neighbour axis (weights None)."""
    return (np.dtype(dtype) in FRAME_TYPES and np.dtype(out_dtype) in FRAME_TYPES and 1 <= channels <= 4
            and all(t is None or t[1] is not None for t in (taps_h, taps_w)))


def resample_frame(src: np.ndarray, taps_h, taps_w, out: np.ndarray, order: bool | None = None) -> None:
    """Resizes one (H, W, C) frame into ``out`` (H', W', C) with separable taps.

    ``taps_h``/``taps_w`` are ``(index, weights)`` pairs from ``axis_taps``, or None for an axis that
    keeps its extent and window. ``src`` and ``out`` have contiguous rows (a window of rows or whole
    columns of a larger frame is fine). ``order`` (kernel only): run the H pass first (True) or the
    W pass first (False); None: ``rows_first`` of these shapes (a window of a larger output passes
    the full output's order, so its values are the full output's). Integer outputs are rounded half
    to even and saturated.
    """
    if not _kernel_runs(src.dtype, out.dtype, src.shape[2], taps_h, taps_w):
        resample_nd(src, {a: t for a, t in enumerate((taps_h, taps_w)) if t is not None}, out)
        return
    _run_kernel(src, taps_h, taps_w, out, rows_first(src.shape, out.shape, taps_h, taps_w) if order is None else order)


def _run_kernel(src: np.ndarray, taps_h, taps_w, out: np.ndarray, order: bool) -> None:
    """``resample_frame`` where ``_kernel_runs``: the compiled kernel, or its NumPy twin."""
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
    store(r, out, non_negative=src.dtype.kind == "u")


# -- N-D passes --------------------------------------------------------------------------------------


def resample_nd(image: np.ndarray, taps: dict, out: np.ndarray) -> None:
    """Resizes ``image`` into ``out`` with one pass per entry of ``taps`` (axis -> (index, weights), weights
    None for nearest neighbour), in the order with the fewest multiply-adds."""
    x = image
    for a in _cheapest_order(image.shape, taps):
        x = _apply_pass(x, a, *taps[a])
    store(x, out)


def _cheapest_order(shape: Sequence[int], taps: dict) -> list[int]:
    """Orders the passes to minimise multiply-adds (the most shrinking first); ties keep axis order."""
    best, best_cost = list(taps), None
    for order in itertools.permutations(taps):
        s = list(shape)
        cost = 0
        for a in order:
            index, weights = taps[a]
            s[a] = index.shape[0]
            cost += int(np.prod(s)) * (1 if weights is None else weights.shape[1])
        if best_cost is None or cost < best_cost:
            best, best_cost = list(order), cost
    return best


def _apply_pass(x: np.ndarray, axis: int, index: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """One pass along ``axis``: move the axis first, gather K rows per output row, weighted sum."""
    moved = np.ascontiguousarray(np.moveaxis(x, axis, 0))
    flat = moved.reshape(moved.shape[0], -1)
    if weights is None:
        result = flat[index]
    else:
        gathered = flat[index]  # (m, K, R): whole rows, so the gather is a row copy
        if gathered.dtype != np.float32:
            gathered = gathered.astype(np.float32)
        result = np.matmul(weights[:, None, :], gathered)
    return np.moveaxis(result.reshape((index.shape[0],) + moved.shape[1:]), 0, axis)


def store(result: np.ndarray, out: np.ndarray, owned: bool = True, non_negative: bool = False) -> None:
    """Writes ``result`` into ``out``, rounding half to even and saturating for integer outputs.

    ``owned``: the caller gives up ``result``, which may then be rounded in place. ``non_negative``:
    ``result`` holds no negative values, so for uint8 OpenCV's fastest conversion (``convertScaleAbs``:
    round, saturate, with an absolute value that changes nothing) applies. OpenCV converts (C-contiguous
    float32 frames of up to 4 channels; the same values as NumPy's, faster), NumPy elsewhere.
    """
    if out.dtype.kind not in "iu" or result.dtype.kind != "f":
        np.copyto(out, result, casting="unsafe")
    elif (result.dtype == np.float32 and out.dtype in _CV2_DEPTH and result.shape == out.shape and result.ndim == 3
          and result.shape[2] <= 4 and result.flags.c_contiguous and out.flags.c_contiguous):
        if non_negative and out.dtype == np.uint8:
            cv2.convertScaleAbs(result, dst=out)
        else:
            cv2.add(result, 0.0, dst=out, dtype=_CV2_DEPTH[out.dtype])
    else:
        info = np.iinfo(out.dtype)
        if not owned:
            result = result.copy()
        np.clip(result, info.min, info.max, out=result)
        np.rint(result, out=result)
        np.copyto(out, result, casting="unsafe")
