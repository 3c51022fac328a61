"""``fn.paste``: places each HWC image on a larger canvas filled with ``fill_value``.

Canvas extent: ``floor(max(extent * ratio, min_canvas_size))`` (the product in float32); the image's top-left corner:
``floor(paste * (canvas - extent))`` per axis (DALI 2.4's rules, checked against it).
"""

from __future__ import annotations

import math

import numpy as np

from jaxdali.ops.geometry import convert, image_layout, sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU

__all__ = ["PASTE"]

_OP = "paste"


class Paste(Operator):
    """Canvas per sample, the image copied in at the requested relative position."""

    def _place(self, args, i: int, shape: tuple, who: str) -> tuple[tuple[int, int], tuple[int, int]]:
        """((canvas_h, canvas_w), (top, left)) of sample ``i``."""
        ratio = np.float32(np.asarray(args.sample_value("ratio", i)).reshape(-1)[0])
        if ratio < 1:
            raise ValueError(f"fn.{_OP}: argument 'ratio' must be >= 1, got {ratio} for {who}")
        min_canvas = self.args["min_canvas_size"]
        canvas, corner = [], []
        for extent, name in zip(shape[:2], ("paste_y", "paste_x")):
            pos = float(np.asarray(args.sample_value(name, i)).reshape(-1)[0])
            if not 0 <= pos <= 1:
                raise ValueError(f"fn.{_OP}: argument '{name}' must be in [0, 1], got {pos} for {who}")
            size = math.floor(max(np.float32(extent) * ratio, min_canvas))  # float32 product, as DALI
            canvas.append(size)
            corner.append(math.floor(pos * (size - extent)))
        return (canvas[0], canvas[1]), (corner[0], corner[1])

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        layout = image_layout(_OP, x.layout(), x.ndim(), ("HWC",))
        channels = self.args["n_channels"]
        fill = np.asarray(self.args["fill_value"], np.float64).reshape(-1)
        if fill.size not in (1, channels):
            raise ValueError(f"fn.{_OP}: argument 'fill_value' must have 1 or n_channels={channels} values, "
                             f"got {fill.size}")
        fill = convert(np.broadcast_to(fill, (channels,)), x.np_dtype)
        shapes = [tuple(s) for s in x.shape()]
        places = []
        for i, shape in enumerate(shapes):
            if shape[2] != channels:
                raise ValueError(f"fn.{_OP}: {sample_name(x, i)} has {shape[2]} channels, n_channels is {channels}")
            places.append(self._place(args, i, shape, sample_name(x, i)))
        out_shapes = [canvas + (channels,) for canvas, _ in places]
        dense = owned_empty((n,) + out_shapes[0], x.np_dtype) if n and len(set(out_shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, x.np_dtype) for i, s in enumerate(out_shapes)]
        samples = x.samples()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                (top, left), (h, w) = places[i][1], shapes[i][:2]
                out = outs[i]
                out[:top] = fill
                out[top + h:] = fill
                out[top:top + h, :left] = fill
                out[top:top + h, left + w:] = fill
                out[top:top + h, left:left + w] = samples[i]

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


PASTE = register(OpSchema(
    name=_OP, impl=Paste, devices=("cpu", "gpu"),
    doc="Pastes each HWC image into a canvas `ratio` times larger (at least `min_canvas_size` per side) filled "
        "with `fill_value`, at relative position (`paste_x`, `paste_y`) (0: left/top, 1: right/bottom).\n\n"
        ".. note:: With device='gpu' it runs on the host.",
    args=(Arg("ratio", "float", REQUIRED, "Canvas size relative to the image (>= 1).", tensor=True),
          Arg("fill_value", "floats", REQUIRED, "Canvas colour: one value, or one per channel."),
          Arg("paste_x", "float", 0.5, "Horizontal position, 0..1.", tensor=True),
          Arg("paste_y", "float", 0.5, "Vertical position, 0..1.", tensor=True),
          Arg("min_canvas_size", "float", 0.0, "Minimum canvas side."),
          Arg("n_channels", "int", 3, "Channels of the images.", min=1)),
))
