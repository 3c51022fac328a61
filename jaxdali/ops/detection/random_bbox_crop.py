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

import dataclasses

import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.detection.box_encoder import iou_matrix
from jaxdali.ops.detection.rows import split_rows
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["BoxLayout", "RANDOM_BBOX_CROP"]

_F32 = np.float32
#: Without total_num_attempts DALI searches forever; we stop with an error after this many candidates.
_SEARCH_LIMIT = 10_000
#: A sample's state after the first round (see ``RandomBBoxCrop._first_round``).
_CROP, _NO_CROP, _UNRESOLVED = 0, 1, 2
#: A window's [x, y] columns repeated for both corners of an ltrb box.
_CORNERS = [0, 1, 0, 1]


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
        self.identity = self.order == [0, 1, 2, 3]  # no column permutation (a fancy index costs ~10 us)

    def to_ltrb(self, boxes: np.ndarray) -> np.ndarray:
        out = boxes.astype(_F32) if self.identity else boxes[:, self.order].astype(_F32)
        if self.sizes:
            out[:, 2:] += out[:, :2]
        return out

    def from_ltrb(self, ltrb: np.ndarray) -> np.ndarray:
        values = ltrb.copy()
        if self.sizes:
            values[:, 2:] -= values[:, :2]
        if self.identity:
            return values
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
        self.option_thresholds = np.array([t if t is not None else 0.0 for t in self.options], _F32)
        self.option_no_crop = np.array([t is None for t in self.options])
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

    def _first_round(self, keys: np.ndarray, rows: "_BoxRows") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Round 0 of every sample's search at once (most samples end there), relative windows only.

        Returns each sample's window (n, 4) and state (n,) (``_CROP``, ``_NO_CROP`` or ``_UNRESOLVED``:
        later rounds are needed) and whether each box row stays (for the ``_CROP`` samples)."""
        n, attempts = len(rows.counts), self.args["num_attempts"]
        total_limit = self.args["total_num_attempts"]
        count = min(attempts, total_limit) if total_limit > 0 else attempts
        draws = rng.uniform(keys, 1 + 4 * attempts, stream=0)
        options = np.minimum((draws[:, 0] * len(self.options)).astype(np.int64), len(self.options) - 1)
        windows, usable = self._windows(draws[:, 1:1 + 4 * count].reshape(n * count, 4), None, -1)
        windows, usable = windows.reshape(n, count, 4), usable.reshape(n, count)
        width = max(int(rows.counts.max(initial=0)), 1)
        full = bool((rows.counts == width).all())  # every sample has the same number (> 0) of boxes
        if full:
            padded = rows.ltrb.reshape(n, width, 4)
        else:
            padded = np.zeros((n, width, 4), _F32)
            present = np.zeros((n, width), bool)
            padded[rows.sample, rows.position] = rows.ltrb
            present[rows.sample, rows.position] = True
        scores = _batched_scores(windows, padded, self.args["threshold_type"])
        above = scores >= self.option_thresholds[options][:, None, None]
        kept = self._kept_batched(windows, padded)
        if self.args["all_boxes_above_threshold"]:
            ok_t = (above if full else above | ~present[:, None, :]).all(2)
        else:
            ok_t = (above if full else above & present[:, None, :]).any(2)
        if full:
            ok = usable & ok_t & kept.any(2)
        else:
            kept &= present[:, None, :]
            ok = usable & np.where(present.any(1)[:, None], ok_t & kept.any(2), True)
        hit = ok.argmax(1)
        no_crop = self.option_no_crop[options]
        state = np.where(no_crop, _NO_CROP, np.where(ok.any(1), _CROP, _UNRESOLVED))
        kept_rows = kept[rows.sample, hit[rows.sample], rows.position]
        return windows[np.arange(n), hit], state, kept_rows

    def _kept_batched(self, windows: np.ndarray, boxes: np.ndarray) -> np.ndarray:
        """(n, k, m) whether each sample's boxes stay in each of its windows."""
        if self.prune is None:  # coordinate by coordinate: NumPy is slow on a trailing axis of 2
            cx, cy = (((boxes[:, :, k] + boxes[:, :, k + 2]) * _F32(0.5))[:, None, :] for k in (0, 1))
            x0, y0, x1, y1 = (windows[:, :, k, None] for k in range(4))
            return (cx >= x0) & (cy >= y0) & (cx <= x1) & (cy <= y1)
        return _batched_scores(windows, boxes, "overlap") >= self.prune

    # -- the batch --------------------------------------------------------------------------------------

    def _rows(self, boxes: TensorListCPU, n: int) -> "_BoxRows":
        """Every sample's boxes as ltrb float32 rows, checked to lie in the normalised image."""
        dense = boxes.dense()
        if dense is not None and n:
            if dense.ndim != 3 or dense.shape[2] != 4:
                raise ValueError(f"fn.{self.op}: sample 0: the boxes must have shape (N, 4), got {dense.shape[1:]}")
            counts = np.full(n, dense.shape[1], np.int64)
            raw = dense.reshape(-1, 4)
        else:
            raws = [np.asarray(sample) for sample in boxes.samples()]
            for i, raw in enumerate(raws):
                if raw.ndim != 2 or raw.shape[1] != 4:
                    raise ValueError(f"fn.{self.op}: sample {i}: the boxes must have shape (N, 4), got {raw.shape}")
            counts = np.array([len(r) for r in raws], np.int64)
            raw = np.concatenate(raws) if n else np.zeros((0, 4), _F32)
        ltrb = self.layout.to_ltrb(raw)
        sample = np.repeat(np.arange(n), counts)
        # DALI accepts a box with right < left; the whole-array bounds first (NumPy is slow per row of 4)
        bad = np.flatnonzero((ltrb < 0).any(1) | (ltrb > 1).any(1)) if ltrb.size and (
            ltrb.min() < 0 or ltrb.max() > 1) else ()
        if len(bad):
            raise ValueError(f"fn.{self.op}: sample {int(sample[bad[0]])}: box {raw[bad[0]].tolist()} "
                             f"({self.layout.layout}) is not inside the normalised image [0, 1]")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]) if n else counts
        return _BoxRows(ltrb, sample, np.arange(len(ltrb)) - starts[sample], counts, starts)

    def _labels(self, labels: TensorListCPU, rows: "_BoxRows") -> np.ndarray:
        """Every sample's labels stacked (one per box row)."""
        dense = labels.dense()
        if dense is not None and dense.ndim >= 2 and (rows.counts == dense.shape[1]).all():
            return dense.reshape((-1,) + dense.shape[2:])
        samples = labels.samples()
        for i, lab in enumerate(samples):
            if len(lab) != rows.counts[i]:
                raise ValueError(f"fn.{self.op}: sample {i}: {len(lab)} labels for {rows.counts[i]} boxes")
        return np.concatenate([np.asarray(lab) for lab in samples]) if samples else np.zeros(0, np.int32)

    def run(self, ctx, inputs, args):
        n = ctx.batch_size
        keys = ctx.sample_keys(self.seed)
        rows = self._rows(inputs[0], n)
        if self.absolute:
            windows = np.zeros((n, 4), _F32)
            state, kept = np.full(n, _UNRESOLVED), np.zeros(len(rows.ltrb), bool)
        else:
            windows, state, kept = self._first_round(keys, rows)
        for i in np.flatnonzero(state == _UNRESOLVED):
            mine = slice(rows.starts[i], rows.starts[i] + rows.counts[i])
            found = self._search(keys[i:i + 1], rows.ltrb[mine], args, i)
            state[i] = _NO_CROP if found is None else _CROP
            if found is not None:
                windows[i], kept[mine] = found
        no_crop = state == _NO_CROP
        windows[no_crop] = (0, 0, 1, 1)
        kept[no_crop[rows.sample]] = True
        anchors, shapes = windows[:, :2], windows[:, 2:] - windows[:, :2]
        # Row by row with whole rows of 4 (NumPy is slow on boolean row masks and on broadcasts over
        # trailing axes of 2): each kept box's window corner and size repeated for both of its corners.
        kept_sample = rows.sample[kept]
        cropped = rows.ltrb.compress(kept, axis=0)
        cropped -= anchors[:, _CORNERS].take(kept_sample, axis=0)
        cropped /= shapes[:, _CORNERS].take(kept_sample, axis=0)
        cropped = np.clip(cropped, 0, 1, out=cropped).astype(_F32, copy=False)
        if self.absolute:
            image = np.stack([self._xy(args, "input_shape", i) for i in range(n)]) if n else np.zeros((0, 2))
            crop = np.stack([self._xy(args, "crop_shape", i) for i in range(n)]) if n else np.zeros((0, 2))
            anchors = np.rint(anchors * image).astype(_F32)
            shapes = np.where(no_crop[:, None], image, crop).astype(_F32)
        counts = np.bincount(kept_sample, minlength=n)
        outputs = [TensorListCPU(np.ascontiguousarray(anchors, _F32)), TensorListCPU(np.ascontiguousarray(shapes, _F32)),
                   TensorListCPU(split_rows(self.layout.from_ltrb(cropped), counts))]
        if len(inputs) > 1:
            outputs.append(TensorListCPU(split_rows(self._labels(inputs[1], rows).compress(kept, axis=0), counts)))
        if self.args["output_bbox_indices"]:
            outputs.append(TensorListCPU(split_rows(rows.position[kept].astype(np.int32), counts)))
        return outputs


@dataclasses.dataclass
class _BoxRows:
    """A batch's boxes stacked: ``ltrb`` (total, 4), each row's ``sample`` and ``position`` in it, and
    each sample's ``counts`` and ``starts``."""

    ltrb: np.ndarray
    sample: np.ndarray
    position: np.ndarray
    counts: np.ndarray
    starts: np.ndarray


def _batched_scores(windows: np.ndarray, boxes: np.ndarray, kind: str) -> np.ndarray:
    """(n, k, m) IoU (or overlap: share of the box inside) of each sample's k windows with its m boxes."""
    # contiguous coordinate columns: NumPy is slow on a trailing axis of 4
    wl, wt, wr, wb = (np.ascontiguousarray(windows[:, :, k, None]) for k in range(4))
    bl, bt, br, bb = (np.ascontiguousarray(boxes[:, None, :, k]) for k in range(4))
    w = np.minimum(wr, br)
    w -= np.maximum(wl, bl)
    h = np.minimum(wb, bb)
    h -= np.maximum(wt, bt)
    inter = np.maximum(w, 0, out=w)
    inter *= np.maximum(h, 0, out=h)
    box_area = (br - bl) * (bb - bt)
    if kind == "overlap":
        denominator = np.broadcast_to(box_area, inter.shape)
    else:
        denominator = (wr - wl) * (wb - wt) + box_area
        denominator -= inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, inter / denominator, 0).astype(_F32)


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
