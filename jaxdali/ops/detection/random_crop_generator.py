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
        if (hw < 1).any():
            raise ValueError(f"fn.{self.op}: image sizes must be >= 1, got {hw[(hw < 1).any(1)][0].tolist()}")
        u = rng.uniform(ctx.sample_keys(self.seed), crop_window_draws(self.num_attempts))
        y, x, h, w = random_crop_windows(hw[:, 0], hw[:, 1], u, self.area, self.ratio, self.num_attempts)
        return [TensorListCPU(np.stack([y, x], 1).astype(np.int32)), TensorListCPU(np.stack([h, w], 1).astype(np.int32))]


RANDOM_CROP_GENERATOR = register(OpSchema(
    name="random_crop_generator", impl=RandomCropGenerator, num_outputs=2,
    doc="Random crop windows (area and aspect-ratio ranges, as fn.decoders.image_random_crop) of images whose "
        "shapes are the input ([H, W, ...] per sample); outputs int32 anchor [y, x] and shape [h, w].",
    args=_CROP_ARGS,
))
