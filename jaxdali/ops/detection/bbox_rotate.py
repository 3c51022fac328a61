"""``fn.bbox_rotate``: boxes that stay on their objects when the image is rotated by ``fn.rotate``.

Each box's corners go through the rotation that ``fn.rotate`` applies with the same ``angle``,
``size`` and ``keep_size`` (counter-clockwise about the image centre, onto a canvas of ``rotate``'s
output size), and the box becomes, by ``mode``:

* ``expand``: the bounding box of the rotated corners (it encloses the rotated box);
* ``fixed``: the original width and height (swapped past 45 degrees, where the box is nearer to a
  quarter turn), centred on the rotated box's centre;
* ``halfway``: the mean of those two sizes, on the same centre.

Boxes are then clipped to the canvas; a box keeping less than ``remove_threshold`` of its area is
removed, with its label when ``labels`` are given. All rows of the batch are transformed by one
vectorised NumPy expression.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.detection.rows import Rows, split_rows
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, REQUIRED, register
from jaxdali.ops.warp import rotated_size, rotation_matrices
from jaxdali.tensors import TensorListCPU

__all__ = ["BBOX_ROTATE"]

_OP = "bbox_rotate"
_LAYOUTS = ("xyXY", "xyWH")


class BboxRotate(Operator):
    """``fn.bbox_rotate``: the host implementation."""

    def __init__(self, node, build):
        super().__init__(node, build)
        if self.args["bbox_layout"] not in _LAYOUTS:
            raise OpArgumentError(f"fn.{_OP}: argument 'bbox_layout' must be one of {list(_LAYOUTS)}, "
                                  f"got {self.args['bbox_layout']!r}")
        shape_layout = self.args["shape_layout"]
        if "H" not in shape_layout or "W" not in shape_layout or len(set(shape_layout)) != len(shape_layout):
            raise OpArgumentError(f"fn.{_OP}: argument 'shape_layout' must name the axes H and W once each, "
                                  f"got {shape_layout!r}")

    def _canvas(self, args, n: int, in_hw: np.ndarray, angle: np.ndarray) -> np.ndarray:
        """(n, 2) height and width of the rotated image, as ``fn.rotate`` makes it."""
        size = _vectors(args, "size", n)
        if size.shape[1] not in (0, 2):
            raise ValueError(f"fn.{_OP}: argument 'size' must have 2 elements [height, width] or none, "
                             f"got {size.shape[1]}")
        if size.shape[1] == 2:
            size = np.floor(size + 0.5)
            if size.min() <= 0:
                raise ValueError(f"fn.{_OP}: argument 'size' must be positive, got {size.astype(int).tolist()}")
            return size
        if self.args["keep_size"]:
            return in_hw.astype(np.float64)
        return np.stack(rotated_size(in_hw[:, 0], in_hw[:, 1], angle), axis=1).astype(np.float64)

    def _input_hw(self, args, n: int) -> np.ndarray:
        layout = self.args["shape_layout"]
        shape = _vectors(args, "input_shape", n)
        if shape.shape[1] < len(layout):
            raise ValueError(f"fn.{_OP}: argument 'input_shape' has {shape.shape[1]} values, fewer than the "
                             f"{len(layout)} axes of shape_layout {layout!r}")
        hw = shape[:, [layout.index("H"), layout.index("W")]]
        if (hw <= 0).any():
            raise ValueError(f"fn.{_OP}: argument 'input_shape' must give a positive height and width, "
                             f"got {hw[(hw <= 0).any(axis=1)][0].astype(int).tolist()}")
        return hw

    def run(self, ctx, inputs, args):
        boxes = inputs[0]
        n = len(boxes)
        if boxes.np_dtype != np.float32:
            raise TypeError(f"fn.{_OP}: the boxes must be float32, got {boxes.np_dtype}; convert with fn.cast")
        rows = Rows.of(boxes, _OP, 4, what="boxes input")
        angle = args.per_sample("angle", np.float32)
        in_hw = self._input_hw(args, n)
        canvas = self._canvas(args, n, in_hw, angle)
        # fn.rotate's output-to-input matrices [[c, -s], [s, c]] | t: input points go back through the
        # transposed rotation. A rectangle's rotated corners span centre +- |R| @ half-size.
        m = rotation_matrices(in_hw, canvas, angle)
        rot = m[:, :, :2].reshape(n, 4)
        per_sample = np.concatenate([rot, np.abs(rot), m[:, :, 2], in_hw[:, ::-1], canvas[:, ::-1]], axis=1)
        # one coordinate at a time over all rows (NumPy is slow on rows of 2 values), float64
        r00, r01, r10, r11, a00, a01, a10, a11, sx, sy, w_in, h_in, w_out, h_out = per_sample.T[:, rows.sample]
        x0, y0, x1, y1 = rows.values.T.astype(np.float64)
        if self.args["bbox_layout"] == "xyWH":
            x1 += x0
            y1 += y0
        if self.args["bbox_normalized"]:
            x0, x1, y0, y1 = x0 * w_in, x1 * w_in, y0 * h_in, y1 * h_in
        width, height = x1 - x0, y1 - y0
        dx, dy = (x0 + x1) / 2 - sx, (y0 + y1) / 2 - sy
        cx, cy = r00 * dx + r10 * dy, r01 * dx + r11 * dy
        ex, ey = a00 * width + a10 * height, a01 * width + a11 * height
        mode = self.args["mode"]
        if mode != "expand":
            # Past 45 degrees the box is nearer to a quarter turn: its width and height trade places.
            quarter = a01 > a00
            width, height = np.where(quarter, height, width), np.where(quarter, width, height)
            ex, ey = (width, height) if mode == "fixed" else ((width + ex) / 2, (height + ey) / 2)
        lo_x, hi_x, lo_y, hi_y = cx - ex / 2, cx + ex / 2, cy - ey / 2, cy + ey / 2
        out = np.empty((len(cx), 4), np.float32)
        clipped = [np.clip(lo_x, 0, w_out), np.clip(lo_y, 0, h_out), np.clip(hi_x, 0, w_out), np.clip(hi_y, 0, h_out)]
        with np.errstate(divide="ignore", invalid="ignore"):
            kept = (clipped[2] - clipped[0]) * (clipped[3] - clipped[1]) / ((hi_x - lo_x) * (hi_y - lo_y))
        keep = ~(kept < self.args["remove_threshold"])
        if self.args["bbox_normalized"]:
            clipped = [clipped[0] / w_out, clipped[1] / h_out, clipped[2] / w_out, clipped[3] / h_out]
        if self.args["bbox_layout"] == "xyWH":
            clipped[2:] = [clipped[2] - clipped[0], clipped[3] - clipped[1]]
        for k in range(4):
            out[:, k] = clipped[k]
        result = [rows.batch(out) if keep.all() else _split_kept(out, rows.sample, keep, n, (4,), boxes.layout())]
        if len(inputs) > 1:
            result.append(_labels_kept(inputs[1], rows, keep, n))
        return result if len(result) > 1 else result[0]


def _vectors(args, name: str, n: int) -> np.ndarray:
    """A list argument (constant or per sample, the same length in every sample) as an (n, length) array."""
    if args.is_per_sample(name):
        return args.per_sample(name, np.float64, (-1,))
    value = np.asarray(args[name] if args.given(name) else (), np.float64).reshape(1, -1)
    return np.broadcast_to(value, (n, value.shape[1]))


def _split_kept(values: np.ndarray, sample: np.ndarray, keep: np.ndarray, n: int, row_shape: tuple,
                layout: str) -> TensorListCPU:
    """The kept rows of every sample, as a batch of (rows, *row_shape) samples."""
    counts = np.bincount(sample[keep], minlength=n)
    parts = split_rows(values[keep], counts)
    return TensorListCPU([p.reshape((-1,) + row_shape) for p in parts], layout)


def _labels_kept(labels: TensorListCPU, rows: Rows, keep: np.ndarray, n: int) -> TensorListCPU:
    shapes = [tuple(s) for s in labels.shape()]
    counts = np.bincount(rows.sample, minlength=n)
    for i, s in enumerate(shapes):
        if len(s) not in (1, 2) or s[0] != counts[i] or (len(s) == 2 and s[1] != 1):
            raise ValueError(f"fn.{_OP}: labels of sample {i} must have shape [{counts[i]}] or [{counts[i]}, 1] "
                             f"(one per box), got {list(s)}")
    values = np.concatenate([np.asarray(x).reshape(-1) for x in labels.samples()]) if n else np.zeros(0)
    row_shape = shapes[0][1:] if shapes else ()
    if len({s[1:] for s in shapes}) > 1:
        raise ValueError(f"fn.{_OP}: labels must all be [N] or all [N, 1], got sample shapes {sorted(set(shapes))}")
    return _split_kept(values.astype(labels.np_dtype), rows.sample, keep, n, row_shape, labels.layout())


BBOX_ROTATE = register(OpSchema(
    name=_OP, impl=BboxRotate, devices=("cpu",), min_inputs=1, max_inputs=2,
    num_outputs=lambda args, num_inputs: 2 if num_inputs > 1 else 1,
    doc="""Moves bounding boxes the way ``fn.rotate`` moves the image under them.

Input 0: float32 boxes [N, 4] (``bbox_layout`` xyXY or xyWH; normalised to [0, 1] unless
``bbox_normalized=False``, then in pixels). Optional input 1: labels [N] or [N, 1], filtered with
the boxes (second output). Give the same ``angle``, ``size`` and ``keep_size`` as to ``fn.rotate``,
and the image shape before rotation as ``input_shape`` (axes named by ``shape_layout``). ``mode``:
expand (enclose the rotated box), fixed (keep its size) or halfway. Boxes are clipped to the rotated
canvas and removed when less than ``remove_threshold`` of their area remains.""",
    args=(
        Arg("angle", "float", REQUIRED, "Rotation angle in degrees (counter-clockwise, as in fn.rotate).", tensor=True),
        Arg("input_shape", "ints", REQUIRED, "Shape of the image before rotation, axes as in shape_layout.",
            tensor=True),
        Arg("shape_layout", "str", "HW", "Names of the axes of input_shape (H and W are used)."),
        Arg("bbox_layout", "str", "xyXY", "Box format: xyXY (corners) or xyWH (corner and size)."),
        Arg("bbox_normalized", "bool", True, "Boxes are relative to the image size ([0, 1]); else in pixels."),
        Arg("keep_size", "bool", False, "The rotated canvas keeps the input size (fn.rotate's keep_size)."),
        Arg("size", "floats", (), "Canvas [height, width] of the rotated image (fn.rotate's size).", tensor=True),
        Arg("mode", "str", "expand", "expand, fixed or halfway (see the operator).",
            choices=("expand", "fixed", "halfway")),
        Arg("remove_threshold", "float", 0.1, "Boxes keeping less than this fraction of their area are removed.",
            min=0, max=1),
    ),
))
