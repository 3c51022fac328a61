"""``fn.segmentation.random_mask_pixel``: a random pixel of each mask, e.g. to centre a crop on an object.

With ``foreground=1`` the pixel is drawn uniformly among those equal to ``value`` (when given) or
above ``threshold``; when there are none, and with ``foreground=0``, among all pixels. The output is
the pixel's int64 coordinates (one per dimension of the mask). The draw comes from the per-sample
counter-based generator (seeds and checkpoints as for every random operator; not DALI's stream).
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["RANDOM_MASK_PIXEL"]


class RandomMaskPixel(Operator):
    """``fn.segmentation.random_mask_pixel``."""

    def run(self, ctx, inputs, args):
        masks = inputs[0].samples()
        n = len(masks)
        u = rng.uniform(ctx.sample_keys(self.seed), 1)[:, 0]
        foreground = args.per_sample("foreground", np.int32)
        threshold = args.per_sample("threshold", np.float64)
        value = args.per_sample("value", np.float64) if args.given("value") else None
        out = []
        for i in range(n):
            mask = np.asarray(masks[i])
            if mask.size == 0:
                raise ValueError(f"fn.segmentation.random_mask_pixel: sample {i}: the mask is empty {mask.shape}")
            flat = mask.reshape(-1)
            candidates = None
            if foreground[i]:
                hits = flat == value[i] if value is not None else flat > threshold[i]
                candidates = np.flatnonzero(hits)
            if candidates is not None and candidates.size:
                index = candidates[min(int(u[i] * candidates.size), candidates.size - 1)]
            else:
                index = min(int(u[i] * flat.size), flat.size - 1)
            out.append(np.array(np.unravel_index(index, mask.shape), np.int64))
        return TensorListCPU(out)


RANDOM_MASK_PIXEL = register(OpSchema(
    name="segmentation.random_mask_pixel", impl=RandomMaskPixel,
    doc="The int64 coordinates of a random pixel of each mask: with ``foreground=1`` one equal to ``value`` "
        "(or above ``threshold``), else (or when there is none) any pixel.",
    args=(Arg("foreground", "int", 0, "Draw among the foreground pixels (1) or all pixels (0).", tensor=True,
              min=0, max=1),
          Arg("threshold", "float", 0.0, "Foreground: pixels above this (when value is not given).", tensor=True),
          Arg("value", "int", None, "Foreground: pixels equal to this.", tensor=True)),
))
