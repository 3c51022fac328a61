"""``fn.filter`` (and ``fn.experimental.filter``): correlation of images and sequences with a per-sample
2-D filter given as the second input.

Each plane is padded as ``border`` says (``cv2.copyMakeBorder``: every DALI border, the constant one
with the optional third input as its value) and correlated with ``cv2.filter2D`` in float32, then
converted to the output type (integers round and saturate). Where OpenCV pads by itself and writes the
output type, one ``cv2.filter2D`` call per plane does everything. ``mode="valid"`` keeps only the
positions where the filter lies inside the sample.
"""

from __future__ import annotations

import cv2
import numpy as np

from jaxdali.ops.geometry import convert, sample_name
from jaxdali.ops.image.spatial import planes, spatial_layout
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU
from jaxdali.types import to_numpy_type

__all__ = ["FILTER", "EXPERIMENTAL_FILTER"]

_BORDERS = {"reflect_101": cv2.BORDER_REFLECT_101, "reflect_1001": cv2.BORDER_REFLECT, "wrap": cv2.BORDER_WRAP,
            "clamp": cv2.BORDER_REPLICATE, "constant": cv2.BORDER_CONSTANT}
_CV_DEPTHS = {np.dtype(np.uint8): cv2.CV_8U, np.dtype(np.uint16): cv2.CV_16U, np.dtype(np.int16): cv2.CV_16S,
              np.dtype(np.float32): cv2.CV_32F}


class Filter(Operator):
    """Pads each plane, correlates it with the sample's filter, converts the result."""

    def __init__(self, node, build):
        super().__init__(node, build)
        self.op = node.schema.name
        self._border = _BORDERS[self.args["border"]]
        self._valid = self.args["mode"] == "valid"
        dtype = self.args["dtype"]
        self._dtype = np.dtype(to_numpy_type(dtype)) if dtype is not None else None
        if len(node.inputs) < 2:
            raise OpArgumentError(f"fn.{self.op}: needs the filter as its second input")

    def _anchor(self, args, i: int, kernel_shape: tuple, who: str) -> tuple[int, int]:
        if self._valid:
            return 0, 0
        anchor = np.asarray(args.sample_value("anchor", i), np.int64).reshape(-1).tolist()
        if len(anchor) == 1:
            anchor = anchor * 2
        if len(anchor) != 2:
            raise ValueError(f"fn.{self.op}: argument 'anchor' must have 1 or 2 values, got {anchor} for {who}")
        anchor = [k // 2 if a == -1 else a for a, k in zip(anchor, kernel_shape)]
        if any(not 0 <= a < k for a, k in zip(anchor, kernel_shape)):
            raise ValueError(f"fn.{self.op}: argument 'anchor' {anchor} lies outside the filter of shape "
                             f"{kernel_shape} for {who}")
        return anchor[0], anchor[1]

    def run(self, ctx, inputs, args):
        x, filters = inputs[0], inputs[1]
        fills = inputs[2] if len(inputs) > 2 else None
        n = len(x)
        layout = spatial_layout(self.op, x.layout(), x.ndim())
        out_dtype = self._dtype or x.np_dtype
        if out_dtype not in (x.np_dtype, np.dtype(np.float32)):
            raise ValueError(f"fn.{self.op}: argument 'dtype' must be FLOAT or the input type "
                             f"({x.np_dtype.name}), got {out_dtype.name}")
        h_axis = layout.index("H")
        kernels, anchors, fill_values, out_shapes = [], [], [], []
        for i, shape in enumerate(x.shape()):
            who = sample_name(x, i)
            kernel = np.asarray(filters.samples()[i], np.float32)
            if kernel.ndim != 2 or not kernel.size:
                raise ValueError(f"fn.{self.op}: the filter must be a non-empty 2-D array, got shape {kernel.shape} "
                                 f"for {who}")
            kernels.append(np.ascontiguousarray(kernel))
            anchors.append(self._anchor(args, i, kernel.shape, who))
            fill_values.append(float(np.asarray(fills.samples()[i]).reshape(-1)[0]) if fills is not None else 0.0)
            shape = tuple(shape)
            if self._valid:
                size = (shape[h_axis] - kernel.shape[0] + 1, shape[h_axis + 1] - kernel.shape[1] + 1)
                if min(size) < 0:
                    raise ValueError(f"fn.{self.op}: the filter {kernel.shape} is larger than {who} in 'valid' mode")
                shape = shape[:h_axis] + size + shape[h_axis + 2:]
            out_shapes.append(shape)
        dense = owned_empty((n,) + out_shapes[0], out_dtype) if n and len(set(out_shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, out_dtype) for i, s in enumerate(out_shapes)]
        samples = x.samples()

        direct_depth = _CV_DEPTHS.get(out_dtype) if x.np_dtype in _CV_DEPTHS else None

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if not outs[i].size:
                    continue
                src = np.ascontiguousarray(samples[i])
                if src.dtype not in _CV_DEPTHS:
                    src = src.astype(np.float32)
                kernel, (a_h, a_w) = kernels[i], anchors[i]
                # OpenCV pads by itself except for wrap and a non-zero constant
                native = self._border != cv2.BORDER_WRAP and fill_values[i] == 0
                for s, d in zip(planes(src, layout), planes(outs[i], layout)):
                    if native and not self._valid and direct_depth is not None:
                        cv2.filter2D(s, direct_depth, kernel, dst=d if d.ndim == 2 or d.shape[2] > 1 else d[..., 0],
                                     anchor=(a_w, a_h), borderType=self._border)
                        continue
                    if not self._valid:
                        s = cv2.copyMakeBorder(s, a_h, kernel.shape[0] - 1 - a_h, a_w, kernel.shape[1] - 1 - a_w,
                                               self._border, value=(fill_values[i],) * 4)
                    corr = cv2.filter2D(s, cv2.CV_32F, kernel, anchor=(0, 0), borderType=cv2.BORDER_REPLICATE)
                    out_h, out_w = d.shape[:2]
                    d[...] = convert(corr.reshape(s.shape[:2] + d.shape[2:])[:out_h, :out_w], d.dtype)

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


_DOC = ("Correlates images (HW, HWC, CHW) and sequences (F...) with a per-sample 2-D float filter (second "
        "input; the filter is not flipped). `anchor` places the filter (default: its middle); `border` pads "
        "the sample (reflect_101, reflect_1001, wrap, clamp, or constant with the optional third input as the "
        "value, default 0); `mode='valid'` keeps only the positions where the filter fits. Computed in float32, "
        "integer outputs round and saturate.\n\n.. note:: Volumes and per-frame filters are not supported. Values "
        "are within 1 of DALI 2.4 for integer outputs (summation order). With device='gpu' it runs on the host.")
_ARGS = (Arg("anchor", "ints", (-1,), "Filter position (row, column) over the output point; -1: the middle.",
             tensor=True),
         Arg("border", "str", "reflect_101", "Out-of-bounds handling.", choices=tuple(_BORDERS)),
         Arg("mode", "str", "same", "'same' (output of the input's size) or 'valid'.", choices=("same", "valid")),
         Arg("dtype", "dtype", None, "Output type: FLOAT or the input type (default)."))

FILTER = register(OpSchema(name="filter", impl=Filter, devices=("cpu", "gpu"), min_inputs=2, max_inputs=3,
                           doc=_DOC, args=_ARGS))
EXPERIMENTAL_FILTER = register(OpSchema(
    name="experimental.filter", impl=Filter, devices=("cpu", "gpu"), min_inputs=2, max_inputs=3,
    doc="The experimental name of fn.filter. " + _DOC, args=_ARGS))

