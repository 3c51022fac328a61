"""Geometry operators: ``fn.crop``, ``fn.flip``, ``fn.transpose``, ``fn.reshape``.

This module also holds the pieces that ``jaxdali.ops.color`` reuses:

* image layouts (which axis is D, H, W, C, F) and DALI's defaults for unlabelled data;
* ``crop_anchor`` / ``crop_window``: the pure crop-window arithmetic of ``fn.crop`` and
  ``fn.crop_mirror_normalize``;
* ``convert``: DALI's saturating type conversion, written once for NumPy (host) and ``jax.numpy``
  (device) so both paths give the same values.

Host implementations write whole samples with NumPy (views, ``np.copyto``, ufuncs), which release
the GIL, from ``ctx.parallel_for`` chunks into a preallocated batch whenever the output shape is
the same for every sample. Device implementations (``run_jax``) use static slices where the window
is constant and ``lax.dynamic_slice`` where per-sample positions move it.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, to_numpy_type

__all__ = [
    "CROP_LAYOUTS", "FLIP_LAYOUTS", "CROP_ARGS", "image_layout", "sample_name", "output_dtype", "LayoutAware",
    "round_half_away", "separate_product", "convert", "WindowOutOfBounds", "crop_anchor", "crop_axes",
    "crop_window", "window_slices", "channel_fill", "channel_shape", "copy_window", "device_window",
    "check_crop_args", "requested_crop", "crop_positions", "static_sizes", "device_anchors",
    "CROP", "FLIP", "TRANSPOSE", "RESHAPE",
]

# -- layouts ----------------------------------------------------------------------------------------

#: Layouts accepted by crop and crop_mirror_normalize (DALI's list).
CROP_LAYOUTS = ("HWC", "CHW", "DHWC", "CDHW", "FHWC", "FCHW", "CFHW", "FDHWC", "FCDHW", "CFDHW")
#: Layouts accepted by flip (DALI's list).
FLIP_LAYOUTS = ("FDHWC", "FHWC", "DHWC", "HWC", "FCDHW", "FCHW", "CDHW", "CHW")
#: What DALI assumes for data without a layout, by number of dimensions.
_DEFAULT_LAYOUTS = {3: "HWC", 4: "FHWC", 5: "FDHWC"}


def image_layout(op: str, layout: str, ndim: int, allowed: Sequence[str]) -> str:
    """The layout of an image input: the given one, or DALI's default for ``ndim`` when unset.

    Raises ValueError with DALI's wording when the layout is not one of ``allowed``.
    """
    if not layout:
        layout = _DEFAULT_LAYOUTS.get(ndim, "")
        if layout not in allowed:
            raise ValueError(
                f"fn.{op}: The number of dimensions {ndim} does not match any of the allowed layouts for "
                f"input 0. Valid layouts are: {', '.join(allowed)}")
        return layout
    if layout not in allowed:
        raise ValueError(f'fn.{op}: The layout "{layout}" does not match any of the allowed layouts for input 0. '
                         f"Valid layouts are: {', '.join(allowed)}")
    if len(layout) != ndim:
        raise ValueError(f"fn.{op}: the layout {layout!r} cannot describe samples with {ndim} dimensions")
    return layout


def sample_name(tl: TensorListCPU, i: int) -> str:
    info = tl.source_info
    return f"sample {i}" + (f" ({info[i]})" if info and i < len(info) and info[i] else "")


def output_dtype(op: str, args, allowed: Sequence[DALIDataType] | None):
    """The ``dtype`` argument (or its deprecated alias ``output_dtype``) as a NumPy dtype, or None."""
    dtype, alias = args.get("dtype"), args.get("output_dtype")
    if dtype is not None and alias is not None:
        raise OpArgumentError(f"fn.{op}: 'dtype' and its deprecated alias 'output_dtype' cannot both be given")
    dtype = dtype if dtype is not None else alias
    if dtype is None:
        return None
    if allowed is not None and dtype not in allowed:
        raise OpArgumentError(f"fn.{op}: argument 'dtype' must be one of {[d.name for d in allowed]}, "
                              f"got {dtype.name}")
    return np.dtype(to_numpy_type(dtype))


class LayoutAware:
    """Mixin for device implementations that need their input's layout.

    ``run_jax`` receives arrays only; the device stage calls ``output_layouts(input_layouts)`` when
    it records the operator, before the program is traced, so the layout is kept from there. A
    compiled program is reused across iterations, so a layout that changes later is an error.
    """

    _device_layout: str | None = None

    def device_layout_of(self, layout: str) -> None:
        if self._device_layout is not None and self._device_layout != layout:
            raise ValueError(f"{self.name}: the input layout changed from {self._device_layout!r} to {layout!r} "
                             "between iterations; a device operator needs one layout")
        self._device_layout = layout

    def output_layouts(self, input_layouts):
        self.device_layout_of(input_layouts[0] if input_layouts else "")
        return [self.device_output_layout(self._device_layout)] * len(self.node.outputs)

    def device_output_layout(self, layout: str) -> str:
        return layout


# -- type conversion ----------------------------------------------------------------------------------


def round_half_away(x, xp=np):
    """Rounds to the nearest integer, halves away from zero (C's ``round``); exact on host and device."""
    if xp is np:
        t = np.trunc(x)
        return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)
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
    * anything -> bool: non-zero is True; -> float: the nearest value (inf when out of range).

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
    if dtype == np.bool_:
        return x != 0
    if dtype.kind == "f" or src == np.bool_:
        return x.astype(dtype)
    info = np.iinfo(dtype)
    top = xp.asarray(info.max, dtype=dtype)
    bottom = xp.asarray(info.min, dtype=dtype)
    if src.kind == "f":
        r = round_half_away(x, xp) if rounding == "round" else xp.trunc(x)
        hi, lo = _float_bounds(src, info)
        inside = (r < hi) & (r > lo)
        safe = xp.where(inside, r, xp.zeros((), src)).astype(dtype)
        return xp.where(r >= hi, top, xp.where(r <= lo, bottom, safe))
    src_info = np.iinfo(src)
    lo, hi = max(info.min, src_info.min), min(info.max, src_info.max)
    if lo > src_info.min or hi < src_info.max:
        x = xp.clip(x, xp.asarray(lo, dtype=src), xp.asarray(hi, dtype=src))
    return x.astype(dtype)


# -- crop windows ------------------------------------------------------------------------------------


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
    anchor = [0] * len(shape)
    out = list(shape)
    for axis, size, pos in zip(crop_axes(layout), size_dhw, pos_zyx):
        if axis is None or size is None:
            continue
        extent = shape[axis]
        a = int(crop_anchor(pos, extent, size, rounding))
        if policy == "trim_to_shape":
            lo, hi = max(a, 0), min(a + size, extent)
            a, size = lo, max(hi - lo, 0)
        anchor[axis], out[axis] = a, size
    if policy == "error" and any(a < 0 or a + n > e for a, n, e in zip(anchor, out, shape)):
        raise WindowOutOfBounds(
            "Slice can't be placed out of bounds with current policy. Got: input_shape={%s}, slice_anchor={%s}, "
            "slice_shape={%s}" % (" x ".join(map(str, shape)), " x ".join(map(str, anchor)), " x ".join(map(str, out))))
    return tuple(anchor), tuple(out)


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


def channel_fill(op: str, fill_values: Sequence[float], channels: int) -> np.ndarray:
    """``fill_values`` as one float32 value per channel (1 value is broadcast)."""
    fill = np.asarray(fill_values, np.float32).reshape(-1)
    if fill.size == 1:
        return np.full(channels, fill[0], np.float32)
    if fill.size != channels:
        raise ValueError(f"fn.{op}: 'fill_values' has {fill.size} values but the output has {channels} channels; "
                         f"give 1 value or one per channel")
    return fill


def channel_shape(layout: str, ndim: int, channels: int) -> tuple[int, ...]:
    shape = [1] * ndim
    shape[layout.index("C")] = channels
    return tuple(shape)


def copy_window(src: np.ndarray, dst: np.ndarray, anchor: Sequence[int], fill: np.ndarray | None,
                layout: str, dtype: np.dtype, rounding: str) -> None:
    """Writes the window of ``src`` starting at ``anchor`` into ``dst`` (the window's shape).

    Parts of the window outside ``src`` get ``fill`` (one value per channel, already in ``dtype``).
    """
    src_sl, dst_sl, outside = window_slices(anchor, dst.shape, src.shape)
    if outside:
        dst[...] = fill.reshape(channel_shape(layout, dst.ndim, fill.size))
    region = src[src_sl]
    if region.size:
        np.copyto(dst[dst_sl], convert(region, dtype, np, rounding), casting="unsafe")


def device_window(x, anchors: Sequence[Any], sizes: Sequence[int]):
    """Device crop of a dense batch ``x`` (batch axis first) to windows of static ``sizes``.

    ``anchors`` holds, per sample axis, an int (the same for every sample) or an int32 array of
    shape (batch,) with positions from ``crop_anchor`` (so a window no larger than the input stays
    inside it). Returns (window, mask): mask is None when every window lies inside the input,
    otherwise a boolean array that broadcasts against the window's leading axes and is False where
    the window is outside the input (the caller fills those elements).
    """
    import jax
    import jax.numpy as jnp
    from jax import lax

    shape = x.shape[1:]
    pads = []
    for a, n, e in zip(anchors, sizes, shape):
        if isinstance(a, (int, np.integer)):
            pads.append((max(-int(a), 0), max(int(a) + n - e, 0)))
        else:
            pads.append((max(n - e, 0),) * 2)
    if any(lo or hi for lo, hi in pads):
        x = jnp.pad(x, [(0, 0)] + pads)
    starts = [a + lo for a, (lo, _) in zip(anchors, pads)]
    if all(isinstance(s, (int, np.integer)) for s in starts):
        window = x[(slice(None),) + tuple(slice(int(s), int(s) + n) for s, n in zip(starts, sizes))]
    else:
        batch = x.shape[0]
        table = jnp.stack([jnp.broadcast_to(jnp.asarray(s, jnp.int32), (batch,)) for s in starts], axis=1)
        window = jax.vmap(lambda xi, st: lax.dynamic_slice(xi, tuple(st[k] for k in range(len(sizes))), sizes))(
            x, table)
    mask = None
    ndim = len(sizes)
    for axis, (a, n, e, (lo, hi)) in enumerate(zip(anchors, sizes, shape, pads)):
        if not (lo or hi):
            continue
        pos = jnp.arange(n, dtype=jnp.int32) + jnp.asarray(a, jnp.int32)[..., None]
        inside = (pos >= 0) & (pos < e)
        inside = inside.reshape((-1,) + (1,) * axis + (n,) + (1,) * (ndim - axis - 1))
        mask = inside if mask is None else mask & inside
    return window, mask


# -- crop ------------------------------------------------------------------------------------------

_CROP_OUTPUT_TYPES = (DALIDataType.UINT8, DALIDataType.FLOAT16, DALIDataType.FLOAT)

#: Arguments shared by crop and crop_mirror_normalize.
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
_CROP_SIZE_ARGS = ("crop", "crop_h", "crop_w", "crop_d")
_POS_ARGS = ("crop_pos_z", "crop_pos_y", "crop_pos_x")


def _given(node, args, name: str) -> bool:
    return name in node.arg_inputs or args.get(name) is not None


def check_crop_args(op: str, node, args) -> None:
    """Build-time checks of the crop size arguments (DALI's messages)."""
    if _given(node, args, "crop") and any(_given(node, args, n) for n in ("crop_h", "crop_w", "crop_d")):
        raise OpArgumentError(f"fn.{op}: argument 'crop' cannot be given together with 'crop_h'/'crop_w'/'crop_d'")
    if _given(node, args, "crop_h") != _given(node, args, "crop_w"):
        raise OpArgumentError(f"fn.{op}: `crop_w` and `crop_h` arguments must be provided together")
    if _given(node, args, "crop_d") and not _given(node, args, "crop_w"):
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
        if int(v) <= 0:
            raise ValueError(f"fn.{op}: argument '{name}' must be >= 1 for sample {i}, got {v}")
        out.append(int(v))
    return tuple(out)


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


class Crop(LayoutAware, Operator):
    """Cuts a window out of every sample (the same window for all frames of a sequence)."""

    #: May run in the device stage of a device-output pipeline (``run_jax`` equals ``run`` bit for bit).
    device_offload = True

    def __init__(self, node, build):
        super().__init__(node, build)
        check_crop_args("crop", node, self.args)
        self._dtype = output_dtype("crop", self.args, _CROP_OUTPUT_TYPES)

    def check_device_args(self, args) -> None:
        crop_positions("crop", args, args.batch_size)

    def _plan(self, x: TensorListCPU, args) -> tuple[str, list[tuple[tuple, tuple]]]:
        layout = image_layout("crop", x.layout(), x.ndim(), CROP_LAYOUTS)
        pos = crop_positions("crop", args, len(x))
        windows = []
        for i, shape in enumerate(x.shape()):
            try:
                windows.append(crop_window(shape, layout, requested_crop("crop", args, i), pos[i],
                                           args["rounding"], args["out_of_bounds_policy"]))
            except WindowOutOfBounds as e:
                raise WindowOutOfBounds(f"fn.crop: {sample_name(x, i)}: {e}") from None
        return layout, windows

    def run(self, ctx, inputs, args):
        (x,) = inputs
        layout, windows = self._plan(x, args)
        dtype = self._dtype or x.np_dtype
        fill = None
        if args["out_of_bounds_policy"] == "pad" and len(x):
            channels = x.shape()[0][layout.index("C")]
            fill = convert(channel_fill("crop", args["fill_values"], channels), dtype, np, "truncate")
        shapes = {w[1] for w in windows}
        samples = x.samples()
        dense = np.empty((len(x),) + shapes.pop(), dtype) if len(shapes) == 1 else None
        outs: list[Any] = [None] * len(x)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                anchor, shape = windows[i]
                dst = dense[i] if dense is not None else np.empty(shape, dtype)
                copy_window(samples[i], dst, anchor, fill, layout, dtype, "truncate")
                outs[i] = dst

        ctx.parallel_for(work, len(x))
        return TensorListCPU(dense if dense is not None else outs, x.layout())

    @property
    def run_jax(self):
        # Per-sample window sizes give samples of different shapes: host only.
        return None if any(n in self.node.arg_inputs for n in _CROP_SIZE_ARGS) else self._run_jax

    def _run_jax(self, inputs, args):
        import jax.numpy as jnp

        (x,) = inputs
        layout = image_layout("crop", self._device_layout, x.ndim - 1, CROP_LAYOUTS)
        shape = x.shape[1:]
        sizes = static_sizes("crop", args, shape, layout)
        anchors = device_anchors("crop", args, shape, layout)
        window, mask = device_window(x, anchors, sizes)
        dtype = self._dtype or np.dtype(x.dtype)
        out = convert(window, dtype, jnp, "truncate")
        if mask is not None:
            fill = convert(channel_fill("crop", args["fill_values"], shape[layout.index("C")]), dtype, np, "truncate")
            fill = jnp.asarray(fill).reshape((1,) + channel_shape(layout, out.ndim - 1, fill.size))
            out = jnp.where(mask, out, fill)
        return [out]


CROP = register(OpSchema(
    name="crop", impl=Crop, devices=("cpu", "gpu"),
    doc="Crops a window of `crop` (or `crop_h` x `crop_w` [x `crop_d`]) at the relative position "
        "`crop_pos_x/y/z`: anchor = rounding(pos * (extent - crop)). Sequences use the same window in "
        "every frame. Layouts: " + ", ".join(CROP_LAYOUTS) + " (3-D data without a layout is HWC, 4-D FHWC).\n\n"
        ".. note:: On the device (``device='gpu'``) per-sample positions outside [0, 1] are not reported: the "
        "device program cannot raise, and the window is clamped to the input. The host checks them.",
    args=CROP_ARGS + (
        Arg("dtype", "dtype", None, "Output type: UINT8, FLOAT16 or FLOAT (float -> uint8 truncates and "
            "saturates); default: the input type."),
        Arg("output_dtype", "dtype", None, "Deprecated alias of dtype."),
    ),
))


# -- flip ------------------------------------------------------------------------------------------

_FLIP_AXES = (("horizontal", "W"), ("vertical", "H"), ("depthwise", "D"))


class Flip(LayoutAware, Operator):
    """Reverses the W, H and/or D axes of each sample (every frame of a sequence alike)."""

    #: May run in the device stage of a device-output pipeline (``run_jax`` equals ``run`` bit for bit).
    device_offload = True

    def run(self, ctx, inputs, args):
        (x,) = inputs
        layout = image_layout("flip", x.layout(), x.ndim(), FLIP_LAYOUTS)
        flags = [(layout.index(ch), args.per_sample(name, np.int32)) for name, ch in _FLIP_AXES if ch in layout]
        samples = x.samples()
        dense = np.empty((len(x),) + tuple(x.shape()[0]), x.np_dtype) if x.dense() is not None else None
        outs: list[Any] = [None] * len(x)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                index = [slice(None)] * x.ndim()
                for axis, flag in flags:
                    if flag[i]:
                        index[axis] = slice(None, None, -1)
                view = samples[i][tuple(index)]
                if dense is not None:
                    np.copyto(dense[i], view)
                else:
                    outs[i] = np.ascontiguousarray(view)

        ctx.parallel_for(work, len(x))
        return TensorListCPU(dense if dense is not None else outs, x.layout())

    def run_jax(self, inputs, args):
        import jax.numpy as jnp

        (x,) = inputs
        layout = image_layout("flip", self._device_layout, x.ndim - 1, FLIP_LAYOUTS)
        for name, ch in _FLIP_AXES:
            if ch not in layout:
                continue
            axis = layout.index(ch) + 1
            if args.is_per_sample(name):
                flag = args.per_sample(name, jnp.int32).reshape((-1,) + (1,) * (x.ndim - 1))
                x = jnp.where(flag != 0, jnp.flip(x, axis), x)
            elif args[name]:
                x = jnp.flip(x, axis)
        return [x]


FLIP = register(OpSchema(
    name="flip", impl=Flip, devices=("cpu", "gpu"),
    doc="Flips each sample horizontally (W), vertically (H) and/or depthwise (D); a non-zero flag flips. "
        "Layouts: " + ", ".join(FLIP_LAYOUTS) + " (3-D data without a layout is HWC, 4-D FHWC, 5-D FDHWC).",
    args=(Arg("horizontal", "int", 1, "Flip the W axis.", tensor=True),
          Arg("vertical", "int", 0, "Flip the H axis.", tensor=True),
          Arg("depthwise", "int", 0, "Flip the D axis.", tensor=True)),
))


# -- transpose -------------------------------------------------------------------------------------


class Transpose(LayoutAware, Operator):
    """Permutes the axes of each sample: output axis k is input axis ``perm[k]``."""

    #: May run in the device stage of a device-output pipeline (``run_jax`` equals ``run`` bit for bit).
    device_offload = True

    def __init__(self, node, build):
        super().__init__(node, build)
        perm = self.args.get("perm")
        if perm is not None and sorted(perm) != list(range(len(perm))):
            raise OpArgumentError(f"fn.transpose: Invalid permutation: sorted `perm` is not equal to [0, ..., n-1], "
                                  f"got {list(perm)}")

    def _perm(self, ndim: int) -> tuple[int, ...]:
        perm = self.args.get("perm")
        if perm is None:
            return tuple(range(ndim - 1, -1, -1))
        if len(perm) != ndim:
            raise ValueError(f"fn.transpose: perm {list(perm)} has {len(perm)} entries for samples with {ndim} "
                             f"dimensions")
        return tuple(perm)

    def _layout(self, layout: str, ndim: int) -> str:
        given = self.args.get("output_layout")
        if given is not None:
            if len(given) != ndim:
                raise ValueError(f"fn.transpose: output_layout {given!r} does not have {ndim} dimensions")
            return given
        if layout and self.args["transpose_layout"]:
            return "".join(layout[p] for p in self._perm(len(layout)))
        return layout

    def device_output_layout(self, layout: str) -> str:
        ndim = len(layout) if layout else len(self.args.get("output_layout") or "")
        return self._layout(layout, ndim) if ndim else ""

    def run(self, ctx, inputs, args):
        (x,) = inputs
        perm = self._perm(x.ndim())
        samples = x.samples()
        dense = None
        if x.dense() is not None:
            shape = x.shape()[0]
            dense = np.empty((len(x),) + tuple(shape[p] for p in perm), x.np_dtype)
        outs: list[Any] = [None] * len(x)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if dense is not None:
                    np.copyto(dense[i], samples[i].transpose(perm))
                else:
                    outs[i] = np.ascontiguousarray(samples[i].transpose(perm))

        ctx.parallel_for(work, len(x))
        return TensorListCPU(dense if dense is not None else outs, self._layout(x.layout(), x.ndim()))

    def run_jax(self, inputs, args):
        import jax.numpy as jnp

        (x,) = inputs
        perm = self._perm(x.ndim - 1)
        return [jnp.transpose(x, (0,) + tuple(p + 1 for p in perm))]


TRANSPOSE = register(OpSchema(
    name="transpose", impl=Transpose, devices=("cpu", "gpu"),
    doc="Transposes each sample: output axis k is input axis perm[k]. Without `perm` the axes are reversed "
        "(as in DALI).",
    args=(Arg("perm", "ints", None, "The permutation (default: reversed axes).", min=0),
          Arg("transpose_layout", "bool", True, "Permute the layout string as well."),
          Arg("output_layout", "str", None, "The output layout (overrides transpose_layout).")),
))


# -- reshape ---------------------------------------------------------------------------------------


class Reshape(Operator):
    """Gives each sample a new shape (same elements, same order) and/or a new layout."""

    #: May run in the device stage of a device-output pipeline (``run_jax`` equals ``run`` bit for bit).
    device_offload = True

    def __init__(self, node, build):
        super().__init__(node, build)
        sources = [len(node.inputs) == 2, _given(node, self.args, "shape"), _given(node, self.args, "rel_shape")]
        if sum(sources) > 1:
            raise OpArgumentError("fn.reshape: Shape input, `shape` argument and `rel_shape` argument are mutually "
                                  "exclusive")
        if not any(sources) and self.args.get("layout") is None:
            raise OpArgumentError("fn.reshape is no-op: arguments specify neither new shape nor layout.")
        self._dynamic = len(node.inputs) == 2 or "shape" in node.arg_inputs or "rel_shape" in node.arg_inputs

    def _target(self, shape: tuple[int, ...], request, relative: bool, i: int) -> tuple[int, ...]:
        if request is None:
            return shape
        values = [float(v) for v in np.asarray(request).reshape(-1)]
        if relative:
            if len(values) > len(shape):
                raise ValueError(f"fn.reshape: `rel_shape` has more elements ({len(values)}) than there are dimensions "
                                 f"in the input ({len(shape)})")
            values = [-1.0 if v < 0 else float(round_half_away(np.float64(v * e))) for v, e in zip(values, shape)]
        dims = [int(v) for v in values]
        if sum(1 for d in dims if d < 0) > 1 or any(d < -1 for d in dims):
            raise ValueError(f"fn.reshape: only one extent may be -1 (inferred) and none other negative; got {dims}")
        if any(d == 0 for d in dims):
            raise ValueError(f"fn.reshape: Extent of 0 is illegal; got {dims}")
        volume = math.prod(shape)
        known = math.prod(d for d in dims if d > 0)
        if -1 in dims:
            if known == 0 or volume % known:
                raise ValueError(f"fn.reshape: sample {i} has {volume} elements (shape {shape}); they cannot fill "
                                 f"the shape {dims}")
            dims[dims.index(-1)] = volume // known
        if math.prod(dims) != volume:
            raise ValueError(f"fn.reshape: sample {i} has {volume} elements (shape {shape}) but the requested shape "
                             f"{tuple(dims)} has {math.prod(dims)}")
        return tuple(dims)

    def _request(self, args, i: int, shape_input: TensorListCPU | None):
        if shape_input is not None:
            return np.asarray(shape_input.at(i)), False
        if args.given("shape"):
            return args.sample_value("shape", i), False
        if args.given("rel_shape"):
            return args.sample_value("rel_shape", i), True
        return None, False

    def _layout(self, layout: str, in_ndim: int, out_ndim: int) -> str:
        given = self.args.get("layout")
        if given is not None:
            if len(given) != out_ndim:
                raise ValueError(f"fn.reshape: Requested layout '{given}' is not compatible with a {out_ndim}D shape")
            return given
        return layout if out_ndim == in_ndim else ""

    def run(self, ctx, inputs, args):
        x = inputs[0]
        shape_input = inputs[1] if len(inputs) > 1 else None
        targets = []
        for i, shape in enumerate(x.shape()):
            request, relative = self._request(args, i, shape_input)
            targets.append(self._target(tuple(shape), request, relative, i))
        out_ndim = len(targets[0]) if targets else x.ndim()
        if len({len(t) for t in targets}) > 1:
            raise ValueError(f"fn.reshape: all samples must get the same number of dimensions, got shapes {targets}")
        layout = self._layout(x.layout(), x.ndim(), out_ndim)
        dense = x.dense()
        if dense is not None and len(set(targets)) == 1:
            return TensorListCPU(dense.reshape((len(x),) + targets[0]), layout)
        return TensorListCPU([s.reshape(t) for s, t in zip(x.samples(), targets)], layout)

    def output_layouts(self, input_layouts):
        layout = input_layouts[0] if input_layouts else ""
        request = self.args.get("shape") or self.args.get("rel_shape")
        out_ndim = len(request) if request is not None else len(layout)
        if not layout and self.args.get("layout") is None:
            return [""]
        return [self._layout(layout, len(layout) if layout else -1, out_ndim)]

    @property
    def run_jax(self):
        return None if self._dynamic else self._run_jax

    def _run_jax(self, inputs, args):
        (x,) = inputs
        request = args.get("shape") if args.get("shape") is not None else args.get("rel_shape")
        target = self._target(tuple(x.shape[1:]), request, args.get("rel_shape") is not None, 0)
        return [x.reshape((x.shape[0],) + target)]


RESHAPE = register(OpSchema(
    name="reshape", impl=Reshape, devices=("cpu", "gpu"), min_inputs=1, max_inputs=2,
    doc="Reshapes each sample (the element count must stay the same; one extent may be -1). The shape comes "
        "from `shape`, `rel_shape` (multiples of the input extents, rounded) or a second input holding one "
        "1-D shape per sample. The layout is `layout`, else the input's when the number of dimensions is kept, "
        "else empty.",
    args=(Arg("shape", "ints", None, "The output shape; -1 infers one extent.", tensor=True),
          Arg("rel_shape", "floats", None, "The output shape relative to the input's extents; -1 infers one.",
              tensor=True),
          Arg("layout", "str", None, "The output layout.")),
    rejected={"src_dims": "not supported by jaxdali; use fn.transpose/fn.reshape with explicit shapes instead"},
))
