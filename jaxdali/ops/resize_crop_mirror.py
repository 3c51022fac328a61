"""``fn.resize_crop_mirror``, its legacy alias ``fn.fast_resize_crop_mirror`` and ``fn.experimental.resize``.

``resize_crop_mirror`` gives what ``resize`` followed by ``crop`` and ``flip`` would, in one
resampling pass: the crop window is placed in the resized image (as ``fn.crop`` places it, with
``crop_pos_*`` and ``rounding``), carried back through the resize to a source window, and that
window is resampled straight to the crop size; a mirrored axis reads its window backwards. A window
that leaves the resized image repeats the edge pixels (there is no padding). Because the source
window is resampled on its own, values may differ by one rounding step from a full resize cut
afterwards; DALI does the same. Nearest-neighbour sampling may pick the other pixel where a
sample position falls exactly between two (the float rounding of the window differs from DALI's).

``experimental.resize`` is DALI's GPU resize under its experimental name: the same arguments and
the same results as ``fn.resize``.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.crop_plan import CROP_ARGS, check_crop_args, crop_anchor, crop_positions, requested_crops
from jaxdali.ops.resize import RESIZE, Resize, resample_filters, resample_batch
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["RESIZE_CROP_MIRROR", "FAST_RESIZE_CROP_MIRROR", "EXPERIMENTAL_RESIZE"]

#: mirror bits, by spatial axis letter.
_MIRROR_BITS = {"W": 1, "H": 2, "D": 4}


class ResizeCropMirror(Resize):
    """``fn.resize_crop_mirror``: resize arithmetic, then a crop window and flips folded into the source window."""

    #: The output is the crop, not the resize: the window protocol of ``fn.resize`` does not apply.
    run_windowed = None

    def __init__(self, node, build):
        super().__init__(node, build)
        check_crop_args(self.op, node, self.args)

    def output_shapes(self, inputs, args):
        return None

    def run(self, ctx, inputs, args):
        return self._resize_crop(ctx, inputs[0], args, None)

    def run_fed(self, ctx, source, args, windows):
        """``run`` of the samples of ``source``, each resampled as soon as it is computed (only the part of
        it the source window reads, where the source computes parts)."""
        return self._resize_crop(ctx, source.batch, args, source)

    def _resize_crop(self, ctx, images, args, source):
        n = len(images)
        if n == 0:
            return images
        images, layout, out_size, lo, hi, dtype, _ = self._geometry([images], args)
        axes_letters = [layout.layout[a] for a in layout.axes]
        pos_zyx = crop_positions(self.op, args, n)
        requested = requested_crops(self.op, args, n)  # -1: the axis is not cropped
        crop_size = out_size.copy()
        anchor = np.zeros_like(out_size)
        for k, letter in enumerate(axes_letters):
            slot = "DHW".index(letter)
            crop_size[:, k] = np.where(requested[:, slot] < 0, out_size[:, k], requested[:, slot])
            anchor[:, k] = crop_anchor(pos_zyx[:, slot], out_size[:, k], crop_size[:, k], args["rounding"])
        step = (hi - lo) / np.maximum(out_size, 1)
        new_lo, new_hi = lo + anchor * step, lo + (anchor + crop_size) * step
        mirror = args.per_sample("mirror", np.int64)
        for k, letter in enumerate(axes_letters):  # a mirrored axis reads its window backwards
            flip = (mirror & _MIRROR_BITS[letter]) != 0
            new_lo[:, k], new_hi[:, k] = np.where(flip, new_hi[:, k], new_lo[:, k]), \
                np.where(flip, new_lo[:, k], new_hi[:, k])
        min_f, mag_f = resample_filters(self.op, args, n)
        return resample_batch(ctx, self.op, images, layout, crop_size, new_lo, new_hi, min_f, mag_f,
                              bool(self.args["antialias"]), dtype, source=source)


_CROP_ARG_NAMES = ("crop", "crop_h", "crop_w", "crop_d", "crop_pos_x", "crop_pos_y", "crop_pos_z", "rounding")
_RESIZE_ARGS = tuple(a for a in RESIZE.args if a.name not in ("save_attrs", "image_type", "antialias"))


def _crop_mirror_args(antialias: bool) -> tuple[Arg, ...]:
    return tuple(a for a in CROP_ARGS if a.name in _CROP_ARG_NAMES) + _RESIZE_ARGS + (
        Arg("antialias", "bool", antialias,
            "When shrinking, widen the filter by the scale factor (area-style antialiasing); NN never does."),
        Arg("mirror", "int", 0, "Flip mask: 1 horizontal, 2 vertical, 4 depthwise, or a sum of them.",
            tensor=True, min=0, max=7),
    )


_DOC = """Resizes, crops and mirrors in one pass: the result of ``resize``, then ``crop`` and ``flip``.

The size arguments are ``fn.resize``'s (exactly one way of giving the size). The crop window
(``crop`` or ``crop_h``/``crop_w``/``crop_d``, at ``crop_pos_*`` with ``rounding``, as in
``fn.crop``) is placed in the resized image; no crop keeps the whole resized extent. ``mirror``
flips the window: bit 1 horizontally, 2 vertically, 4 along depth. Only that window of the source is
resampled, straight to the crop size, so a window larger than the resized image repeats the edge
pixels (no padding). Frames of a sequence share their sample's window; a third crop value applies
to D only (never to frames). ``device="gpu"`` runs the host implementation.

.. note:: The uint8 output is within +-1 of DALI 2.4's CPU output (the resize filters' rounding, see
   ``fn.resize``)."""

RESIZE_CROP_MIRROR = register(OpSchema(
    name="resize_crop_mirror", impl=ResizeCropMirror, devices=("cpu", "gpu"), doc=_DOC,
    args=_crop_mirror_args(antialias=True),
))

FAST_RESIZE_CROP_MIRROR = register(OpSchema(
    name="fast_resize_crop_mirror", impl=ResizeCropMirror, devices=("cpu", "gpu"),
    doc="Deprecated in DALI: ``resize_crop_mirror`` with antialiasing off by default (``antialias=False``).\n\n"
        + _DOC,
    args=_crop_mirror_args(antialias=False),
))

EXPERIMENTAL_RESIZE = register(OpSchema(
    name="experimental.resize", impl=Resize, devices=("cpu", "gpu"),
    num_outputs=RESIZE.num_outputs,
    doc="``fn.resize`` under DALI's experimental name (DALI runs it on the GPU only; here both placements run "
        "the host implementation and give ``fn.resize``'s values).\n\n" + RESIZE.doc,
    args=RESIZE.args,
))
