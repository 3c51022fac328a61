"""Geometry operators: ``fn.crop``, ``fn.flip``, ``fn.transpose``, ``fn.reshape``.

The window arithmetic lives in ``jaxdali.ops.crop_plan`` and the host/device building blocks in
``jaxdali.ops.image_kernels``. Host implementations write whole samples with NumPy (views,
``np.copyto``, ufuncs), which release the GIL, from ``ctx.parallel_for`` chunks into a preallocated
batch whenever the output shape is the same for every sample. Device implementations (``run_jax``)
use static slices where the window is constant and ``lax.dynamic_slice`` where per-sample positions
move it.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np

from jaxdali.core.buffers import owned_empty
from jaxdali.ops.convert import convert, round_half_away
from jaxdali.ops.crop_plan import (CROP_ARGS, CROP_LAYOUTS, CROP_SIZE_ARGS, check_crop_args, crop_positions,
                                   crop_windows, device_anchors, given_arg, static_sizes, windows_inside)
from jaxdali.ops.image_kernels import copy_window, device_flip, device_window, flipped
from jaxdali.ops.layouts import (LayoutAware, allocate_batch, channel_shape, dtype_argument, image_layout,
                                 per_channel)
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType

__all__ = ["FLIP_LAYOUTS", "CROP", "FLIP", "TRANSPOSE", "RESHAPE"]

#: Layouts accepted by flip (DALI's list).
FLIP_LAYOUTS = ("FDHWC", "FHWC", "DHWC", "HWC", "FCDHW", "FCHW", "CDHW", "CHW")

# -- crop ------------------------------------------------------------------------------------------

_CROP_OUTPUT_TYPES = (DALIDataType.UINT8, DALIDataType.FLOAT16, DALIDataType.FLOAT)

class Crop(LayoutAware, Operator):
    """Cuts a window out of every sample (the same window for all frames of a sequence)."""

    #: May run in the device stage of a device-output pipeline (``run_jax`` equals ``run`` bit for bit).
    device_offload = True
    row_wise = True

    def __init__(self, node, build):
        super().__init__(node, build)
        check_crop_args("crop", node, self.args)
        self._dtype = dtype_argument("crop", self.args, _CROP_OUTPUT_TYPES)

    def check_device_args(self, args) -> None:
        crop_positions("crop", args, args.batch_size)

    def _plan(self, x: TensorListCPU, args) -> tuple[str, list[tuple[tuple, tuple]]]:
        layout = image_layout("crop", x.layout(), x.ndim(), CROP_LAYOUTS)
        return layout, crop_windows("crop", args, x.shape(), layout, x.source_info)

    def input_windows(self, shapes, layout: str, args):
        """The window of each input sample this operator reads, when they all lie inside their samples (a
        resize before it then computes just them; see ``crop_plan.windows_inside``), else None."""
        if not len(shapes):
            return None
        try:
            layout = image_layout("crop", layout, len(shapes[0]), CROP_LAYOUTS)
        except (ValueError, KeyError, TypeError):  # the run reports it
            return None
        return windows_inside("crop", args, shapes, layout)

    def run(self, ctx, inputs, args):
        (x,) = inputs
        layout, windows = self._plan(x, args)
        dtype = self._dtype or x.np_dtype
        fill = None
        if args["out_of_bounds_policy"] == "pad" and len(x):
            channels = x.shape()[0][layout.index("C")]
            fill = convert(per_channel("crop", "fill_values", args["fill_values"], channels, "the output"), dtype, np,
                           "truncate")
        samples = x.samples()
        out = allocate_batch([w[1] for w in windows], dtype)

        def store(dst: np.ndarray, src: np.ndarray) -> None:
            np.copyto(dst, convert(src, dtype, np, "truncate"), casting="unsafe")

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                copy_window(samples[i], out[i], windows[i][0], fill, layout, store)

        ctx.parallel_for(work, len(x))
        return TensorListCPU(out, x.layout())

    @property
    def run_jax(self):
        # Per-sample window sizes give samples of different shapes: host only.
        return None if any(n in self.node.arg_inputs for n in CROP_SIZE_ARGS) else self._run_jax

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
            fill = convert(per_channel("crop", "fill_values", args["fill_values"], shape[layout.index("C")],
                                       "the output"), dtype, np, "truncate")
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
    row_wise = True

    def run(self, ctx, inputs, args):
        (x,) = inputs
        layout = image_layout("flip", x.layout(), x.ndim(), FLIP_LAYOUTS)
        flags = [(layout.index(ch), args.per_sample(name, np.int32)) for name, ch in _FLIP_AXES if ch in layout]
        samples = x.samples()
        out = allocate_batch(x.shape(), x.np_dtype)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                np.copyto(out[i], flipped(samples[i], [axis for axis, flag in flags if flag[i]]))

        ctx.parallel_for(work, len(x))
        return TensorListCPU(out, x.layout())

    def run_jax(self, inputs, args):
        import jax.numpy as jnp

        (x,) = inputs
        layout = image_layout("flip", self._device_layout, x.ndim - 1, FLIP_LAYOUTS)
        for name, ch in _FLIP_AXES:
            if ch in layout:
                flag = args.per_sample(name, jnp.int32) if args.is_per_sample(name) else args[name]
                x = device_flip(x, layout.index(ch) + 1, flag)
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


#: Element types ``cv2.split`` copies as they are, and its limit on channels.
_SPLIT_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.float32, np.float64))
_SPLIT_MAX_CHANNELS = 512


def _hwc_to_chw(sample: np.ndarray, dst: np.ndarray) -> bool:
    """Copies an HWC ``sample`` into the CHW ``dst`` plane by plane with ``cv2.split`` (GIL-free, 3x faster
    than NumPy's copy of the transposed view, which moves one element at a time); False, copying nothing,
    where OpenCV cannot take the sample."""
    if sample.dtype not in _SPLIT_TYPES or not 1 < sample.shape[2] <= _SPLIT_MAX_CHANNELS or sample.size == 0:
        return False
    planes = list(dst)
    for plane, got in zip(planes, cv2.split(np.ascontiguousarray(sample), planes)):
        if got is not plane:  # OpenCV wrote elsewhere (it reuses outputs of the right type and size)
            np.copyto(plane, got)
    return True


class Transpose(LayoutAware, Operator):
    """Permutes the axes of each sample: output axis k is input axis ``perm[k]``."""

    #: May run in the device stage of a device-output pipeline (``run_jax`` equals ``run`` bit for bit).
    device_offload = True
    row_wise = True

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
            dense = owned_empty((len(x),) + tuple(shape[p] for p in perm), x.np_dtype)
        outs: list[Any] = [None] * len(x)
        planar = perm == (2, 0, 1)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if dense is not None:
                    if not (planar and _hwc_to_chw(samples[i], dense[i])):
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
        sources = [len(node.inputs) == 2, given_arg(node, self.args, "shape"), given_arg(node, self.args, "rel_shape")]
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
