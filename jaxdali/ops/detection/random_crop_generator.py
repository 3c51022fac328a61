"""``fn.random_crop_generator``: the random-resized-crop window of an image shape, as tensors.

The input is each sample's shape (its first two values are H and W, e.g. ``[H, W, C]``); the
outputs are the window's anchor ``[y, x]`` and shape ``[h, w]`` (int32), drawn exactly as
``fn.decoders.image_random_crop`` and ``fn.random_resized_crop`` draw theirs
(``jaxdali.ops.crop_window``), so the window can be applied later with ``fn.slice`` or ``fn.crop``.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.crop_window import check_ranges, crop_window_draws, random_crop_windows
from jaxdali.ops.decoders import _CROP_ARGS
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["RANDOM_CROP_GENERATOR"]


class RandomCropGenerator(Operator):
    """``fn.random_crop_generator``."""

    op = "random_crop_generator"

    def __init__(self, node, build):
        super().__init__(node, build)
        self.area, self.ratio = check_ranges(self.op, self.args["random_area"], self.args["random_aspect_ratio"],
                                             self.args["num_attempts"])
        self.num_attempts = int(self.args["num_attempts"])

    def run(self, ctx, inputs, args):
        dense = inputs[0].dense()
        if dense is not None and dense.ndim == 2 and dense.shape[1] >= 2 and dense.dtype.kind in "iu":
            hw = dense[:, :2].astype(np.int64)
        else:
            shapes = [np.asarray(s) for s in inputs[0].samples()]
            bad = [s for s in shapes if s.ndim != 1 or s.size < 2 or s.dtype.kind not in "iu"]
            if bad:
                raise ValueError(f"fn.{self.op}: each sample must be a 1-D integer shape with at least 2 values "
                                 f"(H, W, ...), got {bad[0].dtype.name} of shape {list(bad[0].shape)}")
            hw = np.array([s[:2] for s in shapes], np.int64).reshape(-1, 2)
        u = rng.uniform(ctx.sample_keys(self.seed), crop_window_draws(self.num_attempts))
        # As DALI: an empty image (a size <= 0) gets the empty window at [0, 0].
        anchor, shape = np.zeros((len(hw), 2), np.int32), np.zeros((len(hw), 2), np.int32)
        drawn = (hw >= 1).all(1)
        if drawn.any():
            y, x, h, w = random_crop_windows(hw[drawn, 0], hw[drawn, 1], u[drawn], self.area, self.ratio,
                                             self.num_attempts)
            anchor[drawn], shape[drawn] = np.stack([y, x], 1), np.stack([h, w], 1)
        return [TensorListCPU(anchor), TensorListCPU(shape)]


RANDOM_CROP_GENERATOR = register(OpSchema(
    name="random_crop_generator", impl=RandomCropGenerator, num_outputs=2,
    doc="Random crop windows (area and aspect-ratio ranges, as fn.decoders.image_random_crop) of images whose "
        "shapes are the input ([H, W, ...] per sample); outputs int32 anchor [y, x] and shape [h, w] (both [0, 0] "
        "for a size <= 0).",
    args=_CROP_ARGS,
))
