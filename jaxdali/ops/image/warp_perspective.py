"""``fn.experimental.warp_perspective``: a 3x3 homography per sample through ``cv2.warpPerspective``.

DALI 2.4's CPU operator is OpenCV's warp, so this one is exact: with ``pixel_origin="center"`` the
matrix goes to OpenCV as given; with ``"corner"`` (the default) it is first moved to OpenCV's
pixel-centre coordinates, ``T(-0.5) @ M @ T(+0.5)``, in float32 as DALI does. ``inverse_map=False``
lets OpenCV invert the matrix. Frames and channel planes (CHW) are warped one by one on the worker pool.
"""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.geometry import image_layout, sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIInterpType

__all__ = ["WARP_PERSPECTIVE", "opencv_matrix"]

_OP = "experimental.warp_perspective"
_LAYOUTS = ("HW", "HWC", "FHWC", "CHW", "FCHW")
_TYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int16), np.dtype(np.float32))
_BORDERS = {"constant": cv2.BORDER_CONSTANT, "replicate": cv2.BORDER_REPLICATE, "reflect": cv2.BORDER_REFLECT,
            "reflect_101": cv2.BORDER_REFLECT_101, "wrap": cv2.BORDER_WRAP}
_INTERP = {DALIInterpType.INTERP_NN: cv2.INTER_NEAREST, DALIInterpType.INTERP_LINEAR: cv2.INTER_LINEAR,
           DALIInterpType.INTERP_CUBIC: cv2.INTER_CUBIC}
_TO_CENTER = np.array([[1, 0, -0.5], [0, 1, -0.5], [0, 0, 1]], np.float32)
_FROM_CENTER = np.array([[1, 0, 0.5], [0, 1, 0.5], [0, 0, 1]], np.float32)


def opencv_matrix(matrix: np.ndarray, corner_origin: bool) -> np.ndarray:
    """The float64 matrix for ``cv2.warpPerspective`` from a DALI matrix (3x3)."""
    m = np.asarray(matrix, np.float32).reshape(3, 3)
    if corner_origin:
        m = _TO_CENTER @ (m @ _FROM_CENTER)
    return m.astype(np.float64)


class WarpPerspective(Operator):
    """Per-sample homography warp of images, sequences and channel-first images."""

    def __init__(self, node, build):
        super().__init__(node, build)
        interp = self.args["interp_type"]
        if interp not in _INTERP:
            raise OpArgumentError(f"fn.{_OP}: argument 'interp_type' must be INTERP_NN, INTERP_LINEAR or "
                                  f"INTERP_CUBIC, got {interp.name}")
        self._flags = _INTERP[interp] | (cv2.WARP_INVERSE_MAP if self.args["inverse_map"] else 0)
        self._border = _BORDERS[self.args["border_mode"]]
        self._corner = self.args["pixel_origin"] == "corner"
        if len(node.inputs) < 2 and "matrix" not in node.arg_inputs and not self.args.get("matrix"):
            raise OpArgumentError(f"fn.{_OP}: give the matrix, as argument 'matrix' or as a second input")

    def _matrix(self, inputs, args, i: int, who: str) -> np.ndarray:
        m = np.asarray(inputs[1].samples()[i] if len(inputs) > 1 else args.sample_value("matrix", i), np.float32)
        if m.size != 9:
            raise ValueError(f"fn.{_OP}: the matrix must have 9 values (3x3), got {m.size} for {who}")
        return opencv_matrix(m, self._corner)

    def _size(self, args, i: int, shape: tuple, layout: str, who: str) -> tuple[int, int]:
        """Output (height, width): ``size`` or the input's."""
        size = args.sample_value("size", i)
        if size is None or np.size(size) == 0:
            return shape[layout.index("H")], shape[layout.index("W")]
        size = np.asarray(size, np.float64).reshape(-1)
        if size.size != 2 or (size < 0).any():
            raise ValueError(f"fn.{_OP}: argument 'size' must be 2 non-negative values (H, W), got "
                             f"{size.tolist()} for {who}")
        return int(round(size[0])), int(round(size[1]))

    def _fill(self, channels: int) -> tuple:
        fill = self.args["fill_value"] or (0.0,)
        if len(fill) not in (1, channels):
            raise ValueError(f"fn.{_OP}: argument 'fill_value' has {len(fill)} values for {channels} channels")
        return tuple(fill) * (channels if len(fill) == 1 else 1)

    def run(self, ctx, inputs, args):
        x = inputs[0]
        n = len(x)
        layout = image_layout(_OP, x.layout(), x.ndim(), _LAYOUTS)
        if x.np_dtype not in _TYPES:
            raise TypeError(f"fn.{_OP}: input type must be uint8, uint16, int16 or float32, got {x.np_dtype.name}")
        h_axis = layout.index("H")
        channels_last = layout.endswith("C")
        shapes = [tuple(s) for s in x.shape()]
        who = [sample_name(x, i) for i in range(n)]
        if channels_last and any(s[-1] > 4 for s in shapes):
            raise ValueError(f"fn.{_OP}: at most 4 interleaved channels are supported")
        matrices = [self._matrix(inputs, args, i, who[i]) for i in range(n)]
        sizes = [self._size(args, i, shapes[i], layout, who[i]) for i in range(n)]
        out_shapes = [s[:h_axis] + size + s[h_axis + 2:] for s, size in zip(shapes, sizes)]
        fill = self._fill(shapes[0][-1] if channels_last and n else 1)
        dense = owned_empty((n,) + out_shapes[0], x.np_dtype) if n and len(set(out_shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, x.np_dtype) for i, s in enumerate(out_shapes)]
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if not samples[i].size or not outs[i].size:
                    continue
                src = np.ascontiguousarray(samples[i])
                src_planes = src.reshape((-1,) + src.shape[h_axis:])
                dst_planes = outs[i].reshape((-1,) + outs[i].shape[h_axis:])
                height, width = sizes[i]
                for s, d in zip(src_planes, dst_planes):
                    cv2.warpPerspective(s, matrices[i], (width, height), dst=d if d.ndim == 2 or d.shape[-1] > 1
                                        else d[..., 0], flags=self._flags, borderMode=self._border, borderValue=fill)

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


WARP_PERSPECTIVE = register(OpSchema(
    name=_OP, impl=WarpPerspective, devices=("cpu", "gpu"), max_inputs=2,
    doc="Perspective warp of images (HW, HWC, CHW) and sequences (FHWC, FCHW; one matrix per sample) of uint8, "
        "uint16, int16 or float32 with a 3x3 matrix (argument or second input): output pixel p samples the "
        "input at M p (inverse_map=True), or M maps input to output (inverse_map=False). Equal to DALI 2.4's "
        "CPU operator (OpenCV's warp).\n\n.. note:: With device='gpu' it runs on the host.",
    args=(Arg("matrix", "floats", (), "3x3 matrix, row-major (9 values).", tensor=True),
          Arg("size", "floats", (), "Output size (H, W); default: the input size.", tensor=True),
          Arg("border_mode", "str", "constant", "Values outside the input.",
              choices=tuple(_BORDERS)),
          Arg("fill_value", "floats", (), "Value (one, or one per channel) for border_mode 'constant'; "
              "default 0."),
          Arg("interp_type", "interp_type", DALIInterpType.INTERP_LINEAR, "NN, LINEAR or CUBIC."),
          Arg("inverse_map", "bool", True, "The matrix maps output to input coordinates."),
          Arg("pixel_origin", "str", "corner", "(0, 0) at the corner or at the centre of the first pixel.",
              choices=("corner", "center"))),
))
