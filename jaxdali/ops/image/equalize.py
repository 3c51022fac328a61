"""``fn.equalize``: histogram equalisation of uint8 images and sequences, each channel on its own.

OpenCV's ``equalizeHist`` (GIL-free) on every channel plane of every frame, on the worker pool; its
results equal DALI 2.4's bit for bit.
"""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.image.spatial import planes, spatial_layout
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU

__all__ = ["EQUALIZE", "EXPERIMENTAL_EQUALIZE"]

_OP = "equalize"


def _equalize_plane(src: np.ndarray, dst: np.ndarray) -> None:
    """One (H, W) or (H, W, C) plane: each channel separately."""
    if src.ndim == 2:
        cv2.equalizeHist(src, dst=dst)
        return
    channels = [cv2.equalizeHist(c) for c in cv2.split(src)]
    cv2.merge(channels, dst=dst)


class Equalize(Operator):
    """Equalises each channel of each frame of uint8 samples."""

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        op = self.node.schema.name  # equalize or experimental.equalize
        layout = spatial_layout(op, x.layout(), x.ndim())
        if x.np_dtype != np.uint8:
            raise TypeError(f"fn.{op}: input must be uint8, got {x.np_dtype.name}")
        shapes = [tuple(s) for s in x.shape()]
        dense = owned_empty((n,) + shapes[0], np.uint8) if n and len(set(shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, np.uint8) for i, s in enumerate(shapes)]
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if samples[i].size:
                    src = np.ascontiguousarray(samples[i])
                    for s, d in zip(planes(src, layout), planes(outs[i], layout)):
                        _equalize_plane(s, d)

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


_DOC = ("Histogram equalisation of uint8 images (HW, HWC, CHW) and sequences (F...): every channel of every "
        "frame is equalised on its own. Equal to DALI 2.4.\n\n.. note:: With device='gpu' it runs on the host.")
EQUALIZE = register(OpSchema(name=_OP, impl=Equalize, devices=("cpu", "gpu"), doc=_DOC))
EXPERIMENTAL_EQUALIZE = register(OpSchema(name="experimental.equalize", impl=Equalize, devices=("cpu", "gpu"),
                                          doc="The experimental name of fn.equalize. " + _DOC))
