"""``fn.multi_paste``: each output sample is a zero canvas with regions of input samples pasted in order
(later pastes on top). With ``in_ids`` one input batch provides the pasted samples (by index, per
output sample); without it, the i-th sample of every input is pasted into output sample i. Regions
are given in pixels or relative to the input (``in_anchors``, ``shapes``) and output
(``out_anchors``) extents; a region that does not fit is an error naming the sample and paste.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.geometry import convert, image_layout
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU
from jaxdali.types import to_numpy_type

__all__ = ["MULTI_PASTE"]

_OP = "multi_paste"


class MultiPaste(Operator):
    """Pastes regions of input samples onto zero canvases."""

    def __init__(self, node, build):
        super().__init__(node, build)
        given = lambda n: n in node.arg_inputs or self.args.get(n) is not None  # noqa: E731
        for a, b in (("in_anchors", "in_anchors_rel"), ("shapes", "shapes_rel"), ("out_anchors", "out_anchors_rel")):
            if given(a) and given(b):
                raise OpArgumentError(f"fn.{_OP}: arguments '{a}' and '{b}' are mutually exclusive")
        self._by_id = given("in_ids")
        if self._by_id and len(node.inputs) != 1:
            raise OpArgumentError(f"fn.{_OP}: with 'in_ids' the operator takes exactly one input, got "
                                  f"{len(node.inputs)}")
        dtype = self.args.get("dtype")
        self._dtype = np.dtype(to_numpy_type(dtype)) if dtype is not None else None

    def _regions(self, args, i: int, k: int, name: str, rel: str, extents: np.ndarray,
                 default: np.ndarray) -> np.ndarray:
        """(k, 2) int64 values of a per-paste argument, from pixels or relative to ``extents`` (k, 2)."""
        if args.given(name):
            return np.asarray(args.sample_value(name, i), np.int64).reshape(k, 2)
        if args.given(rel):
            return np.floor(np.asarray(args.sample_value(rel, i), np.float64).reshape(k, 2) * extents).astype(np.int64)
        return default

    def run(self, ctx, inputs, args):
        x = inputs[0]
        n = len(x)
        layout = image_layout(_OP, x.layout(), x.ndim(), ("HWC",))
        out_dtype = self._dtype or x.np_dtype
        if self._by_id:
            ids = [np.asarray(args.sample_value("in_ids", i), np.int64).reshape(-1) for i in range(n)]
            for i, row in enumerate(ids):
                if ((row < 0) | (row >= n)).any():
                    raise ValueError(f"fn.{_OP}: 'in_ids' of output sample {i} has {row.tolist()}, outside the batch "
                                     f"of {n}")
            sources = [[x.samples()[j] for j in row] for row in ids]
        else:
            sources = [[inp.samples()[i] for inp in inputs] for i in range(n)]
        channels = x.shape()[0][2] if n else 0
        sizes = []
        for i in range(n):
            if args.given("output_size"):
                sizes.append(tuple(int(v) for v in np.asarray(args.sample_value("output_size", i)).reshape(-1)))
            elif len({s.shape for row in sources for s in row}) == 1:
                sizes.append(sources[i][0].shape[:2])
            else:
                raise ValueError(f"fn.{_OP}: 'output_size' is required when the input shapes differ")
        plans = []
        for i in range(n):
            k = len(sources[i])
            in_hw = np.array([s.shape[:2] for s in sources[i]], np.int64).reshape(k, 2)
            out_hw = np.broadcast_to(np.array(sizes[i], np.int64), (k, 2))
            in_anchor = self._regions(args, i, k, "in_anchors", "in_anchors_rel", in_hw, np.zeros((k, 2), np.int64))
            shape = self._regions(args, i, k, "shapes", "shapes_rel", in_hw, in_hw - in_anchor)
            out_anchor = self._regions(args, i, k, "out_anchors", "out_anchors_rel", out_hw,
                                       np.zeros((k, 2), np.int64))
            for p in range(k):
                if (in_anchor[p] < 0).any() or (in_anchor[p] + shape[p] > in_hw[p]).any() or \
                        (out_anchor[p] < 0).any() or (out_anchor[p] + shape[p] > out_hw[p]).any() or \
                        (shape[p] < 0).any():
                    raise ValueError(f"fn.{_OP}: paste {p} of output sample {i} does not fit: input region at "
                                     f"{in_anchor[p].tolist()} of shape {shape[p].tolist()} in {in_hw[p].tolist()}, "
                                     f"output anchor {out_anchor[p].tolist()} in {list(sizes[i])}")
                if sources[i][p].shape[2] != channels:
                    raise ValueError(f"fn.{_OP}: all pasted samples must have {channels} channels")
            plans.append((in_anchor, shape, out_anchor))
        out_shapes = [tuple(s) + (channels,) for s in sizes]
        dense = owned_empty((n,) + out_shapes[0], out_dtype) if n and len(set(out_shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, out_dtype) for i, s in enumerate(out_shapes)]

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                outs[i][...] = 0
                for src, a, (h, w), o in zip(sources[i], *plans[i]):
                    region = src[a[0]:a[0] + h, a[1]:a[1] + w]
                    outs[i][o[0]:o[0] + h, o[1]:o[1] + w] = convert(region, out_dtype)

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


MULTI_PASTE = register(OpSchema(
    name=_OP, impl=MultiPaste, devices=("cpu", "gpu"), max_inputs=64,
    doc="Pastes regions of HWC input samples onto zero canvases of `output_size` (default: the common input "
        "size), in order. With `in_ids` (one input): output sample i gets the listed input samples; otherwise "
        "output sample i gets sample i of every input. Regions: `in_anchors`/`shapes`/`out_anchors` in pixels "
        "(k x 2 per output sample), or the `_rel` forms relative to the input/output extents (rounded down). "
        "`dtype` converts (integers saturate).\n\n.. note:: With device='gpu' it runs on the host.",
    args=(Arg("in_ids", "ints", None, "Input samples pasted into each output sample.", tensor=True),
          Arg("output_size", "ints", None, "Output (H, W).", tensor=True),
          Arg("in_anchors", "ints", None, "Top-left of each pasted region in its input (k x 2).", tensor=True),
          Arg("in_anchors_rel", "floats", None, "`in_anchors` relative to the input extents.", tensor=True),
          Arg("shapes", "ints", None, "Extent of each pasted region (k x 2).", tensor=True),
          Arg("shapes_rel", "floats", None, "`shapes` relative to the input extents.", tensor=True),
          Arg("out_anchors", "ints", None, "Where each region goes in the output (k x 2).", tensor=True),
          Arg("out_anchors_rel", "floats", None, "`out_anchors` relative to the output extents.", tensor=True),
          Arg("dtype", "dtype", None, "Output type; default: the input type.")),
))
