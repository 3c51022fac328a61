"""``fn.experimental.remap``: ``output(x, y) = input(mapx(x, y), mapy(x, y))`` for HWC images and sequences.

DALI 2.4 runs it on the GPU only (NPP's remap); this is a host implementation of the same semantics with
``cv2.remap`` on the worker pool. The maps are float32 samples of the image's height and width (HW or
HWC with one channel; FHW/FHWC give one map per frame of a sequence, HW/HWC maps apply to every frame).
With ``pixel_origin="corner"`` (DALI's default) pixel i covers [i, i + 1), so the maps are shifted by -0.5
into OpenCV's convention, where pixel centres are integers ("center"). Points outside the image read 0.
"""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.layouts import allocate_batch, check_type, image_layout, sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, DALIInterpType

__all__ = ["REMAP"]

_OP = "experimental.remap"
_TYPES = (DALIDataType.UINT8, DALIDataType.INT16, DALIDataType.UINT16, DALIDataType.FLOAT)
_INTERP = {DALIInterpType.INTERP_NN: cv2.INTER_NEAREST, DALIInterpType.INTERP_LINEAR: cv2.INTER_LINEAR,
           DALIInterpType.INTERP_CUBIC: cv2.INTER_CUBIC}


class Remap(Operator):
    """One ``cv2.remap`` per frame, constant zero border."""

    def __init__(self, node, build):
        super().__init__(node, build)
        interp = self.args["interp"]
        if interp not in _INTERP:
            raise OpArgumentError(f"fn.{_OP}: argument 'interp' must be INTERP_NN, INTERP_LINEAR or INTERP_CUBIC, "
                                  f"got {interp.name}")
        self._interp = _INTERP[interp]
        self._shift = np.float32(-0.5 if self.args["pixel_origin"] == "corner" else 0.0)

    def _frame_maps(self, name: str, maps: TensorListCPU, i: int, frames: int, size: tuple[int, int],
                    who: str) -> np.ndarray:
        """Sample ``i`` of a map input as float32 (frames, H, W), shifted to OpenCV's pixel origin."""
        m = maps.samples()[i]
        if m.dtype != np.float32:
            raise TypeError(f"fn.{_OP}: input '{name}' must be float32, got {m.dtype.name} for {who}")
        if m.ndim in (3, 4) and m.shape[-1] == 1 and (m.ndim == 4 or m.shape[:2] == size):
            m = m[..., 0]  # HWC / FHWC with one channel
        if m.ndim == 2:
            m = m[None]
        if m.ndim != 3 or m.shape[1:] != size or m.shape[0] not in (1, frames):
            raise ValueError(f"fn.{_OP}: input '{name}' must hold {'a map' if frames == 1 else 'maps'} of the image's "
                             f"height and width {list(size)} (HW or HWC with 1 channel"
                             f"{'' if frames == 1 else f', or {frames} of them: FHW'}), got shape {list(maps.shape()[i])} "
                             f"for {who}")
        return m + self._shift if self._shift else m

    def run(self, ctx, inputs, args):
        x, mapx, mapy = inputs
        layout = image_layout(_OP, x.layout(), x.ndim(), ("HWC", "FHWC"))
        check_type(_OP, "input", x.np_dtype, _TYPES)
        n = len(x)
        for name, maps in (("mapx", mapx), ("mapy", mapy)):
            if len(maps) != n:
                raise ValueError(f"fn.{_OP}: input '{name}' has {len(maps)} samples, but the images have {n}")
        shapes = [tuple(s) for s in x.shape()]
        sequence = layout[0] == "F"
        maps = []
        for i, shape in enumerate(shapes):
            who = sample_name(x.source_info, i)
            if shape[-1] not in (1, 3):
                raise ValueError(f"fn.{_OP}: images must have 1 or 3 channels, got {shape[-1]} for {who}")
            frames = shape[0] if sequence else 1
            size = tuple(shape[-3:-1])
            maps.append((self._frame_maps("mapx", mapx, i, frames, size, who),
                         self._frame_maps("mapy", mapy, i, frames, size, who)))
        out = allocate_batch(shapes, x.np_dtype)
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                src = np.ascontiguousarray(samples[i])
                if not src.size:
                    continue
                frames_in = src if sequence else src[None]
                frames_out = out[i] if sequence else out[i][None]
                mx, my = maps[i]
                for f, (s, d) in enumerate(zip(frames_in, frames_out)):
                    if s.shape[2] == 1:
                        s, d = s[..., 0], d[..., 0]
                    cv2.remap(s, mx[min(f, len(mx) - 1)], my[min(f, len(my) - 1)], self._interp, dst=d,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0, 0))

        ctx.parallel_for(work, n)
        return TensorListCPU(out, layout)


REMAP = register(OpSchema(
    name=_OP, impl=Remap, devices=("cpu", "gpu"), min_inputs=3, max_inputs=3,
    doc="Generic geometric transformation of HWC images (1 or 3 channels; uint8, int16, uint16 or float32) and "
        "FHWC sequences: output(x, y) = input(mapx(x, y), mapy(x, y)), the maps (second and third inputs) being "
        "float32 HW samples of the image's size (FHW: one per frame). Points outside the image read 0. The "
        "output has the input's shape and type.\n\n.. note:: DALI 2.4 runs this operator on the GPU only (NPP); "
        "jaxdali runs it on the host with OpenCV (also for device='gpu') and also accepts device='cpu'. "
        "Nearest neighbour is exact; linear and cubic use OpenCV's 1/32-pixel fixed-point weights, so they "
        "are within a few units of exact interpolation on sharp edges; cubic is OpenCV's kernel (a = -0.75), "
        "NPP's may differ. Checked against NumPy interpolation.",
    args=(Arg("interp", "interp_type", DALIInterpType.INTERP_LINEAR, "INTERP_NN, INTERP_LINEAR or INTERP_CUBIC."),
          Arg("pixel_origin", "str", "corner", "'corner': pixel i covers [i, i + 1); 'center': pixel i is centred "
              "on i (OpenCV's convention).", choices=("corner", "center"))),
))
