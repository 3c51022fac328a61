"""``fn.random_bbox_crop``: SSD-style random crop windows that keep the boxes (2D).

Per sample, a round picks one option at random: "no crop" (``allow_no_crop``) or one of the
``thresholds``; a threshold round draws ``num_attempts`` candidate windows at once (width from
``scaling``, aspect ratio w/h from ``aspect_ratio``, or the fixed ``crop_shape`` of an image of
``input_shape``; a uniform position inside the image) and takes the first whose boxes pass the
threshold (IoU or overlap with the window; every box, or any with
``all_boxes_above_threshold=False``) and that keeps at least one box. Rounds repeat until a
window is found; after ``total_num_attempts`` candidates the best one seen is used, as in DALI.
A box is kept when its centre lies in the window (or, with ``bbox_prune_threshold``, when that
fraction of its area does); kept boxes are clipped to the window and expressed relative to it.

Outputs: anchor and shape of the window (x first; relative, or in pixels with ``crop_shape``),
the kept boxes in ``bbox_layout``, their labels (with a labels input) and indices
(``output_bbox_indices``). Random values are a pure function of (seed, iteration, sample), so
seeds and checkpoints behave like every other random operator; they are not DALI's streams.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.detection.box_encoder import iou_matrix
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.pipeline.tensors import TensorListCPU

__all__ = ["BoxLayout", "RANDOM_BBOX_CROP"]

_F32 = np.float32
#: Without total_num_attempts DALI searches forever; we stop with an error after this many candidates.
_SEARCH_LIMIT = 10_000


class BoxLayout:
    """A 2D box layout such as "xyXY" (corners) or "xyWH" (corner and size), any letter order."""

    def __init__(self, op: str, layout: str):
        letters = sorted(layout)
        if letters not in (sorted("xyXY"), sorted("xyWH")):
            raise OpArgumentError(f"fn.{op}: argument 'bbox_layout' must be an ordering of 'xyXY' or 'xyWH' (2D "
                                  f"boxes), got {layout!r}")
        self.layout = layout
        self.sizes = "W" in layout
        self.order = [layout.index(c) for c in ("xyWH" if self.sizes else "xyXY")]

    def to_ltrb(self, boxes: np.ndarray) -> np.ndarray:
        out = boxes[:, self.order].astype(_F32)
        if self.sizes:
            out[:, 2:] += out[:, :2]
        return out

    def from_ltrb(self, ltrb: np.ndarray) -> np.ndarray:
        values = ltrb.copy()
        if self.sizes:
            values[:, 2:] -= values[:, :2]
        out = np.empty_like(values)
        out[:, self.order] = values
        return out


class RandomBBoxCrop(Operator):
    """``fn.random_bbox_crop``."""

    op = "random_bbox_crop"

    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        layout = a.get("bbox_layout") or ("xyXY" if a["ltrb"] else "xyWH")
        self.layout = BoxLayout(self.op, layout)
        self.scaling = self._range("scaling", low=0.0)
        self.aspect = self._range("aspect_ratio", low=0.0)
        self.thresholds = [float(t) for t in a["thresholds"]]
        if any(not 0 <= t <= 1 for t in self.thresholds):
            raise OpArgumentError(f"fn.{self.op}: argument 'thresholds' must be in [0, 1], got {self.thresholds}")
        self.options = self.thresholds + ([None] if a["allow_no_crop"] else [])
        if not self.options:
            raise OpArgumentError(f"fn.{self.op}: argument 'thresholds' is empty and 'allow_no_crop' is False: "
                                  "there is nothing to choose from")
        shape_layout = a.get("shape_layout") or "WH"
        if shape_layout not in ("WH", "HW"):
            raise OpArgumentError(f"fn.{self.op}: argument 'shape_layout' must be 'WH' or 'HW' (2D), got "
                                  f"{shape_layout!r}")
        self.xy_order = [0, 1] if shape_layout == "WH" else [1, 0]
        self.absolute = "crop_shape" in node.arg_inputs or a.get("crop_shape") is not None
        has_input_shape = "input_shape" in node.arg_inputs or a.get("input_shape") is not None
        if self.absolute and not has_input_shape:
            raise OpArgumentError(f"fn.{self.op}: argument 'crop_shape' needs 'input_shape' (the image size)")
        self.prune = a.get("bbox_prune_threshold")

    def _range(self, name: str, low: float) -> tuple[float, float]:
        values = self.args[name]
        if len(values) != 2 or not low < values[0] <= values[1]:
            raise OpArgumentError(f"fn.{self.op}: argument '{name}' must be [min, max] with {low} < min <= max (2D), "
                                  f"got {list(values)}")
        return float(values[0]), float(values[1])

    # -- candidate windows ------------------------------------------------------------------------------

    def _windows(self, u: np.ndarray, args, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Candidate windows from uniforms u (k, 4): relative (k, 4) ltrb, and whether each is usable."""
        if self.absolute:
            image = self._xy(args, "input_shape", i)
            crop = self._xy(args, "crop_shape", i)
            if (crop > image).any() or (crop <= 0).any():
                raise ValueError(f"fn.{self.op}: sample {i}: 'crop_shape' {crop.tolist()} must be positive and fit "
                                 f"in 'input_shape' {image.tolist()} (x, y order)")
            anchor = np.floor(u[:, 2:] * (image - crop + 1))
            start, size = anchor / image, np.broadcast_to(crop / image, anchor.shape)
            usable = np.ones(len(u), bool)
        else:
            lo, hi = self.scaling
            w = lo + u[:, 0] * (hi - lo)
            h = w / (self.aspect[0] + u[:, 1] * (self.aspect[1] - self.aspect[0]))
            usable = (h >= lo) & (h <= hi) & (h <= 1) & (w <= 1)
            size = np.stack([w, h], 1)
            start = u[:, 2:] * np.clip(1 - size, 0, None)
        return np.concatenate([start, start + size], 1).astype(_F32), usable

    def _xy(self, args, name: str, i: int) -> np.ndarray:
        value = np.asarray(args.sample_value(name, i), np.float64).reshape(-1)
        if value.size != 2:
            raise ValueError(f"fn.{self.op}: argument '{name}' must have 2 values, got {value.tolist()}")
        return value[self.xy_order]

    def _kept(self, windows: np.ndarray, boxes: np.ndarray) -> np.ndarray:
        """(k, n) whether each box stays in each window."""
        if self.prune is None:
            centre = (boxes[:, :2] + boxes[:, 2:]) * _F32(0.5)
            return ((centre[None, :, :] >= windows[:, None, :2]) & (centre[None, :, :] <= windows[:, None, 2:])).all(2)
        return _overlap(windows, boxes) >= self.prune

    def _search(self, keys: np.ndarray, boxes: np.ndarray, args, i: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The chosen window (4,) relative ltrb and the kept-box mask, or None for "no crop"."""
        attempts = self.args["num_attempts"]
        total_limit = self.args["total_num_attempts"]
        limit = total_limit if total_limit > 0 else _SEARCH_LIMIT
        best, best_metric, tried, round_ = None, -1.0, 0, 0
        while tried < limit:
            draws = rng.uniform(keys, 1 + 4 * attempts, stream=round_)[0]
            round_ += 1
            threshold = self.options[min(int(draws[0] * len(self.options)), len(self.options) - 1)]
            if threshold is None:
                return None
            count = min(attempts, limit - tried)
            windows, usable = self._windows(draws[1:1 + 4 * count].reshape(count, 4), args, i)
            tried += count
            if len(boxes) == 0:
                ok = usable
                metric = np.zeros(count)
                kept = np.zeros((count, 0), bool)
            else:
                scores = iou_matrix(windows, boxes) if self.args["threshold_type"] == "iou" else \
                    _overlap(windows, boxes)
                above = scores >= threshold
                ok_t = above.all(1) if self.args["all_boxes_above_threshold"] else above.any(1)
                kept = self._kept(windows, boxes)
                ok = usable & ok_t & kept.any(1)
                metric = np.where(usable, scores.min(1) if self.args["all_boxes_above_threshold"] else scores.max(1),
                                  -1.0)
            hits = np.flatnonzero(ok)
            if hits.size:
                return windows[hits[0]], kept[hits[0]]
            k = int(np.argmax(metric))
            if usable[k] and metric[k] > best_metric:
                best, best_metric = (windows[k], kept[k]), float(metric[k])
        if total_limit > 0 and best is not None:
            return best
        raise RuntimeError(f"fn.{self.op}: sample {i}: no crop window satisfies the thresholds and scaling after "
                           f"{tried} candidates; set 'total_num_attempts' to accept the best window, or relax the "
                           "arguments")

    # -- the batch --------------------------------------------------------------------------------------

    def run(self, ctx, inputs, args):
        n = ctx.batch_size
        keys = ctx.sample_keys(self.seed)
        box_samples = inputs[0].samples()
        label_samples = inputs[1].samples() if len(inputs) > 1 else None
        anchors = np.zeros((n, 2), _F32)
        shapes = np.ones((n, 2), _F32)
        out_boxes, out_labels, out_indices = [], [], []
        for i in range(n):
            raw = np.asarray(box_samples[i])
            if raw.ndim != 2 or raw.shape[1] != 4:
                raise ValueError(f"fn.{self.op}: sample {i}: the boxes must have shape (N, 4), got {raw.shape}")
            boxes = self.layout.to_ltrb(raw)
            bad = np.flatnonzero((boxes < 0).any(1) | (boxes > 1).any(1) | (boxes[:, 2:] < boxes[:, :2]).any(1))
            if bad.size:
                raise ValueError(f"fn.{self.op}: sample {i}: box {raw[bad[0]].tolist()} ({self.layout.layout}) is not "
                                 "inside the normalised image [0, 1]")
            found = self._search(keys[i:i + 1], boxes, args, i)
            if found is None:
                kept = np.ones(len(boxes), bool)
                window = np.array([0, 0, 1, 1], _F32)
                cropped = boxes
            else:
                window, kept = found
                size = window[2:] - window[:2]
                cropped = np.clip((boxes[kept] - np.tile(window[:2], 2)) / np.tile(size, 2), 0, 1).astype(_F32)
            anchors[i], shapes[i] = window[:2], window[2:] - window[:2]
            if self.absolute:
                image = self._xy(args, "input_shape", i)
                anchors[i] = np.rint(window[:2] * image)
                shapes[i] = image if found is None else self._xy(args, "crop_shape", i)
            out_boxes.append(self.layout.from_ltrb(cropped))
            if label_samples is not None:
                labels = np.asarray(label_samples[i])
                if len(labels) != len(boxes):
                    raise ValueError(f"fn.{self.op}: sample {i}: {len(labels)} labels for {len(boxes)} boxes")
                out_labels.append(labels[kept])
            out_indices.append(np.flatnonzero(kept).astype(np.int32))
        outputs = [TensorListCPU(anchors), TensorListCPU(shapes), TensorListCPU(out_boxes)]
        if label_samples is not None:
            outputs.append(TensorListCPU(out_labels))
        if self.args["output_bbox_indices"]:
            outputs.append(TensorListCPU(out_indices))
        return outputs


def _overlap(windows: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """(k, n) the fraction of each box's area inside each window."""
    w = np.minimum(windows[:, None, 2], boxes[None, :, 2]) - np.maximum(windows[:, None, 0], boxes[None, :, 0])
    h = np.minimum(windows[:, None, 3], boxes[None, :, 3]) - np.maximum(windows[:, None, 1], boxes[None, :, 1])
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(area > 0, np.maximum(w, 0) * np.maximum(h, 0) / area, 0).astype(_F32)


RANDOM_BBOX_CROP = register(OpSchema(
    name="random_bbox_crop", impl=RandomBBoxCrop, min_inputs=1, max_inputs=2,
    num_outputs=lambda args, num_inputs: 3 + (num_inputs > 1) + bool(args.get("output_bbox_indices")),
    doc="""Random crop windows for object detection (SSD), with the boxes that stay in them (2D).

Inputs: normalised boxes (N, 4) in ``bbox_layout`` and optional labels (N,). Outputs: the
window's anchor and shape ([x, y]; relative, or pixels with ``crop_shape``/``input_shape``),
the kept boxes relative to the window, the kept labels (with a labels input) and the kept boxes'
indices (``output_bbox_indices``). Feed anchor and shape to ``fn.crop``/``fn.slice`` or
``fn.decoders.image_slice``.""",
    args=(Arg("thresholds", "floats", (0.0,), "Minimum IoU/overlap; one is picked at random per round."),
          Arg("threshold_type", "str", "iou", "'iou' or 'overlap' (fraction of the box inside the window).",
              choices=("iou", "overlap")),
          Arg("all_boxes_above_threshold", "bool", True, "Every box must pass the threshold (else any one)."),
          Arg("aspect_ratio", "floats", (1.0, 1.0), "[min, max] of the window's width / height."),
          Arg("scaling", "floats", (1.0, 1.0), "[min, max] of the window's size relative to the image."),
          Arg("allow_no_crop", "bool", True, "'No crop' is one of the options picked at random."),
          Arg("num_attempts", "int", 1, "Candidate windows per round.", min=1),
          Arg("total_num_attempts", "int", -1, "Candidates in all; then the best one is used (-1: no limit)."),
          Arg("bbox_layout", "str", "", "Box layout: an ordering of 'xyXY' or 'xyWH'; default from ltrb."),
          Arg("ltrb", "bool", True, "Deprecated: True means 'xyXY', False 'xyWH'."),
          Arg("shape_layout", "str", "", "Order of 'crop_shape' and 'input_shape': 'WH' (default) or 'HW'."),
          Arg("crop_shape", "ints", None, "Fixed window size in pixels (needs input_shape).", tensor=True),
          Arg("input_shape", "ints", None, "Image size in pixels, for crop_shape.", tensor=True),
          Arg("bbox_prune_threshold", "float", None, "Keep boxes with at least this fraction of their area inside "
                                                     "(default: keep those whose centre is inside).", min=0, max=1),
          Arg("output_bbox_indices", "bool", False, "Also output the indices of the kept boxes."),
          Arg("quiet", "bool", False, "Accepted for compatibility; no warnings are printed.")),
))
