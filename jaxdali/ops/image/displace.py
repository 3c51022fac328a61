"""``fn.water`` and ``fn.sphere``: per-pixel displacement of HWC images (``cv2.remap`` on the worker pool).

Each operator defines, for output pixel (x, y), the input point (mx, my) it samples, in DALI's pixel
coordinates (pixel i covers [i, i + 1)). Nearest neighbour takes pixel floor(m) (exact against
DALI 2.4); linear interpolates around m - 0.5 (OpenCV's fixed-point weights: within 1 of DALI for
uint8). Points outside the image take ``fill_value``. Samples whose ``mask`` is 0 pass unchanged.
"""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.layouts import image_layout
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIInterpType

__all__ = ["WATER", "SPHERE", "water_maps", "sphere_maps"]

_F32 = np.float32
_INPUT_TYPES = (np.dtype(np.uint8), np.dtype(np.float32))  # DALI 2.4's


def water_maps(h: int, w: int, a) -> tuple[np.ndarray, np.ndarray]:
    """mx = x + ampl_x sin(freq_x y + phase_x), my = y + ampl_y cos(freq_y x + phase_y), float32."""
    y, x = np.arange(h, dtype=_F32), np.arange(w, dtype=_F32)
    dx = _F32(a["ampl_x"]) * np.sin(_F32(a["freq_x"]) * y + _F32(a["phase_x"]))
    dy = _F32(a["ampl_y"]) * np.cos(_F32(a["freq_y"]) * x + _F32(a["phase_y"]))
    return x[None, :] + dx[:, None], y[:, None] + dy[None, :]


def sphere_maps(h: int, w: int, a) -> tuple[np.ndarray, np.ndarray]:
    """The sphere lens: a pixel centre's offset d from the image centre (w / 2, h / 2) becomes d * |d| / r,
    r = max(w, h) / 2, float32."""
    cx, cy = _F32(w / 2), _F32(h / 2)
    y = np.arange(h, dtype=_F32)[:, None] + _F32(0.5) - cy
    x = np.arange(w, dtype=_F32)[None, :] + _F32(0.5) - cx
    scale = np.sqrt(x * x + y * y) / _F32(max(cx, cy))
    return x * scale + cx, y * scale + cy


class _Displace(Operator):
    """Shared frame: maps per sample shape, remap with the fill value, mask per sample."""

    op = ""
    maps = staticmethod(water_maps)

    def __init__(self, node, build):
        super().__init__(node, build)
        interp = self.args["interp_type"]
        if interp not in (DALIInterpType.INTERP_NN, DALIInterpType.INTERP_LINEAR):
            raise OpArgumentError(f"fn.{self.op}: argument 'interp_type' must be INTERP_NN or INTERP_LINEAR, "
                                  f"got {interp.name}")
        self._linear = interp == DALIInterpType.INTERP_LINEAR

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        layout = image_layout(self.op, x.layout(), x.ndim(), ("HWC",))
        if x.np_dtype not in _INPUT_TYPES:
            raise TypeError(f"fn.{self.op}: input must be uint8 or float32, got {x.np_dtype.name}")
        mask = args.per_sample("mask", np.int64)
        shapes = [tuple(s) for s in x.shape()]
        if any(s[2] > 4 for s in shapes):
            raise ValueError(f"fn.{self.op}: at most 4 channels are supported")
        fill = (float(self.args["fill_value"]),) * 4
        dense = owned_empty((n,) + shapes[0], x.np_dtype) if n and len(set(shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, x.np_dtype) for i, s in enumerate(shapes)]
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                src = np.ascontiguousarray(samples[i])
                if not mask[i] or not src.size:
                    np.copyto(outs[i], src)
                    continue
                mx, my = self.maps(src.shape[0], src.shape[1], self.args)
                if self._linear:
                    mx -= _F32(0.5)
                    my -= _F32(0.5)
                    interp = cv2.INTER_LINEAR
                else:
                    np.floor(mx, out=mx)
                    np.floor(my, out=my)
                    interp = cv2.INTER_NEAREST
                dst = outs[i] if src.shape[2] > 1 else outs[i][..., 0]
                cv2.remap(src, mx, my, interp, dst=dst, borderMode=cv2.BORDER_CONSTANT, borderValue=fill)

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


class Water(_Displace):
    op = "water"
    maps = staticmethod(water_maps)


class Sphere(_Displace):
    op = "sphere"
    maps = staticmethod(sphere_maps)


_COMMON = (Arg("mask", "int", 1, "0: leave the sample unchanged.", tensor=True),
           Arg("fill_value", "float", 0.0, "Value of the points outside the image."),
           Arg("interp_type", "interp_type", DALIInterpType.INTERP_NN, "INTERP_NN or INTERP_LINEAR."))
_NOTE = ("\n\n.. note:: Nearest neighbour is exact against DALI 2.4; linear is within 1 for uint8 (OpenCV's "
         "fixed-point weights). With device='gpu' it runs on the host.")

WATER = register(OpSchema(
    name="water", impl=Water, devices=("cpu", "gpu"),
    doc="Underwater waves on HWC images: output (x, y) samples the input at (x + ampl_x sin(freq_x y + phase_x), "
        "y + ampl_y cos(freq_y x + phase_y))." + _NOTE,
    args=(Arg("ampl_x", "float", 10.0, "Amplitude of the wave along x, in pixels."),
          Arg("ampl_y", "float", 10.0, "Amplitude of the wave along y, in pixels."),
          Arg("freq_x", "float", 2 * np.pi / 128, "Frequency of the wave along x (radians per pixel)."),
          Arg("freq_y", "float", 2 * np.pi / 128, "Frequency of the wave along y (radians per pixel)."),
          Arg("phase_x", "float", 0.0, "Phase of the wave along x (radians)."),
          Arg("phase_y", "float", 0.0, "Phase of the wave along y (radians).")) + _COMMON,
))

SPHERE = register(OpSchema(
    name="sphere", impl=Sphere, devices=("cpu", "gpu"),
    doc="Sphere (fish-eye) effect on HWC images: output pixel (x, y) samples the input at centre + d * |d| / r, "
        "where d is the offset of the pixel centre from the image centre and r half the longer side." + _NOTE,
    args=_COMMON,
))
