"""``fn.jpeg_compression_distortion``: encodes each RGB image (or frame) as a JPEG of the given quality
and decodes it again, with OpenCV (GIL-free) on the worker pool; equal to DALI 2.4's CPU operator."""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.geometry import image_layout, sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU

__all__ = ["JPEG_COMPRESSION_DISTORTION"]

_OP = "jpeg_compression_distortion"


def _round_trip(rgb: np.ndarray, dst: np.ndarray, quality: int) -> None:
    ok, encoded = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise RuntimeError(f"fn.{_OP}: OpenCV could not encode an image of shape {rgb.shape}")
    cv2.cvtColor(cv2.imdecode(encoded, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB, dst=dst)


class JpegCompressionDistortion(Operator):
    """JPEG round trip of every RGB frame at a per-sample quality."""

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        layout = image_layout(_OP, x.layout(), x.ndim(), ("HWC", "FHWC"))
        if x.np_dtype != np.uint8:
            raise TypeError(f"fn.{_OP}: input must be uint8, got {x.np_dtype.name}")
        shapes = [tuple(s) for s in x.shape()]
        quality = args.per_sample("quality", np.int64)
        for i, shape in enumerate(shapes):
            if shape[-1] != 3:
                raise ValueError(f"fn.{_OP}: expects RGB images (3 channels), {sample_name(x, i)} has {shape[-1]}")
            if not 1 <= quality[i] <= 100:
                raise ValueError(f"fn.{_OP}: argument 'quality' must be in [1, 100], got {quality[i]} for "
                                 f"{sample_name(x, i)}")
        dense = owned_empty((n,) + shapes[0], np.uint8) if n and len(set(shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, np.uint8) for i, s in enumerate(shapes)]
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if samples[i].size:
                    frames = np.ascontiguousarray(samples[i]).reshape((-1,) + shapes[i][-3:])
                    for src, dst in zip(frames, outs[i].reshape((-1,) + shapes[i][-3:])):
                        _round_trip(src, dst, int(quality[i]))

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


JPEG_COMPRESSION_DISTORTION = register(OpSchema(
    name=_OP, impl=JpegCompressionDistortion, devices=("cpu", "gpu"),
    doc="Introduces JPEG compression artifacts: every uint8 RGB image (HWC) or frame (FHWC) is JPEG-encoded "
        "with `quality` and decoded. Equal to DALI 2.4's CPU operator.\n\n"
        ".. note:: With device='gpu' it runs on the host.",
    args=(Arg("quality", "int", 50, "JPEG quality, 1 (worst) to 100 (best).", tensor=True),),
))
