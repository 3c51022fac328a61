"""``fn.resize`` and ``fn.random_resized_crop``: the operators.

They turn their arguments into output extents and source windows (``resample_plan.resize_geometry``
for resize, a random window for random_resized_crop), plan every sample's passes
(``resample_plan.plan_resample``) and run the plans on the worker pool (``resample.resample_sample``;
the kernel's ``window_job`` when the consumer reads only a window of each sample, its ``part_job`` when
a decoder computes only the part of each image the resize reads). See
``jaxdali.ops.resample_plan`` for the pixel-centre convention and the filters.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.crop_window import check_ranges, crop_window_draws, random_crop_windows
from jaxdali.ops.layouts import (SpatialLayout, allocate_batch, check_resampled_dtype_arg, resampled_dtype,
                                 sample_name)
from jaxdali.ops.operator import Operator
from jaxdali.ops.resample import part_job, resample_sample, resample_window, window_job
from jaxdali.ops.resample_plan import MODES, BoundedCache, plan_resample, resize_geometry
from jaxdali.ops.sample_source import SampleSource
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, REQUIRED, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIInterpType

__all__ = ["RESIZE", "RANDOM_RESIZED_CROP", "INTERP_ARGS", "per_axis_arg", "resample_filters", "resample_batch"]

# -- arguments ---------------------------------------------------------------------------------------------

def per_axis_arg(op: str, args, name: str, n: int, d: int) -> np.ndarray:
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


def resample_filters(op: str, args, n: int) -> tuple[np.ndarray, np.ndarray]:
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


#: The window jobs of recent (input shape, resize geometry, window) combinations: the same photo sizes
#: come back batch after batch (``resample_plan._TapsCache``).
_WINDOW_JOBS = BoundedCache(1024)


def resample_batch(ctx, op: str, images: TensorListCPU, layout: SpatialLayout, out_size: np.ndarray,
                   lo: np.ndarray, hi: np.ndarray, min_f: np.ndarray, mag_f: np.ndarray, antialias: bool,
                   dtype: np.dtype, windows: Sequence | None = None,
                   source: SampleSource | None = None) -> TensorListCPU:
    """Resamples every sample on the worker pool, into one dense array where the shapes agree.

    ``windows``: per sample ``(anchor, shape)`` over all axes of the output sample: only that part of
    the output is computed and returned (see ``Resize.run_windowed``). ``source``: the samples are
    computed by it as the workers ask for them (``images`` is then its stand-in batch).
    """
    samples = images.samples()
    shapes = np.array([s.shape for s in samples], np.int64).reshape(len(samples), -1)
    out_shapes = shapes.copy()
    out_shapes[:, list(layout.axes)] = out_size
    kept = out_shapes if windows is None else np.array([w[1] for w in windows], np.int64).reshape(len(samples), -1)
    out = allocate_batch(kept, dtype)
    source_info = images.source_info
    # Plans (light, vectorised Python work) are made here, so the workers only run the heavy
    # NumPy/OpenCV/kernel calls, which release the GIL.
    plans = plan_resample(shapes, images.np_dtype, layout.axes, out_size, lo, hi, min_f, mag_f, antialias)
    # Where only a window of each output is kept, the kernel's job for it, planned once per geometry and
    # window (kept between batches: ``_WINDOW_JOBS``); a source then computes only the part of each input
    # the job reads (a decoder decodes just that region).
    jobs: list = [None] * len(samples)
    if windows is None and source is not None and source.takes_parts:
        jobs = _part_jobs(shapes, images.np_dtype, layout, plans, np.dtype(dtype), out_shapes, lo, hi)
    elif windows is not None:
        parts_wanted = source is not None and source.takes_parts
        batch_key = (images.np_dtype.str, tuple(layout.axes), np.dtype(dtype).str, parts_wanted)
        for i, shape in enumerate(shapes.tolist()):
            key = batch_key + (tuple(shape), plans[i].geometry, plans[i].cv2_linear,
                               tuple(int(v) for v in windows[i][0]), tuple(int(v) for v in windows[i][1]))
            job = _WINDOW_JOBS.get(key, _WINDOW_JOBS)
            if job is _WINDOW_JOBS:
                job = window_job(shapes[i], images.np_dtype, layout.axes, plans[i], np.dtype(dtype), windows[i],
                                 out_shapes[i], parts_wanted)
                _WINDOW_JOBS.put(key, job)
            jobs[i] = job
    parts = [job.part if job is not None else None for job in jobs]

    def one(i: int, sample: np.ndarray) -> None:
        try:
            if source is not None:
                source.check(i, sample, op, parts[i])
            if jobs[i] is not None:
                jobs[i].run(sample, out[i])
            elif windows is None:
                resample_sample(sample, layout.axes, plans[i], out[i])
            else:
                resample_window(sample, layout.axes, plans[i], out[i], windows[i], out_shapes[i])
        except Exception as e:
            e.add_note(f"fn.{op}: {sample_name(source_info, i)}, shape {tuple(shapes[i])} -> "
                       f"{tuple(out_shapes[i])}")
            raise

    def chunk(start: int, stop: int) -> None:
        if source is not None:
            source.feed(start, stop, one, parts)
            return
        for i in range(start, stop):
            one(i, samples[i])

    ctx.parallel_for(chunk, len(samples))
    return TensorListCPU(out, layout.layout)


def _part_jobs(shapes: np.ndarray, dtype: np.dtype, layout: SpatialLayout, plans: list, out_dtype: np.dtype,
               out_shapes: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list:
    """Per sample, ``part_job``: its whole output from only the part of the input it reads, where its source
    window leaves out part of the input (a crop, a region of interest); else None."""
    in_size = shapes[:, list(layout.axes)]
    inside = ((np.minimum(lo, hi) > 0) | (np.maximum(lo, hi) < in_size)).any(axis=1)
    jobs: list = [None] * len(plans)
    for i in np.flatnonzero(inside).tolist():
        jobs[i] = part_job(shapes[i], dtype, layout.axes, plans[i], out_dtype, out_shapes[i])
    return jobs


# -- fn.resize ---------------------------------------------------------------------------------------------

_SIZE_METHODS = (("resize_x", "resize_y", "resize_z"), ("size",), ("resize_shorter",), ("resize_longer",))


class Resize(Operator):
    """``fn.resize``: the host implementation (``device="gpu"`` runs the same code)."""

    row_wise = True
    def __init__(self, node, build):
        super().__init__(node, build)
        self.op = node.schema.name
        given = {name for name in node.schema.arg_map if name in node.arg_inputs or node.args.get(name) is not None}
        used = [group for group in _SIZE_METHODS if given & set(group)]
        if len(used) != 1:
            got = ", ".join(sorted(given & {a for g in _SIZE_METHODS for a in g})) or "none"
            raise OpArgumentError(
                f"fn.{self.op}: exactly one way of specifying the size must be used: resize_x/resize_y/resize_z, "
                f"size, resize_shorter or resize_longer; got {got}")
        self.method = used[0][0]
        exclusive = sorted(given & {"resize_shorter", "resize_longer", "mode"})
        if len(exclusive) > 1:
            raise OpArgumentError(
                f"fn.{self.op}: arguments 'resize_shorter', 'resize_longer' and 'mode' are mutually exclusive; "
                f"got {exclusive}")
        if ("roi_start" in given) != ("roi_end" in given):
            raise OpArgumentError(f"fn.{self.op}: arguments 'roi_start' and 'roi_end' must be given together")
        check_resampled_dtype_arg(self.op, self.args.get("dtype"))
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
            return per_axis_arg(self.op, args, "size", n, d)
        return np.repeat(args.per_sample(self.method, np.float64)[:, None], d, axis=1)

    def _geometry(self, inputs, args):
        """(images, layout, out_size, lo, hi, dtype, in_size) of this batch (DALI's size arithmetic)."""
        images = inputs[0]
        n = len(images)
        layout = SpatialLayout.parse(self.op, images.layout(), images.ndim())
        d = len(layout.axes)
        dtype = resampled_dtype(self.op, images.np_dtype, self.args.get("dtype"))
        shapes = np.array(images.shape(), np.int64).reshape(n, -1)
        in_size = shapes[:, list(layout.axes)]
        requested = self._requested(args, n, layout)
        max_size = None
        if self.args.get("max_size") is not None:
            max_size = per_axis_arg(self.op, args, "max_size", 1, d)[0]  # a constant
        roi_start = roi_end = None
        if args.given("roi_start"):
            roi_start = per_axis_arg(self.op, args, "roi_start", n, d)
            roi_end = per_axis_arg(self.op, args, "roi_end", n, d)
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
        return [tuple(row) for row in shapes.tolist()], layout.layout

    def run_windowed(self, ctx, inputs, args, windows):
        """``run``, returning only ``windows[i] = (anchor, shape)`` of each output sample (all of it when
        None); the values are those of the full output."""
        return self._resize(ctx, inputs[0], args, windows, None)

    def run_fed(self, ctx, source: SampleSource, args, windows):
        """``run_windowed`` of the samples of ``source``, each resized as soon as it is computed."""
        return self._resize(ctx, source.batch, args, windows, source)

    def _resize(self, ctx, images: TensorListCPU, args, windows, source: SampleSource | None):
        n = len(images)
        if n == 0:
            return [images, TensorListCPU([])] if self.args.get("save_attrs") else images
        images, layout, out_size, lo, hi, dtype, in_size = self._geometry([images], args)
        min_f, mag_f = resample_filters(self.op, args, n)
        result = resample_batch(ctx, self.op, images, layout, out_size, lo, hi, min_f, mag_f,
                                bool(self.args["antialias"]), dtype, windows, source)
        if self.args.get("save_attrs"):
            return [result, TensorListCPU(in_size.astype(np.int32))]
        return result


INTERP_ARGS = (
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
    ) + INTERP_ARGS,
))


# -- fn.random_resized_crop ------------------------------------------------------------------------------------


class RandomResizedCrop(Operator):
    """``fn.random_resized_crop``: a random window (the one ``fn.decoders.image_random_crop`` draws),
    resized to ``size``. Frames of a sequence share their sample's window."""

    #: Stream of ``rng.uniform`` used for the window draws (the decoder's, so equal seeds give equal windows).
    STREAM = 0
    row_wise = True

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
        check_resampled_dtype_arg(op, self.args.get("dtype"))

    def windows(self, ctx, heights: np.ndarray, widths: np.ndarray):
        """Per-sample (y, x, h, w) windows for this iteration."""
        u = rng.uniform(ctx.sample_keys(self.seed), crop_window_draws(self.num_attempts), self.STREAM)
        return random_crop_windows(heights, widths, u, self.area, self.ratio, self.num_attempts)

    def run(self, ctx, inputs, args):
        return self._crop_resize(ctx, inputs[0], args, None)

    def run_fed(self, ctx, source: SampleSource, args, windows):
        """``run`` of the samples of ``source``, each resampled as soon as it is computed (only the part of
        it the window reads, where the source computes parts: a decoder decodes just that region)."""
        return self._crop_resize(ctx, source.batch, args, source)

    def _crop_resize(self, ctx, images: TensorListCPU, args, source: SampleSource | None):
        op = "random_resized_crop"
        n = len(images)
        if n == 0:
            return images
        layout = SpatialLayout.parse(op, images.layout(), images.ndim(), allow_depth=False)
        dtype = resampled_dtype(op, images.np_dtype, self.args.get("dtype"))
        in_hw = np.array(images.shape(), np.int64).reshape(n, -1)[:, list(layout.axes)]
        if in_hw.min() < 1:
            bad = int(np.argmin(in_hw.min(axis=1)))
            raise ValueError(f"fn.{op}: {sample_name(images.source_info, bad)} is empty (shape {tuple(images.shape()[bad])})")
        y, x, h, w = self.windows(ctx, in_hw[:, 0], in_hw[:, 1])
        lo = np.stack([y, x], axis=1).astype(np.float64)
        hi = lo + np.stack([h, w], axis=1)
        out_size = np.broadcast_to(self.size, (n, 2))
        min_f, mag_f = resample_filters(op, args, n)
        return resample_batch(ctx, op, images, layout, out_size, lo, hi, min_f, mag_f,
                              bool(self.args["antialias"]), dtype, source=source)


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
    ) + INTERP_ARGS,
))
