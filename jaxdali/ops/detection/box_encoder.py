"""``fn.box_encoder``: SSD's assignment of ground-truth boxes to anchors (default boxes).

For each sample: the IoU of every anchor with every box; each box first claims the anchor it
overlaps most (so every box is matched at least once); every other anchor takes the box it
overlaps most (the last of equals) if that IoU exceeds ``criteria``. Matched anchors output the box in centre form
``[cx, cy, w, h]`` and its label; the others output the anchor itself and label 0 (background).
With ``offset=True`` the boxes are encoded relative to their anchors, SSD's regression targets:
``((cx - acx) / aw - mean) / std``, ``(log(w / aw) - mean) / std`` (unmatched anchors: zeros), on
centre-form coordinates multiplied by ``scale``.
Float32 arithmetic in DALI's order, so the outputs equal DALI's. ``device="gpu"`` runs the host
implementation; the results move to the pipeline's device.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, REQUIRED, register
from jaxdali.tensors import TensorListCPU

__all__ = ["IouRows", "iou_matrix", "BOX_ENCODER"]

_F32 = np.float32


class IouRows:
    """Intersection over union of boxes (m, 4) with a fixed set of ltrb boxes ``fixed`` (n, 4): (m, n).

    Rows per box: NumPy's broadcast loops are fast along a long contiguous inner axis, and the fixed
    set is the long side (anchors, candidate windows). Its columns and areas are prepared once, and
    the scratch arrays are kept between calls: a fresh array of this size costs more in page faults
    than the arithmetic on it. The result is a view of that scratch, valid until the next call; an
    instance is not shared between threads.
    """

    def __init__(self, fixed: np.ndarray):
        self._cols = [np.ascontiguousarray(fixed[:, k], _F32)[None, :] for k in range(4)]
        self._area = (self._cols[2] - self._cols[0]) * (self._cols[3] - self._cols[1])
        self._positive = bool((self._area > 0).all())
        self._scratch = np.zeros((4, 0, fixed.shape[0]), _F32)

    def __call__(self, boxes: np.ndarray) -> np.ndarray:
        m = len(boxes)
        if m > self._scratch.shape[1]:
            self._scratch = np.zeros((4, m, self._scratch.shape[2]), _F32)
        # ``zero`` stays zero: NumPy's maximum against an array of the same shape is 4x faster than
        # against a scalar or a broadcast row
        w, h, scratch, zero = self._scratch[:, :m]
        a = self._cols
        b = [boxes[:, k, None] for k in range(4)]
        np.minimum(a[2], b[2], out=w)
        w -= np.maximum(a[0], b[0], out=scratch)
        np.minimum(a[3], b[3], out=h)
        h -= np.maximum(a[1], b[1], out=scratch)
        np.maximum(w, zero, out=w)
        np.maximum(h, zero, out=h)
        inter = np.multiply(w, h, out=w)
        area_b = (b[2] - b[0]) * (b[3] - b[1])
        union = np.add(self._area, area_b, out=scratch)
        union -= inter
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = np.divide(inter, union, out=h)
        if not (self._positive and (area_b > 0).all()):  # else every union is at least the larger area
            iou[~(union > 0)] = 0
        return iou


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Intersection over union of every ltrb box in ``a`` (n, 4) with every one in ``b`` (m, 4): (n, m)."""
    return IouRows(a)(b).T


def _centre_form(ltrb: np.ndarray) -> np.ndarray:
    out = np.empty_like(ltrb)
    out[:, :2] = (ltrb[:, :2] + ltrb[:, 2:]) * _F32(0.5)
    out[:, 2:] = ltrb[:, 2:] - ltrb[:, :2]
    return out


class BoxEncoder(Operator):
    """``fn.box_encoder``."""

    def __init__(self, node, build):
        super().__init__(node, build)
        anchors = np.asarray(self.args["anchors"], _F32)
        if anchors.size == 0 or anchors.size % 4:
            raise OpArgumentError(f"fn.box_encoder: argument 'anchors' must hold 4 values [l, t, r, b] per anchor, "
                                  f"got {anchors.size} values")
        for name in ("means", "stds"):
            if len(self.args[name]) != 4:
                raise OpArgumentError(f"fn.box_encoder: argument '{name}' must have 4 values, got "
                                      f"{len(self.args[name])}")
        if any(s == 0 for s in self.args["stds"]):
            raise OpArgumentError(f"fn.box_encoder: argument 'stds' must not contain 0, got {list(self.args['stds'])}")
        self.anchors = anchors.reshape(-1, 4)
        self.scale = _F32(self.args["scale"])
        self.anchors_centre = _centre_form(self.anchors)
        self.means = np.asarray(self.args["means"], _F32)
        self.stds = np.asarray(self.args["stds"], _F32)
        self.criteria = _F32(self.args["criteria"])

    def _match(self, boxes: np.ndarray, ious: IouRows) -> np.ndarray:
        """The box index matched to each anchor, -1 for background."""
        match = np.full(len(self.anchors), -1, np.int64)
        if len(boxes) == 0:
            return match
        iou = ious(boxes)  # (boxes, anchors)
        # Only the few anchors above the criteria need their best box (the last among equals, as
        # DALI): argmax over the short axis of all anchors would cost a transposed copy of the matrix.
        matched = np.flatnonzero(iou.max(axis=0) > self.criteria)
        match[matched] = len(boxes) - 1 - iou[::-1, matched].argmax(axis=0)
        # Each box keeps its best anchor (the last one among equals, as DALI); later boxes win.
        best_anchor = iou.shape[1] - 1 - iou[:, ::-1].argmax(axis=1)
        match[best_anchor] = np.arange(len(boxes))
        return match

    def _encode(self, boxes: np.ndarray, labels: np.ndarray, ious: IouRows, out: np.ndarray,
                out_labels: np.ndarray) -> None:
        """Writes one sample's per-anchor boxes (A, 4) and labels (A,) into ``out`` and ``out_labels``."""
        match = self._match(boxes, ious)
        anchor = np.flatnonzero(match >= 0)  # the matched anchors, ascending
        box = match[anchor]
        out_labels.fill(0)
        out_labels[anchor] = labels[box]
        centre = _centre_form(boxes[box])
        if not self.args["offset"]:
            out[:] = self.anchors_centre
            out[anchor] = centre
            return
        out.fill(0)
        a, b = self.anchors_centre[anchor] * self.scale, centre * self.scale
        out[anchor, :2] = ((b[:, :2] - a[:, :2]) / a[:, 2:] - self.means[:2]) / self.stds[:2]
        ratio = (b[:, 2:] / a[:, 2:]).astype(np.float64)  # DALI: float32 ratio, double-precision log
        out[anchor, 2:] = (np.log(ratio).astype(_F32) - self.means[2:]) / self.stds[2:]

    def run(self, ctx, inputs, args):
        boxes_tl, labels_tl = inputs
        if boxes_tl.np_dtype != np.float32:
            raise TypeError(f"fn.box_encoder: the boxes (input 0) must be float32, got {boxes_tl.np_dtype}")
        if labels_tl.np_dtype != np.int32:
            raise TypeError(f"fn.box_encoder: the labels (input 1) must be int32, got {labels_tl.np_dtype}")
        n = len(boxes_tl)
        boxes, labels = boxes_tl.samples(), labels_tl.samples()
        out_boxes = np.empty((n,) + self.anchors.shape, _F32)
        out_labels = np.empty((n, len(self.anchors)), np.int32)

        def chunk(start: int, stop: int) -> None:
            ious = IouRows(self.anchors)
            for i in range(start, stop):
                b = np.asarray(boxes[i])
                lab = np.asarray(labels[i]).reshape(-1)
                if b.size % 4 or (b.ndim == 2 and b.shape[1] != 4) or len(lab) != b.size // 4:
                    raise ValueError(f"fn.box_encoder: sample {i}: the boxes must have shape (N, 4) and the labels "
                                     f"N values, got shapes {b.shape} and {np.shape(labels[i])}")
                self._encode(b.reshape(-1, 4), lab, ious, out_boxes[i], out_labels[i])

        ctx.parallel_for(chunk, n)
        return [TensorListCPU(out_boxes), TensorListCPU(out_labels)]


BOX_ENCODER = register(OpSchema(
    name="box_encoder", impl=BoxEncoder, devices=("cpu", "gpu"), min_inputs=2, max_inputs=2, num_outputs=2,
    doc="Assigns ground-truth boxes (input 0: float32 (N, 4) [l, t, r, b]) and labels (input 1: int32 (N,)) to "
        "anchors as SSD does; outputs per-anchor boxes (A, 4) in centre form (or encoded offsets with ``offset``) "
        "and labels (A,), 0 for background.",
    args=(Arg("anchors", "floats", REQUIRED, "Anchors, 4 values [l, t, r, b] each, flattened."),
          Arg("criteria", "float", 0.5, "IoU above which an anchor takes a box.", min=0, max=1),
          Arg("offset", "bool", False, "Output the boxes encoded as offsets from their anchors."),
          Arg("scale", "float", 1.0, "Scale applied to boxes and anchors before encoding."),
          Arg("means", "floats", (0.0, 0.0, 0.0, 0.0), "Means subtracted from the encoded offsets."),
          Arg("stds", "floats", (1.0, 1.0, 1.0, 1.0), "Deviations dividing the encoded offsets.")),
))
