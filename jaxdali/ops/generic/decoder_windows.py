"""``fn.decoders.image_crop`` and ``fn.decoders.image_slice``: decode a fixed window of each image.

Both are ``fn.decoders.image`` with a window per sample (only the window is decoded), planned like
``fn.crop`` (``crop*`` arguments) or like ``fn.slice`` (over the image's H and W axes). A window
outside the image is an error, as in DALI.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.decoders import _OUTPUT_ARGS, ImageDecoder
from jaxdali.ops.generic.slicing import SLICE_ARGS, SliceBox
from jaxdali.ops.crop_plan import CROP_ARGS, check_crop_args, crop_anchor, requested_crop
from jaxdali.ops.schema import OpArgumentError, OpSchema, register

__all__ = ["IMAGE_CROP", "IMAGE_SLICE"]


def _check_inside(op: str, i: int, window: tuple[int, int, int, int], h: int, w: int) -> None:
    y, x, wh, ww = window
    if y < 0 or x < 0 or y + wh > h or x + ww > w or wh < 1 or ww < 1:
        raise OpArgumentError(f"fn.{op}: sample {i}: the window rows {y}..{y + wh}, columns {x}..{x + ww} is not "
                              f"inside the {h} x {w} image")


class _WindowDecoder(ImageDecoder):
    """Decodes the window ``window(i, h, w)`` of each image ``i`` (height ``h``, width ``w`` as oriented)."""

    crops = True

    def windows(self, keys, heights, widths, rows, args, inputs):
        out = [self.window(i, int(h), int(w), args, inputs) for i, h, w in zip(rows, heights, widths)]
        for i, window, h, w in zip(rows, out, heights, widths):
            _check_inside(self.op, i, window, int(h), int(w))
        return tuple(np.array(c, np.int64) for c in zip(*out)) if out else (np.zeros(0, np.int64),) * 4

    def window(self, i: int, h: int, w: int, args, inputs: list) -> tuple[int, int, int, int]:
        """The (y, x, h, w) window of image ``i`` (``h`` x ``w`` as oriented) from the batch's ``args`` and
        ``inputs``."""
        raise NotImplementedError


class ImageCropDecoder(_WindowDecoder):
    """The ``crop`` window at ``crop_pos_x``/``crop_pos_y`` (anchors rounded as ``rounding`` says)."""

    def __init__(self, node, build):
        super().__init__(node, build)
        check_crop_args(self.op, node, self.args)

    def window(self, i, h, w, args, inputs):
        _, ch, cw = requested_crop(self.op, args, i)
        ch, cw = ch or h, cw or w
        pos_y, pos_x = (float(np.asarray(args.sample_value(name, i)).reshape(())) for name in ("crop_pos_y",
                                                                                              "crop_pos_x"))
        for name, pos in (("crop_pos_y", pos_y), ("crop_pos_x", pos_x)):
            if not 0 <= pos <= 1:
                raise OpArgumentError(f"fn.{self.op}: {name}={pos} for sample {i} is out of range [0.0, 1.0]")
        rounding = self.args["rounding"]
        return int(crop_anchor(pos_y, h, ch, rounding)), int(crop_anchor(pos_x, w, cw, rounding)), ch, cw


class ImageSliceDecoder(_WindowDecoder):
    """The ``fn.slice`` box over the image's H and W axes (default: anchors and shapes given as x, y)."""

    def __init__(self, node, build):
        super().__init__(node, build)
        self.planner = SliceBox(self.op, node, "error")

    def window(self, i, h, w, args, inputs):
        anchor = inputs[1].samples()[i] if len(inputs) > 1 else None
        size = inputs[2].samples()[i] if len(inputs) > 2 else None
        start, end = self.planner.box((h, w), "HW", args, i, anchor, size)
        return int(start[0]), int(start[1]), int(end[0] - start[0]), int(end[1] - start[1])


_CROP_WINDOW_ARGS = tuple(a for a in CROP_ARGS if a.name not in ("out_of_bounds_policy", "fill_values", "image_type",
                                                                  "crop_d", "crop_pos_z"))
_NO_DEPTH = {"crop_d": "images have no depth axis", "crop_pos_z": "images have no depth axis"}
_CROP_DOC = ("Decodes the `crop` window of each image (as fn.crop places it: `crop_pos_x`/`crop_pos_y`, "
             "`rounding`); only the window is decoded. Other arguments as fn.decoders.image.")
_SLICE_DOC = ("Decodes a box of each image planned as fn.slice does over the image's H and W axes (arguments "
              "`start`/`rel_start`/`end`/`shape`/..., or anchor and shape inputs; default axes: x then y); only "
              "the box is decoded. Other arguments as fn.decoders.image.")

IMAGE_CROP = register(OpSchema(
    name="decoders.image_crop", impl=ImageCropDecoder, devices=("cpu", "mixed"), doc=_CROP_DOC,
    args=_OUTPUT_ARGS + _CROP_WINDOW_ARGS, rejected=_NO_DEPTH))
IMAGE_DECODER_CROP = register(OpSchema(
    name="image_decoder_crop", impl=ImageCropDecoder, devices=("cpu", "mixed"),
    doc="Legacy name of fn.decoders.image_crop. " + _CROP_DOC, args=_OUTPUT_ARGS + _CROP_WINDOW_ARGS,
    rejected=_NO_DEPTH))
IMAGE_SLICE = register(OpSchema(
    name="decoders.image_slice", impl=ImageSliceDecoder, devices=("cpu", "mixed"), min_inputs=1, max_inputs=3,
    doc=_SLICE_DOC, args=_OUTPUT_ARGS + SLICE_ARGS))
IMAGE_DECODER_SLICE = register(OpSchema(
    name="image_decoder_slice", impl=ImageSliceDecoder, devices=("cpu", "mixed"), min_inputs=1, max_inputs=3,
    doc="Legacy name of fn.decoders.image_slice. " + _SLICE_DOC, args=_OUTPUT_ARGS + SLICE_ARGS))
