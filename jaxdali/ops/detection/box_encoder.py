"""``fn.box_encoder``: SSD's assignment of ground-truth boxes to anchors (default boxes).

For each sample: the IoU of every anchor with every box; each box first claims the anchor it
overlaps most (so every box is matched at least once); every other anchor takes the box it
overlaps most if that IoU exceeds ``criteria``. Matched anchors output the box in centre form
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

__all__ = ["iou_matrix", "BOX_ENCODER"]

_F32 = np.float32


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Intersection over union of every ltrb box in ``a`` (n, 4) with every one in ``b`` (m, 4): (n, m).

    Computed as (m, n) and returned transposed: NumPy's broadcast loops are fast along a long
    contiguous inner axis, and ``a`` is the long side (anchors, candidate windows).
    """
    a_cols = [np.ascontiguousarray(a[:, k])[None, :] for k in range(4)]
    b_cols = [b[:, k, None] for k in range(4)]
    w = np.minimum(a_cols[2], b_cols[2])
    scratch = np.maximum(a_cols[0], b_cols[0])
    w -= scratch
    h = np.minimum(a_cols[3], b_cols[3])
    h -= np.maximum(a_cols[1], b_cols[1], out=scratch)
    np.maximum(w, 0, out=w)
    np.maximum(h, 0, out=h)
    inter = np.multiply(w, h, out=w)
    area_a = (a_cols[2] - a_cols[0]) * (a_cols[3] - a_cols[1])
    area_b = (b_cols[2] - b_cols[0]) * (b_cols[3] - b_cols[1])
    union = np.add(area_a, area_b, out=scratch)
    union -= inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = np.divide(inter, union, out=h)
    if not ((area_a > 0).all() and (area_b > 0).all()):  # else every union is at least the larger area
        iou[~(union > 0)] = 0
    return iou.T


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

    def _match(self, boxes: np.ndarray) -> np.ndarray:
        """The box index matched to each anchor, -1 for background."""
        match = np.full(len(self.anchors), -1, np.int64)
        if len(boxes) == 0:
            return match
        iou = iou_matrix(self.anchors, boxes).T  # (boxes, anchors), contiguous
        best_box = iou.argmax(axis=0)
        matched = iou[best_box, np.arange(iou.shape[1])] > self.criteria
        match[matched] = best_box[matched]
        # Each box keeps its best anchor (the last one among equals, as DALI); later boxes win.
        best_anchor = iou.shape[1] - 1 - iou[:, ::-1].argmax(axis=1)
        match[best_anchor] = np.arange(len(boxes))
        return match

    def _encode(self, boxes: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        match = self._match(boxes)
        matched = match >= 0
        out_labels = np.where(matched, labels[np.maximum(match, 0)] if len(labels) else 0, 0).astype(np.int32)
        anchors = self.anchors_centre
        out = anchors.copy()
        if matched.any():
            out[matched] = _centre_form(boxes[match[matched]])
        if not self.args["offset"]:
            return out, out_labels
        enc = np.zeros_like(out)
        a, b = anchors[matched] * self.scale, out[matched] * self.scale
        enc[matched, :2] = ((b[:, :2] - a[:, :2]) / a[:, 2:] - self.means[:2]) / self.stds[:2]
        ratio = (b[:, 2:] / a[:, 2:]).astype(np.float64)  # DALI: float32 ratio, double-precision log
        enc[matched, 2:] = (np.log(ratio).astype(_F32) - self.means[2:]) / self.stds[2:]
        return enc, out_labels

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
            for i in range(start, stop):
                b = np.asarray(boxes[i])
                lab = np.asarray(labels[i]).reshape(-1)
                if b.size % 4 or (b.ndim == 2 and b.shape[1] != 4) or len(lab) != b.size // 4:
                    raise ValueError(f"fn.box_encoder: sample {i}: the boxes must have shape (N, 4) and the labels "
                                     f"N values, got shapes {b.shape} and {np.shape(labels[i])}")
                out_boxes[i], out_labels[i] = self._encode(b.reshape(-1, 4), lab)

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
