"""``fn.segmentation.random_object_bbox``: the bounding box of a random object (blob) of a label mask.

Every dimension of the mask is spatial. Blobs are the face-connected regions of one label (4-connected
in 2-D, 6-connected in 3-D), found with OpenCV for 2-D masks and SciPy otherwise, within the extent of
the label, on the worker pool.
Per sample, with probability ``foreground_prob``:

* a class is drawn among the candidate ``classes`` (default: the labels present other than
  ``background``) with probability proportional to ``class_weights`` (default equal), among those
  that have at least one blob of at least ``threshold`` on every axis; of that class's blobs meeting
  ``threshold``, the ``k_largest`` by box volume are kept (ties keep the raster order of the blobs'
  first pixels) and one is drawn uniformly;
* with ``ignore_class``, the blobs of every class are pooled and one is drawn uniformly.

Otherwise, or when no blob qualifies, the box is the whole mask and the class is ``background``. The
class draw is a weighted draw without replacement (exponential keys, ``-log(u) / weight``) whose first
class with a qualifying blob is taken: that is the rejection of DALI's description, and blobs are
found only for the classes visited. Random values come from the per-sample counter-based generator
(seeds and checkpoints as for every random operator; not DALI's stream).
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.layouts import sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["RANDOM_OBJECT_BBOX"]

_OP = "segmentation.random_object_bbox"
#: Streams of ``rng.uniform``: the foreground draw and the blob draw; the class keys use the third.
_FOREGROUND, _BLOB, _CLASSES = 0, 1, 2


def blob_boxes(binary: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the face-connected blobs of a boolean array, int64 (blobs, ndim), in the raster
    order of their first elements.

    Labelling runs on the extent of the True elements only (objects are usually small); 2-D arrays are
    labelled by OpenCV, others by SciPy, and SciPy's ``find_objects`` gives the boxes.
    """
    from scipy import ndimage

    ndim = binary.ndim
    extents = [np.flatnonzero(binary.any(axis=tuple(a for a in range(ndim) if a != k))) for k in range(ndim)]
    if any(e.size == 0 for e in extents):
        return np.zeros((0, ndim), np.int64), np.zeros((0, ndim), np.int64)
    origin = np.array([e[0] for e in extents], np.int64)
    sub = binary[tuple(slice(e[0], e[-1] + 1) for e in extents)]
    if ndim == 2:
        import cv2

        count, labels = cv2.connectedComponents(np.ascontiguousarray(sub).view(np.uint8), connectivity=4,
                                                ltype=cv2.CV_32S)
        count -= 1
    else:
        labels, count = ndimage.label(sub, structure=ndimage.generate_binary_structure(ndim, 1))
    boxes = ndimage.find_objects(labels, count)
    starts = np.array([[s.start for s in box] for box in boxes], np.int64).reshape(count, ndim) + origin
    ends = np.array([[s.stop for s in box] for box in boxes], np.int64).reshape(count, ndim) + origin
    return starts, ends


def labels_of(mask: np.ndarray) -> np.ndarray:
    """The distinct labels of an integer mask, ascending (from a histogram when their range is small)."""
    lo, hi = int(mask.min()), int(mask.max())
    if hi - lo >= 1 << 16:
        return np.unique(mask)
    flat = mask.reshape(-1)
    if hi - lo < 256:  # OpenCV's 8-bit histogram is the cheapest pass (a wrapped difference is right mod 256)
        import cv2

        shifted = (flat - np.array(lo).astype(flat.dtype) if lo else flat).astype(np.uint8, copy=False)
        counts = cv2.calcHist([shifted.reshape(-1, 1)], [0], None, [256], [0, 256])
        return np.flatnonzero(counts.reshape(-1)) + lo
    return np.flatnonzero(np.bincount(flat.astype(np.int64) - lo, minlength=hi - lo + 1)) + lo


def _one_of(starts: np.ndarray, ends: np.ndarray, u: float) -> tuple[np.ndarray, np.ndarray]:
    """The box that a uniform value ``u`` in [0, 1) picks among several."""
    j = min(int(u * len(starts)), len(starts) - 1)
    return starts[j], ends[j]


class RandomObjectBbox(Operator):
    """``fn.segmentation.random_object_bbox``: the host implementation."""

    def __init__(self, node, build):
        super().__init__(node, build)
        given = {name for name in ("classes", "class_weights")
                 if name in node.arg_inputs or self.args.get(name) is not None}
        if self.args["ignore_class"] and (given or self.args["output_class"]):
            raise OpArgumentError(f"fn.{_OP}: 'classes', 'class_weights' and 'output_class' cannot be used when "
                                  f"'ignore_class' is True")
        k = self.args.get("k_largest")
        if k is not None and k < 1:
            raise OpArgumentError(f"fn.{_OP}: argument 'k_largest' must be at least 1, got {k}")

    def _classes(self, args, i: int, mask: np.ndarray, background: int) -> tuple[np.ndarray, np.ndarray]:
        """Sample ``i``'s candidate classes and their weights."""
        weights = None
        if args.given("class_weights"):
            weights = np.asarray(args.sample_value("class_weights", i), np.float64).reshape(-1)
        if args.given("classes"):
            classes = np.asarray(args.sample_value("classes", i), np.int64).reshape(-1)
        elif weights is not None:
            classes = np.arange(1, len(weights) + 1)
        else:
            classes = labels_of(mask)
            classes = classes[classes != background].astype(np.int64)
        if weights is None:
            weights = np.ones(len(classes))
        if len(weights) != len(classes):
            raise ValueError(f"fn.{_OP}: sample {i}: 'class_weights' has {len(weights)} values but there are "
                             f"{len(classes)} classes")
        if (weights < 0).any():
            raise ValueError(f"fn.{_OP}: sample {i}: 'class_weights' must not be negative, got {weights.tolist()}")
        return classes, weights

    def _background(self, args, i: int) -> int:
        if args.given("background"):
            return int(args.sample_value("background", i))
        if args.given("classes"):
            classes = np.asarray(args.sample_value("classes", i), np.int64).reshape(-1)
            if classes.size and (classes == 0).any():
                return int(classes.min()) - 1  # 0 is a class: the background is a label below all of them
        return 0

    def _threshold(self, args, i: int, ndim: int) -> np.ndarray:
        if not args.given("threshold"):
            return np.zeros(ndim, np.int64)
        t = np.asarray(args.sample_value("threshold", i), np.int64).reshape(-1)
        if t.size not in (1, ndim):
            raise ValueError(f"fn.{_OP}: sample {i}: 'threshold' must have 1 or {ndim} values (one per mask "
                             f"dimension), got {t.size}")
        return np.broadcast_to(t, (ndim,))

    def _qualifying(self, starts: np.ndarray, ends: np.ndarray, threshold: np.ndarray):
        """The blob boxes at least ``threshold`` large, the ``k_largest`` of them when set."""
        ok = ((ends - starts) >= threshold).all(axis=1)
        starts, ends = starts[ok], ends[ok]
        k = self.args.get("k_largest")
        if k is None or len(starts) <= k:
            return starts, ends
        order = np.argsort(-np.prod(ends - starts, axis=1), kind="stable")[:k]
        return starts[order], ends[order]

    def _pick(self, args, i: int, mask: np.ndarray, key: np.ndarray, foreground: bool, u_blob: float):
        """(start, end, class) of sample ``i``; ``foreground``: whether an object is drawn."""
        background = self._background(args, i)
        whole = (np.zeros(mask.ndim, np.int64), np.array(mask.shape, np.int64), background)
        if not foreground or mask.size == 0:
            return whole
        threshold = self._threshold(args, i, mask.ndim)
        if self.args["ignore_class"]:
            labels = labels_of(mask)
            found = [blob_boxes(mask == c) for c in labels[labels != background]]
            if found:
                starts, ends = self._qualifying(np.concatenate([f[0] for f in found]),
                                                np.concatenate([f[1] for f in found]), threshold)
                if len(starts):
                    return _one_of(starts, ends, u_blob) + (background,)
            return whole
        classes, weights = self._classes(args, i, mask, background)
        live = weights > 0
        classes, weights = classes[live], weights[live]
        u = rng.uniform(key, len(classes), _CLASSES)[0]
        for c in classes[np.argsort(-np.log1p(-u) / weights, kind="stable")]:
            starts, ends = self._qualifying(*blob_boxes(mask == c), threshold)
            if len(starts):
                return _one_of(starts, ends, u_blob) + (int(c),)
        return whole

    def run(self, ctx, inputs, args):
        masks = inputs[0]
        if masks.np_dtype.kind not in "iub":
            raise TypeError(f"fn.{_OP}: the mask must hold integer labels, got {masks.np_dtype}; "
                            f"convert with fn.cast")
        samples = masks.samples()
        n = len(samples)
        keys = ctx.sample_keys(self.seed)
        foreground = rng.uniform(keys, 1, _FOREGROUND)[:, 0] < args.per_sample("foreground_prob", np.float64)
        u_blob = rng.uniform(keys, 1, _BLOB)[:, 0]
        picks: list = [None] * n

        def work(start: int, stop: int) -> None:
            for i in range(start, stop):
                try:
                    picks[i] = self._pick(args, i, np.asarray(samples[i]), keys[i:i + 1], bool(foreground[i]),
                                          u_blob[i])
                except Exception as e:
                    e.add_note(f"fn.{_OP}: {sample_name(masks.source_info, i)}, mask shape {samples[i].shape}")
                    raise

        ctx.parallel_for(work, n)
        starts = [p[0].astype(np.int32) for p in picks]
        ends = [p[1].astype(np.int32) for p in picks]
        fmt = self.args["format"]
        if fmt == "box":
            out = [TensorListCPU([np.concatenate([s, e]) for s, e in zip(starts, ends)])]
        elif fmt == "start_end":
            out = [TensorListCPU(starts), TensorListCPU(ends)]
        else:
            out = [TensorListCPU(starts), TensorListCPU([e - s for s, e in zip(starts, ends)])]
        if self.args["output_class"]:
            out.append(TensorListCPU(np.array([p[2] for p in picks], np.int32).reshape(n)))
        return out if len(out) > 1 else out[0]


RANDOM_OBJECT_BBOX = register(OpSchema(
    name=_OP, impl=RandomObjectBbox, devices=("cpu",),
    num_outputs=lambda a: (1 if a.get("format") == "box" else 2) + (1 if a.get("output_class") else 0),
    doc="""The bounding box of a randomly chosen object (connected blob of one label) of an integer mask.

Input: an integer label mask; every dimension is spatial (a trailing channel of 1 is a dimension
too). Outputs (int32, one value per dimension): ``format`` anchor_shape (two outputs), start_end
(two outputs) or box (start and end concatenated); with ``output_class`` a last output holds the
chosen class (int32 scalar), or ``background`` when the box is the whole mask. See
``jaxdali.ops.detection.random_object_bbox`` for the draw; blobs are face-connected (4-neighbours
in 2-D).""",
    args=(
        Arg("background", "int", None, "Background label (default 0, or one below the smallest class when 0 is "
            "one of the classes).", tensor=True),
        Arg("classes", "ints", None, "Foreground labels to draw from (default: every label but background).",
            tensor=True),
        Arg("class_weights", "floats", None, "Relative probabilities of the classes (default equal; without "
            "classes, the classes are 1, 2, ...).", tensor=True),
        Arg("foreground_prob", "float", 1.0, "Probability of drawing an object rather than the whole mask.",
            tensor=True, min=0),
        Arg("format", "str", "anchor_shape", "Output format: anchor_shape, start_end or box.",
            choices=("anchor_shape", "start_end", "box")),
        Arg("ignore_class", "bool", False, "Draw among the blobs of all classes at once (no class draw)."),
        Arg("k_largest", "int", None, "Keep only the k blobs with the largest boxes (after the threshold)."),
        Arg("output_class", "bool", False, "Add an output with the chosen class."),
        Arg("threshold", "ints", None, "Minimum box size per dimension (one value for all, or one per dimension).",
            tensor=True),
        Arg("cache_objects", "bool", False, "Cache the blobs of inputs seen before (in DALI).", hint=True),
    ),
))
