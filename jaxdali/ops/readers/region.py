"""The region of interest of ``fn.readers.numpy``: from its ROI arguments to one box per sample.

Pure arithmetic on a sample's shape, as DALI 2.4 does it:

* ``roi_axes`` names the axes the ROI vectors describe, in their order (negative axes count from
  the end); without it the vectors cover every axis. A one-element vector applies to every axis.
* start: ``roi_start``, or ``round(rel_roi_start * extent)``; default 0.
* end: ``roi_end``; ``round(rel_roi_end * extent)``; ``start + roi_shape``;
  ``round((rel_roi_start + rel_roi_shape) * extent)`` when both are relative, else
  ``start + round(rel_roi_shape * extent)``; default the extent. Rounding is half away from zero.
* Relative coordinates are scaled in float32 arithmetic.
* ``out_of_bounds_policy``: "error" rejects a box that leaves the array, "trim_to_shape" cuts it
  to the array, "pad" keeps it (the part outside is filled with ``fill_value``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from jaxdali.ops.convert import round_half_away
from jaxdali.ops.schema import OpArgumentError

__all__ = ["ROI_ARGS", "check_roi_args", "roi_box"]

ROI_ARGS = ("roi_start", "rel_roi_start", "roi_end", "rel_roi_end", "roi_shape", "rel_roi_shape")

# Arguments that fix the end of the box: at most one may be given (DALI's "incompatible" pairs).
_END_ARGS = ("roi_end", "rel_roi_end", "roi_shape", "rel_roi_shape")


def check_roi_args(op: str, given: Callable[[str], bool]) -> None:
    """Build-time check of which ROI arguments are given together."""
    if given("roi_start") and given("rel_roi_start"):
        raise OpArgumentError(f"fn.{op}: argument 'roi_start' is incompatible with 'rel_roi_start'")
    ends = [n for n in _END_ARGS if given(n)]
    if len(ends) > 1:
        raise OpArgumentError(f"fn.{op}: argument '{ends[0]}' is incompatible with '{ends[1]}'")


def _axes(roi_axes: Sequence[int], ndim: int, path: str) -> list[int]:
    if not roi_axes:
        return list(range(ndim))
    out = []
    for a in roi_axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"{path!r}: roi_axes: axis {a} out of range; expected range is "
                             f"[{-ndim}, {ndim - 1}] for a {ndim}D array")
        a = a % ndim
        if a in out:
            raise ValueError(f"{path!r}: roi_axes: axis index {a} occurs more than once in {list(roi_axes)}")
        out.append(a)
    return out


def _vector(name: str, value: Any, count: int, dtype, path: str) -> np.ndarray | None:
    if value is None:
        return None
    v = np.asarray(value, dtype).reshape(-1)
    if v.size == 1:
        return np.full(count, v[0], dtype)
    if v.size != count:
        raise ValueError(f"{path!r}: argument {name!r} expected shape {count} but got {v.size} values, which "
                         f"can't be interpreted as the expected shape")
    return v


def _scaled(rel: np.ndarray, extents: np.ndarray) -> np.ndarray:
    # float32 arithmetic, as DALI: 0.9f * 5 rounds to 4.5f, which rounds to 5.
    return round_half_away(rel * extents.astype(np.float32)).astype(np.int64)


def roi_box(shape: Sequence[int], values: dict[str, Any], roi_axes: Sequence[int], policy: str,
            path: str) -> tuple[np.ndarray, np.ndarray]:
    """The box ``[start, end)`` to read of an array of ``shape``, over all its axes.

    ``values`` maps the given ROI argument names to their values for this sample. Under "pad" the
    box may leave the array; otherwise it lies inside it. Raises ValueError naming ``path``.
    """
    ndim = len(shape)
    axes = _axes(roi_axes, ndim, path)
    extents = np.asarray([shape[a] for a in axes], np.int64)
    vec = {name: _vector(name, values.get(name), len(axes), np.float32 if name.startswith("rel") else np.int64, path)
           for name in ROI_ARGS}
    if vec["roi_shape"] is not None and (vec["roi_shape"] < 0).any():
        raise ValueError(f"{path!r}: roi_shape must not be negative, got {vec['roi_shape'].tolist()}")
    if vec["rel_roi_shape"] is not None and (vec["rel_roi_shape"] < 0).any():
        raise ValueError(f"{path!r}: rel_roi_shape must not be negative, got {vec['rel_roi_shape'].tolist()}")
    if vec["roi_start"] is not None:
        start = vec["roi_start"]
    elif vec["rel_roi_start"] is not None:
        start = _scaled(vec["rel_roi_start"], extents)
    else:
        start = np.zeros(len(axes), np.int64)
    if vec["roi_end"] is not None:
        end = vec["roi_end"]
    elif vec["rel_roi_end"] is not None:
        end = _scaled(vec["rel_roi_end"], extents)
    elif vec["roi_shape"] is not None:
        end = start + vec["roi_shape"]
    elif vec["rel_roi_shape"] is not None:
        end = (_scaled(vec["rel_roi_start"] + vec["rel_roi_shape"], extents) if vec["rel_roi_start"] is not None
               else start + _scaled(vec["rel_roi_shape"], extents))
    else:
        end = extents.copy()
    bad = np.flatnonzero(end < start)
    if bad.size:
        k = bad[0]
        raise ValueError(f"{path!r}: end coordinates can't be before start coordinates. Got: start={start[k]} "
                         f"end={end[k]} on axis {axes[k]}")
    full_start = np.zeros(ndim, np.int64)
    full_end = np.asarray(shape, np.int64).copy()
    full_start[axes], full_end[axes] = start, end
    if policy == "trim_to_shape":
        full_start = np.clip(full_start, 0, shape)
        full_end = np.clip(full_end, full_start, shape)
    elif policy == "error" and ((full_start < 0).any() or (full_end > np.asarray(shape)).any()):
        raise ValueError(
            f"{path!r}: Slice can't be placed out of bounds with current policy. Got: input_shape={{"
            f"{' x '.join(map(str, shape))}}}, slice_anchor={{{' x '.join(map(str, full_start))}}}, "
            f"slice_shape={{{' x '.join(map(str, full_end - full_start))}}}")
    return full_start, full_end
