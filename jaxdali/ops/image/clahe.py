"""``fn.clahe``: contrast-limited adaptive histogram equalisation with OpenCV's CLAHE, which gives DALI
2.4's CPU results bit for bit. RGB images are equalised on the L channel of CIE Lab (``luma_only``,
the default) or channel by channel; samples run on the worker pool."""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.geometry import image_layout, sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU

__all__ = ["CLAHE"]

_OP = "clahe"


class Clahe(Operator):
    """CLAHE of uint8 grey (1 channel) or RGB (3 channels) images."""

    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        if a["bins"] != 256:
            raise OpArgumentError(f"fn.{_OP}: argument 'bins' must be 256 (OpenCV's histogram), got {a['bins']}")
        for name in ("tiles_x", "tiles_y"):
            if a[name] < 1:
                raise OpArgumentError(f"fn.{_OP}: argument '{name}' must be >= 1, got {a[name]}")
        if a["clip_limit"] <= 0:
            raise OpArgumentError(f"fn.{_OP}: argument 'clip_limit' must be > 0, got {a['clip_limit']}")
        self._grid = (a["tiles_x"], a["tiles_y"])

    def _equalize(self, src: np.ndarray, dst: np.ndarray) -> None:
        clahe = cv2.createCLAHE(clipLimit=self.args["clip_limit"], tileGridSize=self._grid)  # not thread-safe: one each
        if src.ndim == 2 or src.shape[2] == 1:
            clahe.apply(src.reshape(src.shape[:2]), dst=dst.reshape(dst.shape[:2]))
        elif self.args["luma_only"]:
            lab = cv2.cvtColor(src, cv2.COLOR_RGB2LAB)
            lab[..., 0] = clahe.apply(np.ascontiguousarray(lab[..., 0]))
            cv2.cvtColor(lab, cv2.COLOR_LAB2RGB, dst=dst)
        else:
            cv2.merge([clahe.apply(c) for c in cv2.split(src)], dst=dst)

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        layout = image_layout(_OP, x.layout(), x.ndim(), ("HW", "HWC"))
        if x.np_dtype != np.uint8:
            raise TypeError(f"fn.{_OP}: input must be uint8, got {x.np_dtype.name}")
        shapes = [tuple(s) for s in x.shape()]
        for i, shape in enumerate(shapes):
            if len(shape) == 3 and shape[2] not in (1, 3):
                raise ValueError(f"fn.{_OP}: expects 1 or 3 channels, {sample_name(x, i)} has {shape[2]}")
        dense = owned_empty((n,) + shapes[0], np.uint8) if n and len(set(shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, np.uint8) for i, s in enumerate(shapes)]
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if samples[i].size:
                    self._equalize(np.ascontiguousarray(samples[i]), outs[i])

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


CLAHE = register(OpSchema(
    name=_OP, impl=Clahe, devices=("cpu", "gpu"),
    doc="Contrast-limited adaptive histogram equalisation of uint8 images (HW, HWC with 1 or 3 channels) over a "
        "`tiles_x` x `tiles_y` grid, histograms clipped at `clip_limit` times their mean. RGB images are equalised "
        "on the lightness of CIE Lab (`luma_only`) or per channel. Bit-exact with DALI 2.4's CPU operator "
        "(both are OpenCV's CLAHE).\n\n.. note:: Only 256 bins. With device='gpu' it runs on the host.",
    args=(Arg("tiles_x", "int", REQUIRED, "Tiles across the width."),
          Arg("tiles_y", "int", REQUIRED, "Tiles across the height."),
          Arg("clip_limit", "float", REQUIRED, "Histogram clip limit, relative to the mean bin count."),
          Arg("bins", "int", 256, "Histogram bins (256 only)."),
          Arg("luma_only", "bool", True, "RGB: equalise the lightness only, not each channel.")),
))
