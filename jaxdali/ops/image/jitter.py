"""``fn.jitter``: every pixel is replaced by a random pixel of its neighbourhood.

DALI 2.4 runs it on the GPU only; this is a host implementation of the same semantics. Output pixel
(x, y) copies all channels of input pixel (clamp(x + dx), clamp(y + dy)), where dx and dy are drawn
independently and uniformly from the ``nDegree`` integers ``-(nDegree // 2) .. nDegree - 1 - nDegree // 2``
and the coordinates are clamped into the image (so ``fill_value`` is never read, and the interpolation
type makes no difference: every source point is a whole pixel). Samples whose ``mask`` is 0 pass
unchanged.

The offsets come from a NumPy PCG64 generator created for each sample from that sample's key
(``RunContext.sample_keys``): a pure function of (seed, iteration, sample), so a pipeline restored from
a checkpoint draws the same offsets. DALI's random stream is not reproduced.
"""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.layouts import allocate_batch, check_type, image_layout
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, DALIInterpType

__all__ = ["JITTER", "jitter_maps"]

_OP = "jitter"
_TYPES = (DALIDataType.UINT8, DALIDataType.FLOAT)  # DALI 2.4's
_CV_CHANNELS = 4  # cv2.remap's limit; wider pixels are gathered with NumPy
_MAX_SIDE = np.iinfo(np.int16).max  # the source coordinates are held as int16 (OpenCV's integer maps)


def jitter_maps(gen: np.random.Generator, height: int, width: int, degree: int) -> np.ndarray:
    """The source (column, row) of every output pixel, int16 (H, W, 2): position + offset, clamped to the image."""
    # position + offset fits int16 for all but huge degrees; the clamped result always does
    work = np.int16 if max(height, width) + degree <= _MAX_SIDE else np.int32
    maps = gen.integers(0, degree, size=(height, width, 2), dtype=work)
    maps -= degree // 2
    maps[..., 0] += np.arange(width, dtype=work)
    maps[..., 1] += np.arange(height, dtype=work)[:, None]
    np.clip(maps[..., 0], 0, width - 1, out=maps[..., 0])
    np.clip(maps[..., 1], 0, height - 1, out=maps[..., 1])
    return maps.astype(np.int16, copy=False)


class Jitter(Operator):
    """Per-sample offsets from the sample's key; one ``cv2.remap`` with integer maps per sample."""

    def __init__(self, node, build):
        super().__init__(node, build)
        interp = self.args["interp_type"]
        if interp not in (DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR):
            raise OpArgumentError(f"fn.{_OP}: argument 'interp_type' must be INTERP_NN or INTERP_LINEAR, "
                                  f"got {interp.name}")
        self._degree = self.args["nDegree"]

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        layout = image_layout(_OP, x.layout(), x.ndim(), ("HWC",))
        check_type(_OP, "input", x.np_dtype, _TYPES)
        if any(max(s[:2]) > _MAX_SIDE for s in x.shape()):
            raise ValueError(f"fn.{_OP}: images may be at most {_MAX_SIDE} pixels wide and high")
        mask = args.per_sample("mask", np.int64)
        keys = ctx.sample_keys(self.seed)
        out = allocate_batch(x.shape(), x.np_dtype)
        samples = x.samples()
        degree = self._degree

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                src = np.ascontiguousarray(samples[i])
                if not mask[i] or not src.size or degree == 1:
                    np.copyto(out[i], src)
                    continue
                h, w, c = src.shape
                maps = jitter_maps(np.random.Generator(np.random.PCG64(int(keys[i]))), h, w, degree)
                if c <= _CV_CHANNELS:
                    s, d = (src[..., 0], out[i][..., 0]) if c == 1 else (src, out[i])
                    cv2.remap(s, maps, None, cv2.INTER_NEAREST, dst=d)
                else:
                    rows = maps[..., 1].astype(np.intp) * w + maps[..., 0]
                    np.take(src.reshape(-1, c), rows.reshape(-1), axis=0, out=out[i].reshape(-1, c))

        ctx.parallel_for(work, n)
        return TensorListCPU(out, layout)


JITTER = register(OpSchema(
    name=_OP, impl=Jitter, devices=("cpu", "gpu"),
    doc="Random jitter of HWC images (uint8 or float32): each output pixel copies the input pixel at a random "
        "offset of -(nDegree // 2) .. nDegree - 1 - nDegree // 2 along x and y (drawn per pixel), clamped into "
        "the image.\n\n.. note:: DALI 2.4 runs this operator on the GPU only; jaxdali runs it on the host (also "
        "for device='gpu') and also accepts device='cpu'. Same distribution as DALI, different random stream "
        "(per-sample PCG64 seeded from the pipeline seed, iteration and sample: checkpoints resume it exactly). "
        "`fill_value` and `interp_type` have no effect, as in DALI: the source point is always a pixel of the "
        "image.",
    args=(Arg("nDegree", "int", 2, "Each pixel moves by a random whole number of pixels in "
              "[-nDegree // 2, nDegree - 1 - nDegree // 2] along x and y.", min=1),
          Arg("fill_value", "float", 0.0, "Padding value (never used: offsets are clamped into the image)."),
          Arg("interp_type", "interp_type", DALIInterpType.INTERP_NN, "INTERP_NN or INTERP_LINEAR (no effect: "
              "the offsets are whole pixels)."),
          Arg("mask", "int", 1, "0: leave the sample unchanged.", tensor=True)),
))
