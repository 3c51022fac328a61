"""Per-pixel value operators: ``fn.crop_mirror_normalize``, ``fn.cast``, ``fn.one_hot``,
``fn.normalize``, ``fn.brightness_contrast``, ``fn.hsv``, ``fn.color_twist``.

Every formula is written once as a function of ``xp`` (``numpy`` on the host, ``jax.numpy`` in the
fused device stage) using float32 operations in a fixed order; products that feed an addition go
through ``separate_product`` so XLA cannot fuse them into FMAs. Host and device therefore give the
same bits. Values follow DALI 2.4 (checked against it); the remaining differences from DALI are
float32 rounding in the last bit(s), stated per operator.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np

from jaxdali.core.buffers import owned_empty
from jaxdali.ops.convert import convert, round_half_away, separate_product
from jaxdali.ops.crop_plan import (CROP_ARGS, CROP_LAYOUTS, CROP_SIZE_ARGS, check_crop_args, crop_positions,
                                   crop_windows, device_anchors, given_arg, static_sizes, windows_inside)
from jaxdali.ops.image_kernels import (copy_window, device_flip, device_window, flipped, normalize,
                                       normalize_batch_into, normalize_into, normalize_kernel_status, pixel_rows)
from jaxdali.ops.layouts import (LayoutAware, allocate_batch, channel_shape, check_type, dtype_argument,
                                 image_layout, per_channel, sample_name)
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, to_numpy_type

__all__ = ["CROP_MIRROR_NORMALIZE", "CAST", "ONE_HOT", "NORMALIZE", "BRIGHTNESS_CONTRAST", "HSV", "COLOR_TWIST",
           "hsv_matrix"]

_F32 = np.float32
D = DALIDataType


def _jnp():
    import jax.numpy as jnp

    return jnp


# -- crop_mirror_normalize ---------------------------------------------------------------------------

_CMN_TYPES = (D.FLOAT, D.FLOAT16, D.UINT8, D.INT8)


def cmn_coefficients(mean, std, scale: float, shift: float, xp=np):
    """(offset, factor) with ``out = (in - offset) * factor``; float32, same bits on host and device.

    ``factor = scale / std``; a non-zero ``shift`` is folded into the offset
    (``offset = mean - shift / factor``), which is how DALI 2.4 computes it.
    """
    factor = _F32(scale) / xp.asarray(std, np.float32)
    mean = xp.asarray(mean, np.float32)
    if shift:
        mean = mean - _F32(shift) / factor
    return mean, factor


def check_std(op: str, name: str, value: Any, where: str | None = None) -> None:
    """Refuses a standard deviation that is 0 or not finite: dividing by it gives inf or NaN
    (DALI returns those silently). ``where`` None: a constant argument, checked at build
    (OpArgumentError); else the sample it came with at run time (ValueError)."""
    v = np.asarray(value, np.float64)
    if v.size and (np.isfinite(v) & (v != 0)).all():
        return
    if where is None:
        raise OpArgumentError(f"fn.{op}: argument '{name}' must be finite and non-zero, got {v.tolist()} "
                              f"(the output would be inf or NaN)")
    raise ValueError(f"fn.{op}: argument input '{name}' must be finite and non-zero, got {v.tolist()} for {where} "
                     f"(the output would be inf or NaN)")


class CropMirrorNormalize(LayoutAware, Operator):
    """crop -> mirror (per sample) -> (in - mean) * scale / std + shift -> layout -> dtype (-> pad channels)."""

    op = "crop_mirror_normalize"
    #: May run in the device stage of a device-output pipeline (``run_jax`` equals ``run`` bit for bit).
    device_offload = True
    row_wise = True

    def __init__(self, node, build):
        super().__init__(node, build)
        check_crop_args(self.op, node, self.args)
        self._dtype = dtype_argument(self.op, self.args, _CMN_TYPES)
        if self._dtype is None:
            self._dtype = np.dtype(np.float32)
        for name in ("mean", "std"):
            if self.args.get(name) is not None and len(self.args[name]) == 0:
                raise OpArgumentError(f"fn.{self.op}: argument '{name}' must not be empty")
        if "std" not in node.arg_inputs:
            check_std(self.op, "std", self.args["std"])
        if not any(given_arg(node, self.args, name) for name in CROP_SIZE_ARGS):
            self.input_windows = None  # it reads whole samples: no producer is planned to window them

    @property
    def offload_to_cpu_devices(self) -> bool:
        # On a CPU device the compiled kernel normalises (and mirrors) a batch of 64 uint8 224 x 224 images
        # into float32 in ~2 ms of one thread, where XLA's program took 3-7 ms of CPU (docs/performance.md).
        return not (self._dtype == np.float32 and normalize_kernel_status()[0] == "compiled kernel")

    def check_device_args(self, args) -> None:
        crop_positions(self.op, args, args.batch_size)
        if args.is_per_sample("std"):
            for i in range(args.batch_size):
                check_std(self.op, "std", args.sample_value("std", i), f"sample {i}")

    # -- shared pieces --

    def _layouts(self, layout: str, ndim: int) -> tuple[str, str, tuple[int, ...]]:
        in_layout = image_layout(self.op, layout, ndim, CROP_LAYOUTS)
        out_layout = self.args["output_layout"]
        if sorted(out_layout) != sorted(in_layout):
            raise ValueError(f"fn.{self.op}: The requested output layout {out_layout!r} is not a permutation of "
                             f"input layout {in_layout!r}.")
        return in_layout, out_layout, tuple(in_layout.index(ch) for ch in out_layout)

    def _out_channels(self, channels: int) -> int:
        return 1 << (channels - 1).bit_length() if self.args["pad_output"] and channels > 1 else channels

    def _fill(self, channels_out: int) -> np.ndarray:
        """Float32 value of every output channel outside the data: fill_values under "pad", else 0."""
        if self.args["out_of_bounds_policy"] == "pad":
            return per_channel(self.op, "fill_values", self.args["fill_values"], channels_out, "the output")
        return np.zeros(channels_out, np.float32)

    def _fill_values(self, channels_out: int, dtype: np.dtype) -> np.ndarray:
        return convert(self._fill(channels_out), dtype)

    def device_output_layout(self, layout: str) -> str:
        return self.args["output_layout"]

    def input_windows(self, shapes, layout: str, args):
        """The window of each input sample that this operator reads, when it can take just the windows
        instead of the samples: every window lies inside its sample and all have one shape. Given
        only its window, a sample's crop then sits at anchor 0 with the same size, so the results are
        the same. None otherwise (including every case where the run would raise)."""
        if not len(shapes):
            return None
        try:
            in_layout, _, _ = self._layouts(layout, len(shapes[0]))
        except (ValueError, KeyError, TypeError):  # the host run reports it
            return None
        windows = windows_inside(self.op, args, shapes, in_layout)
        return windows if windows is not None and len({w[1] for w in windows}) == 1 else None

    def dense_device_inputs(self, ctx, inputs, args):
        """A dense stand-in for a ragged input, for the device stage (device-output mode).

        The windows of ``input_windows`` are copied out on the host (the input's type, usually uint8)
        into one dense batch, which the device implementation turns into the host's values. Returns
        None when ``input_windows`` does (the operator then runs on the host).
        """
        (x,) = inputs
        windows = None if self.input_windows is None else self.input_windows(x.shape(), x.layout(), args)
        if windows is None:
            return None
        samples = x.samples()
        dense = allocate_batch([w[1] for w in windows], x.np_dtype)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                copy_window(samples[i], dense[i], windows[i][0], None, x.layout())

        ctx.parallel_for(work, len(x))
        return [TensorListCPU(dense, x.layout())]

    # -- host --
    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        in_layout, out_layout, perm = self._layouts(x.layout(), x.ndim())
        c_axis, w_axis = in_layout.index("C"), in_layout.index("W")
        per_sample_std = args.is_per_sample("std")
        per_sample = per_sample_std or args.is_per_sample("mean")
        windows = crop_windows(self.op, args, x.shape(), in_layout, x.source_info)
        params, shapes = [], []
        shared: dict[int, tuple] = {}  # channels -> coefficients, when mean and std are the same for all
        for i, (shape, (anchor, wshape)) in enumerate(zip(x.shape(), windows)):
            channels = shape[c_axis]
            coefficients = None if per_sample else shared.get(channels)
            if coefficients is None:
                who = sample_name(x.source_info, i)
                mean = per_channel(self.op, "mean", args.sample_value("mean", i), channels, who)
                if per_sample_std:
                    check_std(self.op, "std", args.sample_value("std", i), who)
                std = per_channel(self.op, "std", args.sample_value("std", i), channels, who)
                coefficients = shared[channels] = cmn_coefficients(mean, std, args["scale"], args["shift"])
            params.append(coefficients)
            padded = list(wshape)
            padded[c_axis] = self._out_channels(channels)
            shapes.append(tuple(padded[p] for p in perm))
        mirror = args.per_sample("mirror", np.int32)
        dtype = self._dtype
        out = allocate_batch(shapes, dtype)
        samples = x.samples()
        inverse = tuple(out_layout.index(ch) for ch in in_layout)
        regions = self._whole_batch_regions(x, samples, windows, out, in_layout, per_sample)
        if regions is not None:  # the usual case: one kernel call per chunk of samples
            seen = out.transpose((0,) + tuple(p + 1 for p in inverse))  # the batch in the input's axis order
            offset, factor = params[0]

            def normalize_chunk(lo: int, hi: int) -> None:
                normalize_batch_into(regions[lo:hi], seen[lo:hi], offset, factor, mirror[lo:hi])

            ctx.parallel_for(normalize_chunk, n)
            return TensorListCPU(out, out_layout)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                view = out[i].transpose(inverse)  # the output sample, seen in the input's axis order
                view = flipped(view, [w_axis] if mirror[i] else [])
                offset, factor = params[i]
                if dtype == np.float32:
                    def store(dst, src):
                        normalize_into(src, dst, offset, factor, c_axis)
                else:
                    bshape = channel_shape(in_layout, view.ndim, len(offset))

                    def store(dst, src):
                        rows = pixel_rows(dst, src, offset, factor, c_axis)
                        d, s, o, f = rows if rows is not None else (dst, src, offset.reshape(bshape),
                                                                   factor.reshape(bshape))
                        np.copyto(d, convert(normalize(s, o, f), dtype), casting="unsafe")
                fill = functools.partial(self._fill_values, view.shape[c_axis], dtype)
                copy_window(samples[i], view, windows[i][0], fill, in_layout, store)

        ctx.parallel_for(work, n)
        return TensorListCPU(out, out_layout)

    def _whole_batch_regions(self, x, samples, windows, out, in_layout: str, per_sample: bool) -> list | None:
        """The crop window of every sample (views), when ``normalize_batch_into`` computes the whole batch:
        uint8 HWC samples whose windows lie inside them, float32 output of one shape (``out`` dense),
        no padded channels, the same mean and std for every sample. None otherwise."""
        channels = {shape[-1] for shape in x.shape()}
        if (self._dtype != np.float32 or x.np_dtype != np.uint8 or in_layout[-1] != "C" or len(in_layout) != 3
                or per_sample or not isinstance(out, np.ndarray) or len(channels) != 1
                or self._out_channels(min(channels)) != min(channels)):
            return None
        anchors = np.array([w[0] for w in windows], np.int64)
        ends = anchors + np.array([w[1] for w in windows], np.int64)
        if (anchors < 0).any() or (ends > np.asarray(x.shape(), np.int64)).any():
            return None  # a window leaves its sample: the fill values come from the general path
        return [sample[a0:e0, a1:e1, a2:e2] for sample, (a0, a1, a2), (e0, e1, e2)
                in zip(samples, anchors.tolist(), ends.tolist())]

    # -- device --
    @property
    def run_jax(self):
        # Per-sample window sizes give samples of different shapes: host only.
        return None if any(s in self.node.arg_inputs for s in CROP_SIZE_ARGS) else self._run_jax

    def _device_params(self, args, name: str, batch: int, channels: int):
        jnp = _jnp()
        if args.is_per_sample(name):
            v = args.per_sample(name, jnp.float32, (-1,))
            if v.shape[1] not in (1, channels):
                raise ValueError(f"fn.{self.op}: '{name}' has {v.shape[1]} values per sample for an input with "
                                 f"{channels} channels (expected 1 or {channels})")
            return jnp.broadcast_to(v, (batch, channels))
        return np.broadcast_to(per_channel(self.op, name, args[name], channels, "the input"), (batch, channels))

    def _run_jax(self, inputs, args):
        jnp = _jnp()
        (x,) = inputs
        batch, shape = x.shape[0], x.shape[1:]
        in_layout, out_layout, perm = self._layouts(self._device_layout, len(shape))
        c_axis, w_axis = in_layout.index("C"), in_layout.index("W")
        channels = shape[c_axis]
        sizes = static_sizes(self.op, args, shape, in_layout)
        anchors = device_anchors(self.op, args, shape, in_layout)
        window, mask = device_window(x, anchors, sizes)
        # Mirrored before the normalisation: the per-sample select then reads the input's narrow type
        # (~10 % less CPU for uint8 -> float32 on CPU devices); the same elements, so the same bits.
        mirror = args.per_sample("mirror", jnp.int32) if args.is_per_sample("mirror") else args["mirror"]
        window = device_flip(window, w_axis + 1, mirror)
        if mask is not None:
            mask = device_flip(mask, w_axis + 1, mirror)
        mean = self._device_params(args, "mean", batch, channels)
        std = self._device_params(args, "std", batch, channels)
        xp = jnp if isinstance(mean, jnp.ndarray) or isinstance(std, jnp.ndarray) else np
        offset, factor = cmn_coefficients(mean, std, args["scale"], args["shift"], xp)
        bshape = (batch,) + channel_shape(in_layout, len(shape), channels)
        v = normalize(window, jnp.reshape(offset, bshape), jnp.reshape(factor, bshape))
        channels_out = self._out_channels(channels)
        fill = self._fill(channels_out)
        if mask is not None:
            v = jnp.where(mask, v, fill[:channels].reshape((1,) + bshape[1:]))
        if channels_out > channels:
            pad_shape = list(v.shape)
            pad_shape[c_axis + 1] = channels_out - channels
            extra = fill[channels:].reshape((1,) + channel_shape(in_layout, len(shape), channels_out - channels))
            v = jnp.concatenate([v, jnp.broadcast_to(jnp.asarray(extra), pad_shape)], axis=c_axis + 1)
        v = jnp.transpose(v, (0,) + tuple(p + 1 for p in perm))
        return [convert(v, self._dtype, jnp)]


CROP_MIRROR_NORMALIZE = register(OpSchema(
    name="crop_mirror_normalize", impl=CropMirrorNormalize, devices=("cpu", "gpu"),
    doc="Fused crop (as fn.crop), horizontal mirror (per sample), normalization "
        "`out = scale * (in - mean) / std + shift`, layout permutation (`output_layout`, default CHW), type "
        "conversion (round half away from zero, saturating) and optional channel padding to a power of two "
        "(`pad_output`). Without crop arguments only mirror and normalize apply. Values outside the input "
        "(out_of_bounds_policy='pad') and padded channels get `fill_values` under the 'pad' policy, else 0; "
        "fill values are output values (not normalized). A `std` of 0 (or not finite) is an error, at build when "
        "constant (DALI 2.4 returns inf/NaN).\n\n"
        ".. note:: Float32 results may differ from DALI 2.4 in the last bit when `shift` is not 0 "
        "(DALI folds shift into the mean the same way, with a different rounding order).",
    args=CROP_ARGS + (
        Arg("mirror", "int", 0, "Non-zero: flip horizontally (after the crop).", tensor=True),
        Arg("mean", "floats", (0.0,), "Mean per channel (or one value for all).", tensor=True),
        Arg("std", "floats", (1.0,), "Standard deviation per channel (or one value for all).", tensor=True),
        Arg("scale", "float", 1.0, "Multiplier applied after dividing by std."),
        Arg("shift", "float", 0.0, "Value added at the end."),
        Arg("output_layout", "str", "CHW", "Output layout; a permutation of the input layout."),
        Arg("pad_output", "bool", False, "Pad the channels to the next power of two."),
        Arg("dtype", "dtype", None, "Output type: FLOAT (default), FLOAT16, UINT8 or INT8."),
        Arg("output_dtype", "dtype", None, "Deprecated alias of dtype."),
    ),
))


# -- cast ------------------------------------------------------------------------------------------


#: Batches smaller than this are cast on the calling thread.
_INLINE_BYTES = 1 << 16


class Cast(Operator):
    """Converts the element type: float -> integer rounds half away from zero and saturates."""

    row_wise = True

    device_offload = True  # see CropMirrorNormalize.device_offload

    def __init__(self, node, build):
        super().__init__(node, build)
        self._dtype = np.dtype(to_numpy_type(self.args["dtype"]))

    def run(self, ctx, inputs, args):
        (x,) = inputs
        shapes = x.shape()
        if not (shapes.count(shapes[0]) == len(shapes) if shapes else x.dense() is not None):
            return TensorListCPU([convert(s, self._dtype) for s in x.samples()], x.layout())
        out = owned_empty((len(x),) + (tuple(shapes[0]) if shapes else x.dense().shape[1:]), self._dtype)
        # to a float type: the nearest value, no rounding rule: one copy with the cast
        direct = self._dtype.kind == "f" and x.np_dtype != np.bool_
        if out.nbytes < _INLINE_BYTES:  # handing a few boxes or labels to the pool costs more than the cast
            self._cast(x.dense(), out, direct)
        else:  # sample by sample: a batch of separate samples is not stacked first
            samples = x.samples()
            ctx.parallel_for(lambda lo, hi: [self._cast(samples[i], out[i], direct) for i in range(lo, hi)], len(x))
        return TensorListCPU(out, x.layout())

    def _cast(self, data: np.ndarray, out: np.ndarray, direct: bool) -> None:
        with np.errstate(over="ignore", invalid="ignore"):  # out of range -> inf, as convert does
            np.copyto(out, data if direct else convert(data, self._dtype), casting="unsafe")

    @property
    def run_jax(self):
        import jax

        if self._dtype.itemsize == 8 and not jax.config.jax_enable_x64:
            return None  # 64-bit types need jax_enable_x64; convert on the host instead
        return self._run_jax

    def _run_jax(self, inputs, args):
        return [convert(inputs[0], self._dtype, _jnp())]


CAST = register(OpSchema(
    name="cast", impl=Cast, devices=("cpu", "gpu"),
    doc="Casts to `dtype`. Float -> integer rounds half away from zero and saturates (NaN -> 0); integer -> "
        "narrower integer saturates; -> BOOL is `!= 0`.",
    args=(Arg("dtype", "dtype", REQUIRED, "Output type."),),
))


# -- one_hot ---------------------------------------------------------------------------------------


class OneHot(Operator):
    """One-hot encodes integer class indices (floats are truncated) along a new axis."""

    device_offload = True  # see CropMirrorNormalize.device_offload

    op = "one_hot"

    def __init__(self, node, build):
        super().__init__(node, build)
        name = self.args.get("axis_name")
        if name is not None and len(name) != 1:
            raise OpArgumentError(f"fn.one_hot: Unsupported axis_name value. It must be a single character, "
                                  f"got {name!r} instead.")
        self._dtype = np.dtype(to_numpy_type(self.args["dtype"]))
        self._on = convert(np.asarray(self.args["on_value"], np.float32), self._dtype, np, "truncate")
        self._off = convert(np.asarray(self.args["off_value"], np.float32), self._dtype, np, "truncate")

    def _scalar_mode(self, shapes: Sequence[tuple]) -> bool:
        """DALI's legacy rule: when ``axis`` is not given and every sample holds exactly one element,
        each sample is a scalar (so int32 labels of shape (1,) give vectors of shape (num_classes,))."""
        return self.args.get("axis") is None and bool(shapes) and all(math.prod(s) == 1 for s in shapes)

    def _position(self, ndim: int) -> int:
        axis = self.args.get("axis")
        axis = -1 if axis is None else axis
        if not -1 <= axis <= ndim:
            raise ValueError(f"fn.one_hot: Provided axis is outside of allowed range, got: {axis}, expected to be in "
                             f"range: [-1, {ndim}].")
        return ndim if axis == -1 else axis

    def _encode(self, idx, position: int, xp):
        hot = idx[..., None] == xp.arange(self.args["num_classes"], dtype=np.int32)
        out = xp.where(hot, xp.asarray(self._on), xp.asarray(self._off))
        return xp.moveaxis(out, -1, position)

    def _layout(self, layout: str, ndim: int, scalar: bool) -> str:
        name = self.args.get("axis_name")
        if name is None:
            return ""
        if scalar:
            return name
        if len(layout) != ndim:
            raise ValueError(f"fn.one_hot: Input layout mismatch - expected input layout to be of size {ndim} but "
                             f"instead got {layout!r}, which is of size {len(layout)}.")
        position = self._position(ndim)
        return layout[:position] + name + layout[position:]

    def run(self, ctx, inputs, args):
        (x,) = inputs
        if x.np_dtype == np.bool_:
            raise TypeError("fn.one_hot: Unsupported input type: bool")
        shapes = x.shape()
        if self._scalar_mode(shapes):
            idx = np.array([convert(np.asarray(s).reshape(()), np.int32, np, "truncate") for s in x.samples()],
                           np.int32)
            return TensorListCPU(self._encode(idx, 1, np), self._layout(x.layout(), x.ndim(), True))
        layout = self._layout(x.layout(), x.ndim(), False)
        position = self._position(x.ndim())
        dense = x.dense()
        if dense is not None:
            return TensorListCPU(self._encode(convert(dense, np.int32, np, "truncate"), position + 1, np), layout)
        return TensorListCPU([self._encode(convert(s, np.int32, np, "truncate"), position, np) for s in x.samples()],
                             layout)

    @property
    def run_jax(self):
        return None if self.args.get("axis_name") is not None else self._run_jax

    def _run_jax(self, inputs, args):
        jnp = _jnp()
        (x,) = inputs
        ndim = x.ndim - 1
        if self._scalar_mode([x.shape[1:]] * x.shape[0]):
            return [self._encode(convert(x.reshape(x.shape[0]), np.int32, jnp, "truncate"), 1, jnp)]
        return [self._encode(convert(x, np.int32, jnp, "truncate"), self._position(ndim) + 1, jnp)]

    def output_layouts(self, input_layouts):
        return [""]


ONE_HOT = register(OpSchema(
    name="one_hot", impl=OneHot, devices=("cpu", "gpu"),
    doc="One-hot encoding: `on_value` where the index equals the class, `off_value` elsewhere (indices "
        "outside [0, num_classes) give all `off_value`; float indices are truncated). When `axis` is not given "
        "and every sample of the batch holds exactly one element, samples are scalars: a (1,) label becomes a "
        "(num_classes,) vector.\n\n"
        ".. note:: on/off values that do not fit `dtype` saturate (DALI wraps them around).",
    args=(Arg("num_classes", "int", 0, "Number of classes.", min=0),
          Arg("axis", "int", None, "Where the new axis goes (default -1: last); giving it disables the legacy "
              "scalar rule."),
          Arg("dtype", "dtype", D.FLOAT, "Output type."),
          Arg("on_value", "float", 1.0, "Value at the class index."),
          Arg("off_value", "float", 0.0, "Value elsewhere."),
          Arg("axis_name", "str", None, "Layout character of the new axis.")),
))


# -- normalize -------------------------------------------------------------------------------------

_NORMALIZE_IN = (D.UINT8, D.INT8, D.UINT16, D.INT16, D.INT32, D.FLOAT)
_NORMALIZE_OUT = (D.FLOAT, D.UINT8, D.INT8, D.UINT16, D.INT16, D.INT32)


def given_std_factor(stddev, scale: float, epsilon: float, xp=np):
    """Multiplier for a given standard deviation: scale / stddev, or scale / sqrt(stddev**2 + epsilon)."""
    std = xp.asarray(stddev, np.float32)
    if epsilon:
        std = xp.sqrt(separate_product(std * std, xp) + _F32(epsilon))
    return _F32(scale) / std


class Normalize(Operator):
    """(x - mean) * scale / stddev + shift with statistics per sample, over the batch, or given."""

    device_offload = True  # see CropMirrorNormalize.device_offload

    op = "normalize"

    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        if a.get("axes") is not None and a.get("axis_names") is not None:
            raise OpArgumentError("fn.normalize: Arguments `axes` and `axis_names` are mutually exclusive")
        if a.get("axes") is not None and len(a["axes"]) == 0:
            raise OpArgumentError("fn.normalize: `axes` argument must specify at least one reduction axis.")
        if a.get("axes") is not None and len(set(a["axes"])) != len(a["axes"]):
            raise OpArgumentError(f"fn.normalize: `axes` must not repeat an axis, got {list(a['axes'])}")
        if a["batch"] and any(n in node.arg_inputs for n in ("mean", "stddev")):
            raise OpArgumentError("fn.normalize: Batch normalization cannot be used with parameters specified as "
                                  "TensorList inputs")
        self._dtype = np.dtype(to_numpy_type(a["dtype"]))
        check_type(self.op, "output", self._dtype, _NORMALIZE_OUT)
        if a.get("stddev") is not None and "stddev" not in node.arg_inputs and not a["epsilon"]:
            check_std(self.op, "stddev", a["stddev"])

    def _stddev(self, args, i: int, shape: tuple, axes: tuple) -> np.ndarray | None:
        """The given stddev of sample ``i`` (None: computed); a per-sample 0 is refused unless epsilon is set."""
        std = self._param(args, "stddev", i, shape, axes)
        if std is not None and args.is_per_sample("stddev") and not args["epsilon"]:
            check_std(self.op, "stddev", std, f"sample {i}")
        return std

    def _axes(self, layout: str, ndim: int, args, shapes) -> tuple[int, ...]:
        if self.args.get("axes") is not None:
            axes = tuple(self.args["axes"])
            for ax in axes:
                if not 0 <= ax < ndim:
                    raise ValueError(f"fn.normalize: axis index {ax} is out of valid range 0..{ndim - 1}")
            return axes
        names = self.args.get("axis_names")
        if names is not None:
            missing = [c for c in names if c not in layout]
            if missing:
                raise ValueError(f"fn.normalize: axis names {missing} are not in the input layout {layout!r}")
            return tuple(layout.index(c) for c in names)
        for name in ("mean", "stddev"):
            if args.is_per_sample(name):
                param = np.asarray(args.sample_value(name, 0))
                if param.ndim == ndim and param.size > 1:
                    return tuple(k for k in range(ndim) if param.shape[k] == 1)
        return tuple(range(ndim))

    def _param(self, args, name: str, i: int, shape: tuple, axes: tuple) -> np.ndarray | None:
        if not args.given(name):
            return None
        value = np.asarray(args.sample_value(name, i), np.float32)
        if value.size == 1:
            return value.reshape(())
        if value.ndim != len(shape) or any(p not in (1, e) for p, e in zip(value.shape, shape)):
            reduced = tuple(1 if k in axes else e for k, e in enumerate(shape))
            raise ValueError(f"fn.normalize: At sample {i}: parameter '{name}' has shape {value.shape}; expected the "
                             f"reduced sample shape {reduced} (or a scalar)")
        return value

    def run(self, ctx, inputs, args):
        (x,) = inputs
        check_type(self.op, "input", x.np_dtype, _NORMALIZE_IN)
        n = len(x)
        shapes = [tuple(s) for s in x.shape()]
        axes = self._axes(x.layout(), x.ndim(), args, shapes) if n else ()
        samples = x.samples()
        scale, shift, eps, ddof = args["scale"], args["shift"], args["epsilon"], args["ddof"]
        stats = []
        if args["batch"] and n:
            kept = {tuple(e for k, e in enumerate(s) if k not in axes) for s in shapes}
            if len(kept) > 1:
                raise ValueError(f"fn.normalize: with batch=True the non-reduced extents must agree across samples, "
                                 f"got sample shapes {shapes} reduced over axes {axes}")
            mean = self._param(args, "mean", 0, shapes[0], axes)
            count = sum(math.prod(s[k] for k in axes) for s in shapes)
            if mean is None:
                total = sum(np.sum(s, axis=axes, keepdims=True, dtype=np.float64) for s in samples)
                mean64 = total / max(count, 1)
            else:
                mean64 = mean.astype(np.float64)
            std = self._stddev(args, 0, shapes[0], axes)
            if std is None:
                sq = sum(np.sum(np.square(s - mean64), axis=axes, keepdims=True) for s in samples)
                factor = self._computed_factor(sq / max(count - ddof, 1), scale, eps)
            else:
                factor = given_std_factor(std, scale, eps)
            stats = [(mean64.astype(np.float32), factor)] * n
        else:
            for i, s in enumerate(samples):
                mean = self._param(args, "mean", i, shapes[i], axes)
                count = math.prod(shapes[i][k] for k in axes)
                mean64 = np.mean(s, axis=axes, keepdims=True, dtype=np.float64) if mean is None and count else \
                    (mean.astype(np.float64) if mean is not None else np.zeros((), np.float64))
                std = self._stddev(args, i, shapes[i], axes)
                if std is None:
                    sq = np.sum(np.square(s - mean64), axis=axes, keepdims=True)
                    factor = self._computed_factor(sq / max(count - ddof, 1), scale, eps)
                else:
                    factor = given_std_factor(std, scale, eps)
                stats.append((mean64.astype(np.float32), factor))
        out = allocate_batch(shapes, self._dtype)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                np.copyto(out[i], self._apply(samples[i], stats[i][0], stats[i][1], shift, np), casting="unsafe")

        ctx.parallel_for(work, n)
        return TensorListCPU(out, x.layout())

    @staticmethod
    def _computed_factor(var: np.ndarray, scale: float, eps: float) -> np.ndarray:
        var = var + eps
        with np.errstate(divide="ignore"):
            return np.where(var > 0, scale / np.sqrt(np.maximum(var, 0)), 0.0).astype(np.float32)

    def _apply(self, x, mean, factor, shift: float, xp):
        v = normalize(x, mean, factor)
        if shift:
            v = separate_product(v, xp) + _F32(shift)
        return convert(v, self._dtype, xp)

    @property
    def run_jax(self):
        a, node = self.args, self.node
        given = all(a.get(n) is not None and n not in node.arg_inputs for n in ("mean", "stddev"))
        return self._run_jax if given and not a["batch"] else None  # statistics need reductions: host only

    def _run_jax(self, inputs, args):
        (x,) = inputs
        factor = given_std_factor(args["stddev"], args["scale"], args["epsilon"])
        return [self._apply(x, _F32(args["mean"]), factor, args["shift"], _jnp())]


NORMALIZE = register(OpSchema(
    name="normalize", impl=Normalize, devices=("cpu", "gpu"),
    doc="Normalizes: `out = (in - mean) * scale / stddev + shift`. Mean and stddev are computed per sample "
        "(or over the whole batch with `batch=True`) over `axes`/`axis_names` (default: all axes), or given as "
        "scalars or per-sample tensors of the reduced shape. Computed: stddev = sqrt(sum((in - mean)^2) / "
        "(n - ddof) + epsilon), and a zero result gives 0 output (plus shift). Given: scale / stddev, or "
        "scale / sqrt(stddev^2 + epsilon) when epsilon is set; a given stddev of 0 (or not finite) without epsilon "
        "is an error, at build when constant (DALI 2.4 returns inf/NaN).\n\n"
        ".. note:: Statistics are accumulated in float64, so results can differ from DALI's float32 ones in "
        "the last bits (DALI also uses an approximate reciprocal square root).",
    args=(Arg("axes", "ints", None, "Reduction axes.", min=0),
          Arg("axis_names", "str", None, "Reduction axes by layout name."),
          Arg("batch", "bool", False, "Compute the statistics over the whole batch."),
          Arg("mean", "float", None, "Given mean (scalar, or a per-sample tensor of the reduced shape).", tensor=True),
          Arg("stddev", "float", None, "Given standard deviation.", tensor=True),
          Arg("scale", "float", 1.0, "Multiplier."),
          Arg("shift", "float", 0.0, "Added at the end."),
          Arg("epsilon", "float", 0.0, "Added to the variance."),
          Arg("ddof", "int", 0, "Delta degrees of freedom of the computed variance.", min=0),
          Arg("dtype", "dtype", D.FLOAT, "Output type: FLOAT, UINT8, INT8, UINT16, INT16 or INT32.")),
))


# -- brightness_contrast, hsv, color_twist -----------------------------------------------------------

_COLOR_LAYOUTS = ("HWC", "FHWC", "DHWC")


def _value_range(dtype: np.dtype) -> float:
    return 1.0 if np.dtype(dtype).kind == "f" else float(np.iinfo(dtype).max)


def _half_range(dtype: np.dtype) -> float:
    """DALI's default contrast center: 0.5 for floats, (max + 1) / 2 for integers (128 for uint8)."""
    return 0.5 if np.dtype(dtype).kind == "f" else (float(np.iinfo(dtype).max) + 1.0) / 2.0


def bc_coefficients(brightness, contrast, shift, center, out_range: float, xp=np):
    """(mul, add) with ``out = in * mul + add`` for brightness_contrast (float32, DALI's rounding order):
    mul = brightness * contrast; add = brightness * (center - contrast * center) + shift * out_range."""
    sep = lambda p: separate_product(p, xp)  # noqa: E731
    b, c = xp.asarray(brightness, np.float32), xp.asarray(contrast, np.float32)
    s, cc = xp.asarray(shift, np.float32), xp.asarray(center, np.float32)
    add = sep(b * (cc - sep(c * cc))) + sep(s * _F32(out_range))
    return b * c, add


# RGB -> YIQ, and the pieces of inverse(T) @ R(hue) @ diag(1, s, s) @ T (see ``hsv_matrix``).
_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
_YIQ_INV = np.linalg.inv(_YIQ)
_LUMA = np.outer(_YIQ_INV[:, 0], _YIQ[0]).astype(np.float32)
_CHROMA_COS = (np.outer(_YIQ_INV[:, 1], _YIQ[1]) + np.outer(_YIQ_INV[:, 2], _YIQ[2])).astype(np.float32)
_CHROMA_SIN = (np.outer(_YIQ_INV[:, 1], _YIQ[2]) - np.outer(_YIQ_INV[:, 2], _YIQ[1])).astype(np.float32)
_SIN_COEFFS = tuple(_F32(c) for c in (1 / 362880, -1 / 5040, 1 / 120, -1 / 6, 1.0))
_COS_COEFFS = tuple(_F32(c) for c in (-1 / 3628800, 1 / 40320, -1 / 720, 1 / 24, -1 / 2, 1.0))


def _sincos_degrees(degrees, xp=np):
    """(sin, cos) of angles in degrees, float32, from + - * only (identical on host and device).

    The angle is reduced to [-45, 45] degrees around a multiple of 90 and the Taylor series are
    evaluated there (error below 3e-8); ``numpy.sin`` and XLA's ``sin`` differ in the last bit,
    which would make host and device disagree.
    """
    sep = lambda p: separate_product(p, xp)  # noqa: E731
    d = xp.asarray(degrees, np.float32)
    quarter = round_half_away(d * _F32(1 / 90), xp)
    t = (d - sep(quarter * _F32(90))) * _F32(np.pi / 180)
    t2 = t * t
    sin = cos = None
    for coeff in _SIN_COEFFS:
        sin = coeff if sin is None else sep(sin * t2) + coeff
    for coeff in _COS_COEFFS:
        cos = coeff if cos is None else sep(cos * t2) + coeff
    sin = sin * t
    k = xp.mod(quarter, _F32(4))
    s = xp.where(k == 0, sin, xp.where(k == 1, cos, xp.where(k == 2, -sin, -cos)))
    c = xp.where(k == 0, cos, xp.where(k == 1, -sin, xp.where(k == 2, -cos, sin)))
    return s, c


def hsv_matrix(hue, saturation, value, xp=np):
    """Per-sample 3x3 float32 matrices (shape ``hue.shape + (3, 3)``) applied to RGB pixels.

    ``M = value * inv(T) @ R(hue) @ diag(1, saturation, saturation) @ T`` with T the RGB -> YIQ
    transform (Y = 0.299 R + 0.587 G + 0.114 B; I, Q rows 0.596 -0.274 -0.321 / 0.211 -0.523 0.311)
    and R rotating the (I, Q) plane by -hue degrees. This is the linear approximation DALI uses.
    """
    sep = lambda p: separate_product(p, xp)  # noqa: E731
    sin, cos = _sincos_degrees(hue, xp)
    sat = xp.asarray(saturation, np.float32)
    sc = (sep(sat * cos))[..., None, None]
    ss = (sep(sat * sin))[..., None, None]
    m = (_LUMA + sep(sc * _CHROMA_COS)) + sep(ss * _CHROMA_SIN)
    return xp.asarray(value, np.float32)[..., None, None] * m


def _apply_matrix(x, m, offset, xp):
    """out[..., i] = sum_j x[..., j] * m[i, j] (+ offset) in float32; ``m`` broadcasts as (batch?, 3, 3)."""
    sep = lambda p: separate_product(p, xp)  # noqa: E731
    xf = [x[..., j].astype(np.float32) for j in range(3)]
    lead = (slice(None),) * (m.ndim - 2)
    pad = (None,) * (x.ndim - 1 - (m.ndim - 2))
    outs = []
    for i in range(3):
        coeff = [m[lead + (i, j)][(Ellipsis,) + pad] for j in range(3)]
        acc = (sep(xf[0] * coeff[0]) + sep(xf[1] * coeff[1])) + sep(xf[2] * coeff[2])
        if offset is not None:
            acc = acc + offset[(Ellipsis,) + pad]
        outs.append(acc)
    return xp.stack(outs, axis=-1)


class _ColorOp(LayoutAware, Operator):
    """Shared frame of the per-pixel colour operators: layouts, types, per-sample coefficients."""

    row_wise = True

    device_offload = True  # see CropMirrorNormalize.device_offload

    op = ""
    in_types: tuple = ()
    out_types: tuple = ()
    three_channels = True
    coefficient_args: tuple[str, ...] = ()

    def __init__(self, node, build):
        super().__init__(node, build)
        self._dtype = dtype_argument(self.op, self.args, self.out_types)

    def _check(self, layout: str, shape_ndim: int, channels: int, in_dtype) -> np.dtype:
        image_layout(self.op, layout, shape_ndim, _COLOR_LAYOUTS)
        check_type(self.op, "input", in_dtype, self.in_types)
        if self.three_channels and channels != 3:
            raise ValueError(f"fn.{self.op}: expects 3-channel RGB images, got {channels} channels")
        return self._dtype if self._dtype is not None else np.dtype(in_dtype)

    def coefficients(self, values: dict, in_dtype: np.dtype, out_dtype: np.dtype, xp):
        """Per-sample coefficients (arrays with the batch axis first) from the argument values."""
        raise NotImplementedError

    def transform(self, x, coeffs, xp):
        """The float32 result for ``x`` (one sample on the host, the batch on the device)."""
        raise NotImplementedError

    def type_default(self, name: str, in_dtype: np.dtype) -> float:
        """Default of an argument whose DALI default depends on the input type."""
        raise KeyError(name)

    def _values(self, args, batch: int, in_dtype: np.dtype, xp):
        """{argument: (batch,) float32}; xp is NumPy when all are constants (then computed while tracing)."""
        values = {}
        for name in self.coefficient_args:
            if args.is_per_sample(name):
                values[name] = args.per_sample(name, np.float32)
            else:
                value = args[name] if args.given(name) else self.type_default(name, in_dtype)
                values[name] = np.full(batch, value, np.float32)
        per_sample = any(args.is_per_sample(name) for name in self.coefficient_args)
        return values, (xp if per_sample else np)

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        shapes = [tuple(s) for s in x.shape()]
        out_dtype = self._check(x.layout(), x.ndim(), shapes[0][-1] if n else 3, x.np_dtype)
        values, _ = self._values(args, n, x.np_dtype, np)
        coeffs = self.coefficients(values, x.np_dtype, out_dtype, np)
        out = allocate_batch(shapes, out_dtype)
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                v = convert(self.transform(samples[i], [c[i] for c in coeffs], np), out_dtype)
                np.copyto(out[i], v, casting="unsafe")

        ctx.parallel_for(work, n)
        return TensorListCPU(out, x.layout())

    def run_jax(self, inputs, args):
        jnp = _jnp()
        (x,) = inputs
        in_dtype = np.dtype(x.dtype)
        out_dtype = self._check(self._device_layout, x.ndim - 1, x.shape[-1], in_dtype)
        values, xp = self._values(args, x.shape[0], in_dtype, jnp)
        coeffs = self.coefficients(values, in_dtype, out_dtype, xp)
        return [convert(self.transform(x, coeffs, jnp), out_dtype, jnp)]


class BrightnessContrast(_ColorOp):
    op = "brightness_contrast"
    in_types = out_types = (D.UINT8, D.INT16, D.INT32, D.FLOAT)
    three_channels = False
    coefficient_args = ("brightness", "contrast", "brightness_shift", "contrast_center")

    def type_default(self, name, in_dtype):
        if name == "contrast_center":
            return _half_range(in_dtype)
        raise KeyError(name)

    def coefficients(self, values, in_dtype, out_dtype, xp):
        return bc_coefficients(values["brightness"], values["contrast"], values["brightness_shift"],
                               values["contrast_center"], _value_range(out_dtype), xp)

    def transform(self, x, coeffs, xp):
        mul, add = coeffs
        pad = (None,) * (x.ndim - np.ndim(mul))
        return separate_product(x.astype(np.float32) * mul[(Ellipsis,) + pad], xp) + add[(Ellipsis,) + pad]


BRIGHTNESS_CONTRAST = register(OpSchema(
    name="brightness_contrast", impl=BrightnessContrast, devices=("cpu", "gpu"),
    doc="out = brightness_shift * range + brightness * (contrast_center + contrast * (in - contrast_center)), "
        "where range is 1 for float outputs and the type's maximum for integer outputs; integer outputs round "
        "half away from zero and saturate. Layouts HWC, FHWC, DHWC; any number of channels.",
    args=(Arg("brightness", "float", 1.0, "Brightness multiplier.", tensor=True),
          Arg("brightness_shift", "float", 0.0, "Brightness shift, in units of the output range.", tensor=True),
          Arg("contrast", "float", 1.0, "Contrast multiplier (0 gives uniform grey).", tensor=True),
          Arg("contrast_center", "float", None, "Intensity unaffected by contrast; default: half of the input "
              "type's range (0.5 for float, 128 for uint8).", tensor=True),
          Arg("dtype", "dtype", None, "Output type (UINT8, INT16, INT32 or FLOAT); default: the input type.")),
))


class Hsv(_ColorOp):
    op = "hsv"
    in_types = out_types = (D.UINT8, D.INT16, D.INT32, D.FLOAT, D.FLOAT16)
    coefficient_args = ("hue", "saturation", "value")

    def coefficients(self, values, in_dtype, out_dtype, xp):
        return (hsv_matrix(values["hue"], values["saturation"], values["value"], xp),)

    def transform(self, x, coeffs, xp):
        return _apply_matrix(x, coeffs[0], None, xp)


HSV = register(OpSchema(
    name="hsv", impl=Hsv, devices=("cpu", "gpu"),
    doc="Adjusts hue (degrees, additive), saturation and value (multipliers) of RGB images with DALI's linear "
        "approximation: RGB -> YIQ, rotate (I, Q) by the hue, scale, back to RGB (see `hsv_matrix`).\n\n"
        ".. note:: Float outputs match DALI 2.4 within 1e-4 for 0..255 inputs (float32 rounding of the "
        "matrix); integer outputs may then differ by 1 in rare pixels.",
    args=(Arg("hue", "float", 0.0, "Hue change in degrees.", tensor=True),
          Arg("saturation", "float", 1.0, "Saturation multiplier.", tensor=True),
          Arg("value", "float", 1.0, "Value (brightness) multiplier.", tensor=True),
          Arg("dtype", "dtype", D.UINT8, "Output type (UINT8 by default, as in DALI, whatever the input type).")),
))


class ColorTwist(_ColorOp):
    op = "color_twist"
    in_types = out_types = (D.UINT8, D.INT16, D.INT32, D.FLOAT, D.FLOAT16)
    coefficient_args = ("brightness", "contrast", "hue", "saturation")

    def coefficients(self, values, in_dtype, out_dtype, xp):
        sep = lambda p: separate_product(p, xp)  # noqa: E731
        b = xp.asarray(values["brightness"], np.float32)
        c = xp.asarray(values["contrast"], np.float32)
        center = _F32(0.5 if np.dtype(in_dtype).kind == "f" else 128.0)
        m = hsv_matrix(values["hue"], values["saturation"], b * c, xp)
        offset = sep(sep(b * (_F32(1) - c)) * center)
        return m, offset

    def transform(self, x, coeffs, xp):
        return _apply_matrix(x, coeffs[0], coeffs[1], xp)


COLOR_TWIST = register(OpSchema(
    name="color_twist", impl=ColorTwist, devices=("cpu", "gpu"),
    doc="hsv(hue, saturation) followed by brightness and contrast around the grey level: "
        "out = brightness * (contrast * M @ in + (1 - contrast) * center), center = 128 for integer inputs and "
        "0.5 for float inputs.\n\n"
        ".. note:: As in DALI 2.4, `image_type` does not change the result (BGR data gets the RGB matrix). "
        "Tolerance against DALI as for fn.hsv.",
    args=(Arg("brightness", "float", 1.0, "Brightness multiplier.", tensor=True),
          Arg("contrast", "float", 1.0, "Contrast multiplier (0 gives uniform grey).", tensor=True),
          Arg("hue", "float", 0.0, "Hue change in degrees.", tensor=True),
          Arg("saturation", "float", 1.0, "Saturation multiplier.", tensor=True),
          Arg("image_type", "image_type", None, "Colour space of input and output; no effect (as in DALI)."),
          Arg("dtype", "dtype", None, "Output type; default: the input type.")),
))
