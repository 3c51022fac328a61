"""``fn.debayer`` (and ``fn.experimental.debayer``): Bayer mosaics (one channel) to RGB with OpenCV's
demosaicing, which is what DALI 2.4's CPU operator runs (bit-exact). Frames of sequences are
demosaiced one by one, samples on the worker pool."""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.geometry import image_layout, sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU

__all__ = ["DEBAYER", "EXPERIMENTAL_DEBAYER", "bayer_code"]

#: Position (row, column) of the blue pixel in the 2x2 tile -> OpenCV's pattern name.
_PATTERNS = {(0, 0): "BG", (0, 1): "GB", (1, 0): "GR", (1, 1): "RG"}
#: algorithm -> (OpenCV suffix, output channels)
_ALGORITHMS = {"default": ("2RGB", 3), "bilinear_ocv": ("2RGB", 3), "edgeaware_ocv": ("2RGB_EA", 3),
               "vng_ocv": ("2RGB_VNG", 3), "gray_ocv": ("2GRAY", 1)}


def bayer_code(blue_position: tuple[int, int], algorithm: str) -> int:
    """The ``cv2.cvtColor`` code for a mosaic whose 2x2 tile has blue at ``blue_position``."""
    return getattr(cv2, f"COLOR_Bayer{_PATTERNS[blue_position]}{_ALGORITHMS[algorithm][0]}")


class Debayer(Operator):
    """Demosaics every frame of uint8/uint16 single-channel samples."""

    def __init__(self, node, build):
        super().__init__(node, build)
        self.op = node.schema.name
        self._algorithm = self.args["algorithm"]
        self._channels = _ALGORITHMS[self._algorithm][1]

    def _blue(self, args, i: int, who: str) -> tuple[int, int]:
        pos = tuple(int(v) for v in np.asarray(args.sample_value("blue_position", i)).reshape(-1))
        if pos not in _PATTERNS:
            raise ValueError(f"fn.{self.op}: argument 'blue_position' must be 2 values, each 0 or 1, got "
                             f"{list(pos)} for {who}")
        return pos

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        layout = image_layout(self.op, x.layout(), x.ndim(), ("HW", "HWC", "FHW", "FHWC"))
        if x.np_dtype not in (np.uint8, np.uint16) or (self._algorithm == "vng_ocv" and x.np_dtype != np.uint8):
            raise TypeError(f"fn.{self.op}: input must be uint8 or uint16 (uint8 for algorithm 'vng_ocv'), "
                            f"got {x.np_dtype.name}")
        frame_axes = 2 if layout.endswith("W") else 3
        shapes = [tuple(s) for s in x.shape()]
        for i, shape in enumerate(shapes):
            if frame_axes == 3 and shape[-1] != 1:
                raise ValueError(f"fn.{self.op}: expects single-channel mosaics, {sample_name(x, i)} has "
                                 f"{shape[-1]} channels")
            h, w = shape[len(shape) - frame_axes:][:2]
            if h % 2 or w % 2:
                raise ValueError(f"fn.{self.op}: the height and width of a mosaic must be even, {sample_name(x, i)} "
                                 f"is {h} x {w}")
        codes = [bayer_code(self._blue(args, i, sample_name(x, i)), self._algorithm) for i in range(n)]
        out_shapes = [s[:len(s) - frame_axes] + s[len(s) - frame_axes:][:2] + (self._channels,) for s in shapes]
        dense = owned_empty((n,) + out_shapes[0], x.np_dtype) if n and len(set(out_shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, x.np_dtype) for i, s in enumerate(out_shapes)]
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if not samples[i].size:
                    continue
                h, w = out_shapes[i][-3:-1]
                frames = np.ascontiguousarray(samples[i]).reshape(-1, h, w)
                for src, dst in zip(frames, outs[i].reshape(-1, h, w, self._channels)):
                    cv2.cvtColor(src, codes[i], dst=dst if self._channels > 1 else dst[..., 0])

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, "FHWC" if layout.startswith("F") else "HWC")


_DOC = ("Demosaics single-channel Bayer images (HW, HWC with one channel) and sequences (FHW, FHWC) of uint8 "
        "or uint16 into RGB (HWC, FHWC; one channel with 'gray_ocv'). `blue_position` is the (row, column) of "
        "the blue pixel in the 2x2 tile. OpenCV's bilinear ('default', 'bilinear_ocv'), edge-aware and VNG "
        "demosaicing, as DALI 2.4's CPU operator (bit-exact).\n\n.. note:: 'bilinear_npp' (DALI's GPU "
        "algorithm) is not available. With device='gpu' it runs on the host.")
_ARGS = (Arg("blue_position", "ints", REQUIRED, "(row, column) of the blue pixel in the 2x2 tile.", tensor=True),
         Arg("algorithm", "str", "default", "Demosaicing algorithm.", choices=tuple(_ALGORITHMS)))

DEBAYER = register(OpSchema(name="debayer", impl=Debayer, devices=("cpu", "gpu"), doc=_DOC, args=_ARGS))
EXPERIMENTAL_DEBAYER = register(OpSchema(name="experimental.debayer", impl=Debayer, devices=("cpu", "gpu"),
                                         doc="The experimental name of fn.debayer. " + _DOC, args=_ARGS))
