"""Box and point operators: ``fn.bb_flip``, ``fn.bbox_paste``, ``fn.coord_flip``, ``fn.coord_transform``.

Boxes and points are rows along the last axis of float32 samples (any number per sample). Every
operator runs one NumPy expression over all rows of the batch (``Rows``), with per-sample
arguments repeated per row, in float32 as DALI computes them, so results equal DALI's bit for bit.
Where DALI has a GPU version (bb_flip, coord_flip, coord_transform), ``device="gpu"`` runs the host
implementation and the result moves to the pipeline's device.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.detection.rows import Rows
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, REQUIRED, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, to_numpy_type

__all__ = ["BB_FLIP", "BBOX_PASTE", "COORD_FLIP", "COORD_TRANSFORM"]

_F32 = np.float32


def _float_rows(op: str, tl: TensorListCPU, width: int | None) -> Rows:
    if tl.np_dtype != np.float32:
        raise TypeError(f"fn.{op}: the input must be float32, got {tl.np_dtype}; convert with fn.cast")
    return Rows.of(tl, op, width)


def _flags(args, name: str, rows: Rows) -> np.ndarray | slice | None:
    """Rows to flip: a mask per row, or ``slice(None)`` (all) / None (none) for a constant flag."""
    if args.is_per_sample(name):
        return rows.per_row(args.per_sample(name, np.int32) != 0)
    return slice(None) if args[name] else None


def _per_row(args, name: str, rows: Rows) -> np.ndarray:
    """A float32 argument for every row: (total,) per sample, or a scalar when constant."""
    if args.is_per_sample(name):
        return rows.per_row(args.per_sample(name, _F32))
    return _F32(args[name])


class BbFlip(Operator):
    """``fn.bb_flip``: mirrors normalised boxes horizontally and/or vertically."""

    def run(self, ctx, inputs, args):
        rows = _float_rows("bb_flip", inputs[0], 4)
        b = rows.values.copy()
        if not self.args["ltrb"]:  # DALI flips corners: the sizes go through right - left (float32 rounding)
            b[:, 2:] += b[:, :2]
        for axis, name in ((0, "horizontal"), (1, "vertical")):
            flip = _flags(args, name, rows)
            if flip is not None:  # both sides are computed before either is stored
                b[flip, axis], b[flip, axis + 2] = _F32(1) - b[flip, axis + 2], _F32(1) - b[flip, axis]
        if not self.args["ltrb"]:
            b[:, 2:] -= b[:, :2]
        return rows.batch(b)


class BboxPaste(Operator):
    """``fn.bbox_paste``: box coordinates after pasting the image onto a canvas ``ratio`` times larger."""

    def run(self, ctx, inputs, args):
        rows = _float_rows("bbox_paste", inputs[0], 4)
        ratio = _per_row(args, "ratio", rows)
        if (ratio < 1).any():
            raise OpArgumentError(f"fn.bbox_paste: argument 'ratio' must be >= 1 (the canvas is at least as large as "
                                  f"the image), got {float(np.atleast_1d(ratio)[np.atleast_1d(ratio) < 1][0])}")
        scale = np.reshape(_F32(1) / ratio, (-1, 1))
        margin = np.reshape(ratio - _F32(1), (-1, 1))  # canvas size not covered by the image, in image sizes
        paste_x, paste_y = np.broadcast_arrays(_per_row(args, "paste_x", rows), _per_row(args, "paste_y", rows))
        offset = np.stack([paste_x.reshape(-1), paste_y.reshape(-1)], 1) * margin * scale
        b = rows.values
        out = np.empty_like(b)
        out[:, :2] = b[:, :2] * scale + offset
        if self.args["ltrb"]:
            out[:, 2:] = b[:, 2:] * scale + offset
        else:
            out[:, 2:] = b[:, 2:] * scale
        return rows.batch(out)


class CoordFlip(Operator):
    """``fn.coord_flip``: mirrors coordinates about a per-sample centre along x, y and/or z."""

    def run(self, ctx, inputs, args):
        rows = _float_rows("coord_flip", inputs[0], None)
        d = rows.values.shape[1]
        if not 1 <= d <= 3:
            raise ValueError(f"fn.coord_flip: points must have 1 to 3 coordinates, got {d}")
        layout = self.args.get("layout") or "xyz"[:d]
        if len(layout) != d or set(layout) - set("xyz") or len(set(layout)) != d:
            raise OpArgumentError(f"fn.coord_flip: argument 'layout' must name each of the {d} coordinates once with "
                                  f"x, y, z, got {layout!r}")
        p = rows.values.copy()
        for axis, name in enumerate(layout):
            flip = _flags(args, f"flip_{name}", rows)
            if flip is not None:
                centre = np.broadcast_to(_per_row(args, f"center_{name}", rows), p.shape[:1])
                p[flip, axis] = _F32(2) * centre[flip] - p[flip, axis]
        return rows.batch(p)


class CoordTransform(Operator):
    """``fn.coord_transform``: ``M @ p + T`` for every point (the last axis holds the coordinates)."""

    _TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.float32))

    def __init__(self, node, build):
        super().__init__(node, build)
        given = {a for a in ("M", "T", "MT") if a in node.arg_inputs or node.args.get(a) is not None}
        if "MT" in given and given & {"M", "T"}:
            raise OpArgumentError("fn.coord_transform: give 'MT', or 'M' and/or 'T', not both")
        self.given = given

    def _matrix(self, mt, m, t, d: int) -> np.ndarray:
        """One (d_out, d + 1) float32 [M | T] from flat ``MT``, or ``M`` and ``T`` (None: not given)."""
        if "MT" in self.given:
            if mt.size % (d + 1):
                raise OpArgumentError(f"fn.coord_transform: argument 'MT' has {mt.size} elements, which is not a "
                                      f"multiple of {d + 1} (points of {d} coordinates, plus the translation)")
            return mt.reshape(-1, d + 1)
        m = np.ones(1, _F32) if m is None else m
        if m.size == 1:
            m = np.eye(d, dtype=_F32) * m[0]
        elif m.size % d:
            raise OpArgumentError(f"fn.coord_transform: argument 'M' has {m.size} elements, which is not a "
                                  f"multiple of the {d} coordinates of the points")
        m = m.reshape(-1, d)
        t = np.zeros(len(m), _F32) if t is None else t
        if t.size == 1:
            t = np.full(len(m), t[0], _F32)
        if t.size != len(m):
            raise OpArgumentError(f"fn.coord_transform: argument 'T' has {t.size} elements for {len(m)} output "
                                  f"coordinates")
        return np.concatenate([m, t[:, None]], axis=1)

    def _matrices(self, args, n: int, d: int) -> np.ndarray:
        """(d_out, d + 1) float32 [M | T] for every sample when no argument is per sample, else
        (n, d_out, d + 1)."""
        def value(name, i):
            if name not in self.given:
                return None
            return np.asarray(args.sample_value(name, i) if args.is_per_sample(name) else args[name], _F32).reshape(-1)

        if not any(args.is_per_sample(name) for name in self.given):
            return self._matrix(value("MT", 0), value("M", 0), value("T", 0), d)
        out = [self._matrix(value("MT", i), value("M", i), value("T", i), d) for i in range(n)]
        shapes = {m.shape for m in out}
        if len(shapes) > 1:
            raise ValueError(f"fn.coord_transform: the samples' matrices give different output dimensions, "
                             f"{sorted(shapes)}")
        return np.stack(out) if out else np.zeros((0, d, d + 1), _F32)

    def run(self, ctx, inputs, args):
        tl = inputs[0]
        if tl.np_dtype not in self._TYPES:
            raise TypeError(f"fn.coord_transform: input type {tl.np_dtype} is not supported; use float32 or an "
                            f"integer type up to 32 bits")
        if tl.ndim() < 2:
            raise ValueError(f"fn.coord_transform: the input must have at least 2 dimensions (points x coordinates), "
                             f"got {tl.ndim()}")
        out_dtype = np.dtype(to_numpy_type(self.args["dtype"]))
        if out_dtype not in (tl.np_dtype, np.dtype(np.float32)):
            raise TypeError(f"fn.coord_transform: argument 'dtype' must be FLOAT or the input type "
                            f"({tl.np_dtype}), got {out_dtype}")
        rows = Rows.of(tl, "coord_transform", None)
        n, d = len(rows.shapes), rows.values.shape[1]
        mt = self._matrices(args, n, d)
        mt = mt[None] if mt.ndim == 2 else rows.per_row(mt)  # one matrix broadcasts over every row
        # one output coordinate at a time over contiguous coordinate columns (NumPy is slow on rows of
        # 2 or 3 values); each product is rounded on its own, then added, as DALI sums them
        columns = np.ascontiguousarray(rows.values.T, dtype=_F32)
        res = np.empty((mt.shape[1], columns.shape[1]), _F32)
        for o, acc in enumerate(res):
            np.multiply(columns[0], mt[:, o, 0], out=acc)
            for k in range(1, d):
                acc += columns[k] * mt[:, o, k]
            acc += mt[:, o, d]
        res = res.T
        if out_dtype.kind in "iu":
            info = np.iinfo(out_dtype)
            res = np.clip(np.rint(res), info.min, info.max)
        return rows.batch(res.astype(out_dtype, copy=False))


_FLIP_ARGS = tuple(
    arg for axis, flip in (("x", 1), ("y", 0), ("z", 0))
    for arg in (Arg(f"flip_{axis}", "int", flip, f"Flip the {axis} coordinate (0 or 1).", tensor=True, min=0, max=1),
                Arg(f"center_{axis}", "float", 0.5, f"Centre of the {axis} flip.", tensor=True)))

BB_FLIP = register(OpSchema(
    name="bb_flip", devices=("cpu", "gpu"), impl=BbFlip,
    doc="Flips normalised boxes ([x, y, w, h], or [l, t, r, b] with ``ltrb``) horizontally and/or vertically "
        "within the [0, 1] image. Input: float32 rows of 4 values.",
    args=(Arg("horizontal", "int", 1, "Flip horizontally (0 or 1).", tensor=True, min=0, max=1),
          Arg("vertical", "int", 0, "Flip vertically (0 or 1).", tensor=True, min=0, max=1),
          Arg("ltrb", "bool", False, "Boxes are [left, top, right, bottom] (default: [x, y, width, height]).")),
))

BBOX_PASTE = register(OpSchema(
    name="bbox_paste", impl=BboxPaste,
    doc="Normalised box coordinates after the image is pasted onto a canvas ``ratio`` times larger at "
        "(``paste_x``, ``paste_y``) (0: left/top, 1: right/bottom), as ``fn.paste`` does to the image.",
    args=(Arg("ratio", "float", REQUIRED, "Canvas size / image size (>= 1).", tensor=True),
          Arg("paste_x", "float", 0.5, "Horizontal paste position in [0, 1].", tensor=True),
          Arg("paste_y", "float", 0.5, "Vertical paste position in [0, 1].", tensor=True),
          Arg("ltrb", "bool", False, "Boxes are [left, top, right, bottom] (default: [x, y, width, height]).")),
))

COORD_FLIP = register(OpSchema(
    name="coord_flip", devices=("cpu", "gpu"), impl=CoordFlip,
    doc="Mirrors float32 point coordinates (rows of 1 to 3 values) about per-sample centres: "
        "``c' = 2 * center - c`` for each flipped axis.",
    args=(Arg("layout", "str", "", "Order of the coordinates, e.g. 'xy', 'yx', 'xyz'; default 'x', 'xy' or "
                                   "'xyz' by their number."),) + _FLIP_ARGS,
))

COORD_TRANSFORM = register(OpSchema(
    name="coord_transform", devices=("cpu", "gpu"), impl=CoordTransform,
    doc="Applies the affine map ``M @ p + T`` (or ``MT = [M | T]``, e.g. from ``fn.transforms.*``) to every "
        "point; the last axis holds the coordinates. ``M`` may be a scalar (uniform scaling).",
    args=(Arg("M", "floats", None, "Linear part, d_out x d_in row-major, or a scalar; default identity.",
              tensor=True),
          Arg("T", "floats", None, "Translation, d_out values (a scalar is broadcast); default zero.", tensor=True),
          Arg("MT", "floats", None, "d_out x (d_in + 1) matrix [M | T].", tensor=True),
          Arg("dtype", "dtype", DALIDataType.FLOAT, "Output type: FLOAT or the input type (rounded, clamped).")),
))
