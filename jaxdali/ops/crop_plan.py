"""The crop window arithmetic of ``fn.crop`` and ``fn.crop_mirror_normalize`` (pure; no operators).

* the crop arguments (``CROP_ARGS``), their build-time checks and their per-sample values;
* ``crop_anchor`` / ``crop_window``: where a window of a requested size lies in a sample, under
  an out-of-bounds policy; ``window_slices``: which part of it lies inside the sample;
* ``static_sizes`` / ``device_anchors``: the same windows for the device, where the sizes are
  constants and the positions may be per-sample arrays.

``jaxdali.ops.image_kernels`` copies the windows out (host and device).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from jaxdali.ops.convert import round_half_away
from jaxdali.ops.layouts import sample_name
from jaxdali.ops.schema import Arg, OpArgumentError

__all__ = [
    "CROP_LAYOUTS", "CROP_ARGS", "CROP_SIZE_ARGS", "WindowOutOfBounds", "crop_anchor", "crop_axes", "crop_window",
    "crop_windows", "windows_inside", "window_slices", "given_arg", "check_crop_args", "requested_crop",
    "requested_crops", "crop_positions", "static_sizes",
    "device_anchors",
]

#: Layouts accepted by crop and crop_mirror_normalize (DALI's list).
CROP_LAYOUTS = ("HWC", "CHW", "DHWC", "CDHW", "FHWC", "FCHW", "CFHW", "FDHWC", "FCDHW", "CFDHW")


class WindowOutOfBounds(ValueError):
    """A crop window leaves its input under ``out_of_bounds_policy="error"``."""


def crop_anchor(pos, extent: int, size: int, rounding: str, xp=np):
    """Start of a crop window on one axis: ``rounding(pos * (extent - size))``, computed in float32.

    ``pos`` is a scalar or an array of per-sample positions in [0, 1]; ``rounding`` is "round"
    (half away from zero) or "truncate". Negative anchors (window larger than the input) are
    possible. The same float32 arithmetic runs on host and device.
    """
    x = xp.asarray(pos, dtype=np.float32) * np.float32(extent - size)
    r = round_half_away(x, xp) if rounding == "round" else xp.trunc(x)
    return r.astype(np.int32)


def _depth_axis(layout: str) -> int | None:
    """The axis that ``crop_d`` / the first of three ``crop`` values applies to: D, else F."""
    for ch in "DF":
        if ch in layout:
            return layout.index(ch)
    return None


def crop_axes(layout: str) -> tuple[int | None, int, int]:
    """(depth-or-frame, H, W) axis positions in a sample of ``layout``."""
    return _depth_axis(layout), layout.index("H"), layout.index("W")


def crop_window(shape: Sequence[int], layout: str, size_dhw: Sequence[int | None],
                pos_zyx: Sequence[float], rounding: str, policy: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The crop window of one sample: (anchor, shape) over all its axes.

    Args:
      shape: the sample's shape; ``layout``: its layout (one of ``CROP_LAYOUTS``).
      size_dhw: requested (depth, height, width); None keeps the axis whole. Depth applies to D,
        or to F when there is no D, and is ignored otherwise.
      pos_zyx: relative positions (crop_pos_z, crop_pos_y, crop_pos_x) in [0, 1].
      rounding: "round" or "truncate" (see ``crop_anchor``).
      policy: out_of_bounds_policy. "error" raises ``WindowOutOfBounds``; "pad" keeps the window
        (the part outside the input is filled by the caller); "trim_to_shape" intersects it with
        the input.

    Axes that are not cropped get anchor 0 and their full extent.
    """
    sizes = np.array([[-1 if v is None else int(v) for v in size_dhw]], np.int64)
    anchors, extents = _windows(np.asarray([shape], np.int64), layout, sizes, np.asarray([pos_zyx], np.float32),
                                rounding, policy)
    return tuple(anchors[0].tolist()), tuple(extents[0].tolist())


def crop_windows(op: str, args, shapes: Sequence[Sequence[int]], layout: str,
                 source_info: Sequence[str] | None = None) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """``crop_window`` of every sample of a batch under the operator's crop arguments ``args``, in array
    operations; ``WindowOutOfBounds`` names the first sample whose window leaves it (policy "error")."""
    n = len(shapes)
    if n == 0:
        return []
    shapes = np.asarray(shapes, np.int64).reshape(n, -1)
    try:
        anchors, extents = _windows(shapes, layout, requested_crops(op, args, n), crop_positions(op, args, n),
                                    args["rounding"], args["out_of_bounds_policy"])
    except WindowOutOfBounds as e:
        raise WindowOutOfBounds(f"fn.{op}: {sample_name(source_info, e.sample)}: {e}") from None
    return list(zip(map(tuple, anchors.tolist()), map(tuple, extents.tolist())))


def windows_inside(op: str, args, shapes: Sequence[Sequence[int]], layout: str) -> list | None:
    """``crop_windows`` when every window lies inside its sample, for a consumer that can take just its
    windows (``Operator.input_windows``): a sample reduced to its window holds its crop at anchor 0 with
    the same extents. None otherwise: where a window leaves its sample or every window is its whole sample
    (nothing to leave out), and in every case where the operator's run would raise."""
    try:
        windows = crop_windows(op, args, shapes, layout)
    except (ValueError, KeyError, TypeError):  # WindowOutOfBounds included: the run reports it
        return None
    if not windows:
        return None
    anchors = np.array([w[0] for w in windows], np.int64)
    extents = np.array([w[1] for w in windows], np.int64)
    shapes = np.asarray(shapes, np.int64)
    if (anchors < 0).any() or (anchors + extents > shapes).any() or (extents == shapes).all():
        return None
    return windows


def _windows(shapes: np.ndarray, layout: str, sizes: np.ndarray, pos: np.ndarray, rounding: str,
             policy: str) -> tuple[np.ndarray, np.ndarray]:
    """(anchors, extents), (n, ndim) int64, of the windows of ``sizes`` ((n, 3) d/h/w, -1: the axis is
    kept whole) at ``pos`` ((n, 3) float32 z/y/x) in samples of ``shapes``; see ``crop_window``.
    ``WindowOutOfBounds`` (its ``sample`` attribute: which) for the first window that leaves its sample
    under "error"."""
    anchors = np.zeros_like(shapes)
    extents = shapes.copy()
    for k, axis in enumerate(crop_axes(layout)):
        cropped = sizes[:, k] >= 0
        if axis is None or not cropped.any():
            continue
        extent, size = shapes[:, axis], sizes[:, k]
        a = crop_anchor(pos[:, k], extent, size, rounding).astype(np.int64)
        if policy == "trim_to_shape":
            lo, hi = np.maximum(a, 0), np.minimum(a + size, extent)
            a, size = lo, np.maximum(hi - lo, 0)
        anchors[cropped, axis], extents[cropped, axis] = a[cropped], size[cropped]
    if policy == "error":
        outside = ((anchors < 0) | (anchors + extents > shapes)).any(axis=1)
        if outside.any():
            i = int(np.argmax(outside))
            shape, anchor, out = shapes[i].tolist(), anchors[i].tolist(), extents[i].tolist()
            error = WindowOutOfBounds(
                "Slice can't be placed out of bounds with current policy. Got: input_shape={%s}, slice_anchor={%s}, "
                "slice_shape={%s}" % (" x ".join(map(str, shape)), " x ".join(map(str, anchor)),
                                      " x ".join(map(str, out))))
            error.sample = i
            raise error
    return anchors, extents


def window_slices(anchor: Sequence[int], out_shape: Sequence[int], shape: Sequence[int]):
    """(source slices, destination slices, whether part of the window lies outside the input)."""
    src, dst, outside = [], [], False
    for a, n, e in zip(anchor, out_shape, shape):
        lo, hi = min(max(a, 0), e), max(min(a + n, e), 0)
        hi = max(hi, lo)
        src.append(slice(lo, hi))
        dst.append(slice(lo - a, lo - a + (hi - lo)))
        outside |= a < 0 or a + n > e
    return tuple(src), tuple(dst), outside


# -- arguments --------------------------------------------------------------------------------------

CROP_ARGS = (
    Arg("crop", "floats", None, "Window size (h, w) or (d, h, w); exclusive with crop_h/crop_w/crop_d.",
        tensor=True),
    Arg("crop_h", "float", None, "Window height (DALI's default 0 means unset).", tensor=True, min=0),
    Arg("crop_w", "float", None, "Window width (given together with crop_h).", tensor=True, min=0),
    Arg("crop_d", "float", None, "Window depth; crops F when the layout has no D (needs crop_h and crop_w).",
        tensor=True, min=0),
    Arg("crop_pos_x", "float", 0.5, "Relative horizontal position of the window, in [0, 1].",
        tensor=True, min=0, max=1),
    Arg("crop_pos_y", "float", 0.5, "Relative vertical position of the window, in [0, 1].",
        tensor=True, min=0, max=1),
    Arg("crop_pos_z", "float", 0.5, "Relative depth (or frame) position of the window, in [0, 1].",
        tensor=True, min=0, max=1),
    Arg("rounding", "str", "round", "Anchor rounding: 'round' (half away from zero) or 'truncate'.",
        choices=("round", "truncate")),
    Arg("out_of_bounds_policy", "str", "error",
        "Window outside the input: 'error', 'pad' (with fill_values) or 'trim_to_shape'.",
        choices=("error", "pad", "trim_to_shape")),
    Arg("fill_values", "floats", (0.0,), "Padding value, one for all channels or one per channel."),
    Arg("image_type", "image_type", None, "Deprecated in DALI; has no effect.", hint=True),
)
#: The arguments that give the window size.
CROP_SIZE_ARGS = ("crop", "crop_h", "crop_w", "crop_d")
_POS_ARGS = ("crop_pos_z", "crop_pos_y", "crop_pos_x")


def given_arg(node, args, name: str) -> bool:
    """Whether argument ``name`` is given, as a constant or as an argument input."""
    return name in node.arg_inputs or args.get(name) is not None


def check_crop_args(op: str, node, args) -> None:
    """Build-time checks of the crop size arguments (DALI's messages)."""
    if given_arg(node, args, "crop") and any(given_arg(node, args, n) for n in ("crop_h", "crop_w", "crop_d")):
        raise OpArgumentError(f"fn.{op}: argument 'crop' cannot be given together with 'crop_h'/'crop_w'/'crop_d'")
    if given_arg(node, args, "crop_h") != given_arg(node, args, "crop_w"):
        raise OpArgumentError(f"fn.{op}: `crop_w` and `crop_h` arguments must be provided together")
    if given_arg(node, args, "crop_d") and not given_arg(node, args, "crop_w"):
        raise OpArgumentError(f"fn.{op}: `crop_d` argument must be provided together with `crop_w` and `crop_h`")
    crop = args.get("crop")
    if crop is not None:
        _check_crop_values(op, crop)


def _check_crop_values(op: str, crop) -> tuple[int | None, int, int]:
    values = [float(v) for v in np.asarray(crop).reshape(-1)]
    if len(values) not in (2, 3):
        raise OpArgumentError(f"fn.{op}: `crop` argument should have 2 or 3 elements depending on the input data "
                              f"shape, got {values}")
    sizes = [int(v) for v in values]  # DALI truncates fractional sizes
    if any(s <= 0 for s in sizes):
        raise OpArgumentError(f"fn.{op}: argument 'crop' must hold sizes >= 1, got {values}")
    return (sizes[0] if len(sizes) == 3 else None, sizes[-2], sizes[-1])


def requested_crop(op: str, args, i: int) -> tuple[int | None, int | None, int | None]:
    """Sample ``i``'s requested (depth, height, width); None keeps that axis whole."""
    if args.given("crop"):
        return _check_crop_values(op, args.sample_value("crop", i))
    out = []
    for name in ("crop_d", "crop_h", "crop_w"):
        if not args.given(name):
            out.append(None)
            continue
        v = float(np.asarray(args.sample_value(name, i)).reshape(()))
        out.append(_crop_size(op, name, v, i))
    return tuple(out)


def _crop_size(op: str, name: str, value: float, i: int) -> int:
    if not value >= 1:  # sizes are truncated (DALI); NaN included
        raise ValueError(f"fn.{op}: argument '{name}' must be >= 1 for sample {i}, got {value}")
    return int(value)


def requested_crops(op: str, args, n: int) -> np.ndarray:
    """Every sample's ``requested_crop`` as an (n, 3) int64 array, -1 where the axis is kept whole."""
    if args.given("crop"):
        if not args.is_per_sample("crop"):
            one = _check_crop_values(op, args["crop"])
            return np.tile(np.array([[-1 if v is None else v for v in one]], np.int64), (n, 1))
        return np.array([[-1 if v is None else v for v in requested_crop(op, args, i)] for i in range(n)], np.int64)
    out = np.full((n, 3), -1, np.int64)
    for k, name in enumerate(("crop_d", "crop_h", "crop_w")):
        if args.given(name):
            values = args.per_sample(name, np.float64).reshape(n)
            bad = np.flatnonzero(~((values >= 1) & (values < 2 ** 31)))  # NaN included
            if bad.size:
                i = int(bad[0])
                if values[i] >= 2 ** 31:
                    raise ValueError(f"fn.{op}: argument '{name}' is too large for sample {i}: {values[i]}")
                _crop_size(op, name, float(values[i]), i)  # raises, as for one sample
            out[:, k] = values.astype(np.int64)  # truncated, as int()
    return out


def crop_positions(op: str, args, n: int) -> np.ndarray:
    """(n, 3) float32 positions (z, y, x); per-sample values outside [0, 1] are an error."""
    pos = np.stack([args.per_sample(name, np.float32) for name in _POS_ARGS], axis=1) if n else \
        np.zeros((0, 3), np.float32)
    bad = np.argwhere(~((pos >= 0) & (pos <= 1)))
    if bad.size:
        i, k = bad[0]
        raise ValueError(f"fn.{op}: {_POS_ARGS[k]}={float(pos[i, k])} for sample {i} is out of range [0.0, 1.0]")
    return pos


def static_sizes(op: str, args, shape: Sequence[int], layout: str) -> tuple[int, ...]:
    """The device window size over all sample axes (crop sizes are constants)."""
    size_dhw = _constant_crop(op, args)
    out = list(shape)
    for axis, size in zip(crop_axes(layout), size_dhw):
        if axis is not None and size is not None:
            out[axis] = size
    if args["out_of_bounds_policy"] == "trim_to_shape":
        out = [min(n, e) for n, e in zip(out, shape)]
    return tuple(out)


def _constant_crop(op: str, args) -> tuple[int | None, int | None, int | None]:
    if args.get("crop") is not None:
        return _check_crop_values(op, args["crop"])
    return tuple(int(args[n]) if args.get(n) is not None else None for n in ("crop_d", "crop_h", "crop_w"))


def device_anchors(op: str, args, shape: Sequence[int], layout: str):
    """Per-axis anchors on the device: ints for constant positions, (batch,) int32 arrays otherwise.

    Windows are checked against the policy here (static shapes); per-sample positions are not
    range-checked on the device (see the module notes).
    """
    import jax.numpy as jnp

    requested = list(shape)
    for axis, size in zip(crop_axes(layout), _constant_crop(op, args)):
        if axis is not None and size is not None:
            requested[axis] = size
    anchors: list[Any] = [0] * len(shape)
    policy = args["out_of_bounds_policy"]
    for axis, name in zip(crop_axes(layout), _POS_ARGS):
        if axis is None or requested[axis] == shape[axis]:
            continue
        extent, want = shape[axis], requested[axis]
        if policy == "error" and want > extent:
            raise WindowOutOfBounds(
                f"fn.{op}: Slice can't be placed out of bounds with current policy: the window of {want} on axis "
                f"{axis} is larger than the input extent {extent} (input sample shape {tuple(shape)})")
        if policy == "trim_to_shape" and want > extent:
            continue  # the trimmed window is the whole axis
        if args.is_per_sample(name):
            anchors[axis] = crop_anchor(args.per_sample(name, jnp.float32), extent, want, args["rounding"], jnp)
        else:
            anchors[axis] = int(crop_anchor(args[name], extent, want, args["rounding"]))
    return anchors
