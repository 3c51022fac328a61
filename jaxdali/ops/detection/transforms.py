"""``fn.transforms.*``: per-sample affine matrices for ``fn.warp_affine`` and ``fn.coord_transform``.

Each operator outputs, per sample, an ``ndim x (ndim + 1)`` float32 matrix ``[M | T]`` mapping a
point ``p`` to ``M @ p + T``. Given a transform as input, the new transform is applied after it
(``new @ input`` in homogeneous coordinates), or before it with ``reverse_order=True``;
``fn.transforms.combine`` chains its inputs, the first input applied first.

Arithmetic is float32 in DALI's order (products summed term by term), with sines, cosines and
tangents taken in double precision of the float32 radians and rounded, so the matrices equal
DALI's bit for bit (3D rotations about an axis: within a few float32 ulps). Arguments are vectors
per sample (argument inputs allowed); a one-element vector is broadcast to ``ndim`` where DALI
allows it (scale, crop windows).
"""

from __future__ import annotations

import math

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, REQUIRED, register
from jaxdali.tensors import TensorListCPU

__all__ = ["homogeneous", "TRANSLATION", "SCALE", "ROTATION", "SHEAR", "CROP", "COMBINE"]

_MAX_NDIM = 6
_F32 = np.float32


def homogeneous(tl: TensorListCPU, op: str, what: str) -> np.ndarray:
    """A batch of ``ndim x (ndim + 1)`` affine matrices as (n, ndim + 1, ndim + 1) float32."""
    dense = tl.dense()
    m = None if dense is None else np.asarray(dense, _F32)
    if m is None or m.ndim != 3 or m.shape[2] != m.shape[1] + 1:
        shapes = sorted({tuple(np.shape(s)) for s in tl.samples()})
        raise ValueError(f"fn.{op}: {what} must hold affine matrices of shape (ndim, ndim + 1), the same for "
                         f"every sample, got shapes {shapes}")
    n, d = m.shape[0], m.shape[1]
    out = np.zeros((n, d + 1, d + 1), _F32)
    out[:, :d] = m
    out[:, d, d] = 1
    return out


def _vectors(args, name: str, n: int) -> np.ndarray | None:
    """The argument as (n, k) float32 (one vector per sample), or None when not given."""
    if not args.given(name):
        return None
    if args.is_per_sample(name):
        k = np.asarray(args.sample_value(name, 0)).size if n else 0
        return np.array(args.per_sample(name, _F32, (k,)))
    return np.broadcast_to(np.asarray(args[name], _F32).reshape(1, -1), (n, len(args[name])))


def _sin_cos(deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sine and cosine of angles in degrees: float32 radians, float64 trigonometry, rounded to float32."""
    rad = (np.asarray(deg, _F32) * _F32(math.pi / 180)).astype(np.float64)
    return np.sin(rad).astype(_F32), np.cos(rad).astype(_F32)


class _Transform(Operator):
    """Shared part: ndim inference, composition with the optional input transform, float32 output."""

    row_wise = True

    op = ""
    #: Arguments that are vectors of ndim values (a one-element vector broadcasts where allowed).
    vector_args: tuple[str, ...] = ()
    broadcast_args: tuple[str, ...] = ()
    #: Vector arguments whose length is not ndim (shear factors).
    factor_args: tuple[str, ...] = ()

    def matrices(self, vectors: dict, args, d: int, n: int) -> np.ndarray:
        """The (n, d + 1, d + 1) float32 homogeneous matrices of this transform."""
        raise NotImplementedError

    def fixed_ndim(self, vectors: dict) -> int | None:
        """The dimensionality implied by the operator itself (e.g. rotation's axis), if any."""
        return None

    def __init__(self, node, build):
        super().__init__(node, build)
        #: (batch size, input ndim) -> this transform's matrices, when no argument is per sample.
        self._constant_matrices: dict[tuple[int, int | None], np.ndarray] = {}

    def _ndim(self, vectors: dict, input_ndim: int | None) -> int:
        fixed = self.fixed_ndim(vectors)
        if fixed is not None and input_ndim is not None and fixed != input_ndim:
            raise OpArgumentError(f"fn.{self.op}: the arguments describe a {fixed}D transform, but the input "
                                  f"transform has {input_ndim} dimensions")
        d = input_ndim if input_ndim is not None else fixed
        if d is None and self.args.get("ndim") is not None:
            d = self.args["ndim"]
        sized = {k: v for k, v in vectors.items() if v is not None and k not in self.factor_args}
        if d is None:
            lengths = [v.shape[1] for v in sized.values()]
            longer = [k for k in lengths if k > 1]
            d = longer[0] if longer else (lengths[0] if lengths else 1)
        if not 1 <= d <= _MAX_NDIM:
            raise OpArgumentError(f"fn.{self.op}: transforms of {d} dimensions are not supported (1 to {_MAX_NDIM})")
        for name, v in sized.items():
            if v.shape[1] == d or (v.shape[1] == 1 and name in self.broadcast_args):
                continue
            source = "the input transform has" if input_ndim is not None else "the other arguments give"
            raise OpArgumentError(f"fn.{self.op}: argument '{name}' has {v.shape[1]} elements, but {source} "
                                  f"{d} dimensions")
        return d

    def _own(self, args, n: int, input_ndim: int | None) -> np.ndarray:
        vectors = {name: _vectors(args, name, n) for name in self.vector_args}
        d = self._ndim(vectors, input_ndim)
        vectors = {k: (v if v is None or k in self.factor_args else np.ascontiguousarray(np.broadcast_to(v, (n, d))))
                   for k, v in vectors.items()}
        return self.matrices(vectors, args, d, n)

    def run(self, ctx, inputs, args):
        n = ctx.batch_size
        before = homogeneous(inputs[0], self.op, "the input") if inputs else None
        key = (n, None if before is None else before.shape[1] - 1)
        if self.node.arg_inputs:
            m = self._own(args, *key)
        else:  # constant arguments: the same matrices every batch of this size
            m = self._constant_matrices.get(key)
            if m is None:
                m = self._constant_matrices[key] = self._own(args, *key)
                m.flags.writeable = False
        if before is not None:
            m = _compose(m, before, self.args["reverse_order"])
        return TensorListCPU(m[:, :-1].copy())


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Batched float32 matrix product summed term by term in index order (as DALI does; NumPy's
    matmul may round differently), so composed matrices equal DALI's bit for bit."""
    out = a[:, :, 0, None] * b[:, None, 0, :]
    for k in range(1, a.shape[2]):
        out = out + a[:, :, k, None] * b[:, None, k, :]
    return out


def _compose(m, before, reverse: bool) -> np.ndarray:
    return _matmul(before, m) if reverse else _matmul(m, before)


def _about_center(linear: np.ndarray, center: np.ndarray | None) -> np.ndarray:
    """Homogeneous matrices of ``x -> L (x - c) + c`` from (n, d, d) ``L`` and (n, d) ``c``."""
    n, d = linear.shape[:2]
    out = np.zeros((n, d + 1, d + 1), _F32)
    out[:, :d, :d] = linear
    out[:, d, d] = 1
    if center is not None:
        out[:, :d, d] = center - _matmul(linear, center[:, :, None])[:, :, 0]
    return out


class Translation(_Transform):
    op = "transforms.translation"
    vector_args = ("offset",)

    def matrices(self, vectors, args, d, n):
        out = _about_center(np.broadcast_to(np.eye(d, dtype=_F32), (n, d, d)), None)
        out[:, :d, d] = vectors["offset"]
        return out


class Scale(_Transform):
    op = "transforms.scale"
    vector_args = ("scale", "center")
    broadcast_args = ("scale",)

    def matrices(self, vectors, args, d, n):
        scale, center = vectors["scale"], vectors["center"]
        out = np.zeros((n, d + 1, d + 1), _F32)
        idx = np.arange(d)
        out[:, idx, idx] = scale
        out[:, d, d] = 1
        if center is not None:
            out[:, :d, d] = center * (1 - scale)
        return out


class Rotation(_Transform):
    op = "transforms.rotation"
    vector_args = ("axis", "center")

    def fixed_ndim(self, vectors):
        return 2 if vectors["axis"] is None else 3

    def matrices(self, vectors, args, d, n):
        s, c = _sin_cos(args.per_sample("angle", _F32))
        if d == 2:
            linear = np.stack([np.stack([c, -s], 1), np.stack([s, c], 1)], 1)
        else:
            axis = vectors["axis"]
            norm = np.sqrt((axis * axis).sum(axis=1, dtype=_F32))
            if (norm == 0).any():
                raise OpArgumentError(f"fn.{self.op}: argument 'axis' must not be a zero vector")
            x, y, z = (axis / norm[:, None]).T
            one_c = _F32(1) - c
            linear = np.stack([
                np.stack([c + x * x * one_c, x * y * one_c - z * s, x * z * one_c + y * s], 1),
                np.stack([y * x * one_c + z * s, c + y * y * one_c, y * z * one_c - x * s], 1),
                np.stack([z * x * one_c - y * s, z * y * one_c + x * s, c + z * z * one_c], 1)], 1)
        return _about_center(linear.astype(_F32), vectors["center"])


class Shear(_Transform):
    op = "transforms.shear"
    vector_args = ("shear", "angles", "center")
    factor_args = ("shear", "angles")

    def __init__(self, node, build):
        super().__init__(node, build)
        given = [a for a in ("shear", "angles") if a in node.arg_inputs or node.args.get(a) is not None]
        if len(given) != 1:
            raise OpArgumentError(f"fn.{self.op}: give exactly one of the arguments 'shear' and 'angles'")

    def fixed_ndim(self, vectors):
        k = (vectors["shear"] if vectors["shear"] is not None else vectors["angles"]).shape[1]
        if k not in (2, 6):
            name = "shear" if vectors["shear"] is not None else "angles"
            raise OpArgumentError(f"fn.{self.op}: argument '{name}' must have 2 elements (2D: [sx, sy]) or 6 "
                                  f"(3D: [sxy, sxz, syx, syz, szx, szy]), got {k}")
        return 2 if k == 2 else 3

    def matrices(self, vectors, args, d, n):
        factors = vectors["shear"]
        if factors is None:
            angles = vectors["angles"]
            if (np.abs(angles) >= 90).any():
                raise OpArgumentError(f"fn.{self.op}: argument 'angles' must be in (-90, 90) degrees, got "
                                      f"{angles[np.abs(angles).max(axis=1) >= 90][0].tolist()}")
            factors = np.tan((angles * _F32(math.pi / 180)).astype(np.float64)).astype(_F32)
        linear = np.broadcast_to(np.eye(d, dtype=_F32), (n, d, d)).copy()
        off_diagonal = ~np.eye(d, dtype=bool)
        linear[:, off_diagonal] = factors
        return _about_center(linear, vectors["center"])


class Crop(_Transform):
    op = "transforms.crop"
    vector_args = ("from_start", "from_end", "to_start", "to_end")
    broadcast_args = vector_args

    def matrices(self, vectors, args, d, n):
        f0, f1, t0, t1 = (vectors[k] for k in self.vector_args)
        if self.args["absolute"]:
            f0, f1 = np.minimum(f0, f1), np.maximum(f0, f1)
            t0, t1 = np.minimum(t0, t1), np.maximum(t0, t1)
        extent = f1 - f0
        if (extent == 0).any():
            raise OpArgumentError(f"fn.{self.op}: the source window [from_start, from_end) is empty along some "
                                  f"axis: from_start={f0[(extent == 0).any(axis=1)][0].tolist()}, "
                                  f"from_end={f1[(extent == 0).any(axis=1)][0].tolist()}")
        scale = (t1 - t0) / extent
        out = np.zeros((n, d + 1, d + 1), _F32)
        idx = np.arange(d)
        out[:, idx, idx] = scale
        out[:, :d, d] = t0 - scale * f0
        out[:, d, d] = 1
        return out


class Combine(Operator):
    """``fn.transforms.combine``: the inputs chained, the first applied first."""

    row_wise = True

    op = "transforms.combine"

    def run(self, ctx, inputs, args):
        mats = [homogeneous(tl, self.op, f"input {i}") for i, tl in enumerate(inputs)]
        dims = sorted({m.shape[1] - 1 for m in mats})
        if len(dims) != 1:
            raise ValueError(f"fn.{self.op}: all input transforms must have the same number of dimensions, got "
                             f"{dims}")
        if self.args["reverse_order"]:
            mats = mats[::-1]
        out = mats[0]
        for m in mats[1:]:
            out = _matmul(m, out)
        return TensorListCPU(np.ascontiguousarray(out[:, :-1]))


_REVERSE = Arg("reverse_order", "bool", False,
               "Apply this transform before the input transform (default: after it).")
_CENTER = Arg("center", "floats", None, "Centre of the transform; default: the origin.", tensor=True)
_COMMON_DOC = """ Outputs one ``ndim x (ndim + 1)`` float32 matrix per sample. With an input
transform, this one is applied after it (``reverse_order``: before it)."""

TRANSLATION = register(OpSchema(
    name="transforms.translation", impl=Translation, min_inputs=0, max_inputs=1,
    doc="Translation by ``offset``." + _COMMON_DOC,
    args=(Arg("offset", "floats", REQUIRED, "Translation vector (ndim values).", tensor=True), _REVERSE)))

SCALE = register(OpSchema(
    name="transforms.scale", impl=Scale, min_inputs=0, max_inputs=1,
    doc="Scaling by ``scale`` about ``center``." + _COMMON_DOC,
    args=(Arg("scale", "floats", REQUIRED, "Scale factor per dimension (one value: all dimensions).",
              tensor=True), _CENTER,
          Arg("ndim", "int", None, "Number of dimensions when the arguments and input do not tell.", min=1),
          _REVERSE)))

ROTATION = register(OpSchema(
    name="transforms.rotation", impl=Rotation, min_inputs=0, max_inputs=1,
    doc="Rotation by ``angle`` degrees (2D: counter-clockwise in the x-y plane; 3D: about ``axis``) about "
        "``center``." + _COMMON_DOC,
    args=(Arg("angle", "float", REQUIRED, "Angle in degrees.", tensor=True),
          Arg("axis", "floats", None, "3D rotation axis; 2D when unset.", tensor=True), _CENTER, _REVERSE)))

SHEAR = register(OpSchema(
    name="transforms.shear", impl=Shear, min_inputs=0, max_inputs=1,
    doc="Shear by factors (``shear``) or angles (``angles``) about ``center``; 2D takes [sx, sy], 3D takes "
        "[sxy, sxz, syx, syz, szx, szy]." + _COMMON_DOC,
    args=(Arg("shear", "floats", None, "Shear factors.", tensor=True),
          Arg("angles", "floats", None, "Shear angles in degrees, in (-90, 90); factor = tan(angle).", tensor=True),
          _CENTER, _REVERSE)))

CROP = register(OpSchema(
    name="transforms.crop", impl=Crop, min_inputs=0, max_inputs=1,
    doc="Maps the window [from_start, from_end] onto [to_start, to_end] (scale and translation)." + _COMMON_DOC,
    args=(Arg("from_start", "floats", (0.0,), "Source window start.", tensor=True),
          Arg("from_end", "floats", (1.0,), "Source window end.", tensor=True),
          Arg("to_start", "floats", (0.0,), "Destination window start.", tensor=True),
          Arg("to_end", "floats", (1.0,), "Destination window end.", tensor=True),
          Arg("absolute", "bool", False, "Order each window's start and end so that no axis is flipped."),
          _REVERSE)))

COMBINE = register(OpSchema(
    name="transforms.combine", impl=Combine, min_inputs=2, max_inputs=99,
    doc="Chains two or more affine transforms, the first input applied first (``reverse_order``: last).",
    args=(_REVERSE,)))
