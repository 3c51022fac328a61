"""``fn.warp_affine`` and ``fn.rotate``: affine warps of images and sequences through ``cv2.warpAffine``.

Coordinates follow DALI (measured with coordinate-ramp images): pixel (x, y) covers
[x, x + 1) x [y, y + 1), so its centre is (x + 0.5, y + 0.5). A warp matrix M (2x3, ``inverse_map``
True) maps an output point to the input point it samples: output pixel (x, y) takes the input value
at M @ (x + 0.5, y + 0.5, 1). OpenCV works in pixel indices (centres at integers), so the matrix
handed to ``cv2.warpAffine(..., WARP_INVERSE_MAP)`` is ``to_index_matrix(M)``.

Outside the input, samples repeat the edge pixel, or take ``fill_value`` where it is given
(interpolation then mixes the edge with the fill value, as in DALI). Only NN and LINEAR
interpolation exist, as in DALI. LINEAR runs ``cv2.warpAffine`` (uint8 with OpenCV's fixed-point
weights, every other type as float32); measured on flower photos against DALI 2.4: uint8 values
within +-1 (mean difference below 0.01), float values within 0.4 (mean 0.005), and within 0.003 of
an exact float64 bilinear reference. NN computes DALI's source pixel, floor(M @ (x + .5, y + .5, 1))
in float32, and gathers with ``cv2.remap`` (OpenCV's own NN warp rounds ties to even).

``fn.rotate`` turns the image counter-clockwise by ``angle`` degrees about its centre. The output
is the bounding box of the turned image (each extent ``ceil(extent - 0.01)``, then made even or odd
like the input extent it is closest to in direction), or ``size``, or the input size with
``keep_size``; the input centre maps to the output centre.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from jaxdali.ops.layouts import SpatialLayout, allocate_batch, resampled_dtype
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, REQUIRED, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, DALIInterpType

__all__ = ["rotated_size", "rotation_matrices", "to_index_matrix", "invert_affine", "WARP_AFFINE", "ROTATE"]

_CV2_INTERP = {DALIInterpType.INTERP_NN: cv2.INTER_NEAREST, DALIInterpType.INTERP_LINEAR: cv2.INTER_LINEAR}


# -- geometry (pure, vectorised) --------------------------------------------------------------------------


def _radians(angle_deg) -> np.ndarray:
    """Degrees to radians rounded to float32, as DALI does (it decides ties at odd multiples of 45)."""
    deg = np.asarray(angle_deg, np.float32)
    return (deg * np.float32(math.pi / 180)).astype(np.float64)


def rotated_size(heights, widths, angle_deg) -> tuple[np.ndarray, np.ndarray]:
    """Output (height, width) of ``fn.rotate`` without ``size``/``keep_size``, per sample.

    Each extent is the rotated bounding box rounded up (with 0.01 of tolerance, so 90 degrees gives
    the swapped size exactly), then increased by one where needed so that its parity matches the
    input extent it mostly comes from (the swapped one when |sin| > |cos|), which keeps the centre
    on the pixel grid.
    """
    h = np.asarray(heights, np.float64)
    w = np.asarray(widths, np.float64)
    r = _radians(angle_deg)
    s, c = np.abs(np.sin(r)), np.abs(np.cos(r))
    out_w = np.ceil(w * c + h * s - 0.01)
    out_h = np.ceil(w * s + h * c - 0.01)
    swap = s > c
    ref_w = np.where(swap, h, w)
    ref_h = np.where(swap, w, h)
    out_w += (out_w - ref_w) % 2
    out_h += (out_h - ref_h) % 2
    return out_h.astype(np.int64), out_w.astype(np.int64)


def rotation_matrices(in_hw, out_hw, angle_deg) -> np.ndarray:
    """(n, 2, 3) output-to-input matrices (DALI coordinates) of a counter-clockwise rotation that
    maps the output centre to the input centre."""
    in_hw = np.asarray(in_hw, np.float64).reshape(-1, 2)
    out_hw = np.asarray(out_hw, np.float64).reshape(-1, 2)
    r = _radians(angle_deg).reshape(-1)
    s, c = np.sin(r), np.cos(r)
    m = np.zeros((len(r), 2, 3))
    m[:, 0, 0], m[:, 0, 1] = c, -s
    m[:, 1, 0], m[:, 1, 1] = s, c
    centre_out = out_hw[:, ::-1] / 2  # (x, y)
    centre_in = in_hw[:, ::-1] / 2
    m[:, :, 2] = centre_in - np.einsum("nij,nj->ni", m[:, :, :2], centre_out)
    return m


def invert_affine(m: np.ndarray) -> np.ndarray:
    """Inverses of (n, 2, 3) affine matrices."""
    m = np.asarray(m, np.float64)
    a = m[:, :, :2]
    inv = np.linalg.inv(a)
    return np.concatenate([inv, -np.einsum("nij,nj->ni", inv, m[:, :, 2])[:, :, None]], axis=2)


def to_index_matrix(m: np.ndarray) -> np.ndarray:
    """DALI's output-to-input matrices (pixel centres at +0.5) -> OpenCV's (centres at integers)."""
    m = np.array(m, np.float64)
    m[:, :, 2] += m[:, :, :2].sum(axis=2) * 0.5 - 0.5
    return m


# -- the kernel ----------------------------------------------------------------------------------------------


def _nearest_maps(index_matrix: np.ndarray, out_hw) -> tuple[np.ndarray, np.ndarray]:
    """Integer-valued float32 source maps of a nearest-neighbour warp.

    DALI takes the pixel that contains the sampled point, floor(M @ (x + .5, y + .5, 1)), in float32;
    OpenCV's own nearest-neighbour warp rounds ties to even, so the maps are computed here and
    ``cv2.remap`` only gathers.
    """
    to_dali = index_matrix.astype(np.float64).copy()
    to_dali[:, 2] -= to_dali[:, :2].sum(axis=1) * 0.5 - 0.5  # back to DALI's coordinates
    m32 = to_dali.astype(np.float32)
    x = np.arange(out_hw[1], dtype=np.float32)[None, :] + np.float32(0.5)
    y = np.arange(out_hw[0], dtype=np.float32)[:, None] + np.float32(0.5)
    map_x = np.floor(m32[0, 0] * x + m32[0, 1] * y + m32[0, 2])
    map_y = np.floor(m32[1, 0] * x + m32[1, 1] * y + m32[1, 2])
    return map_x.astype(np.float32), map_y.astype(np.float32)


def _warp_frames(frames: np.ndarray, index_matrix: np.ndarray, out: np.ndarray, interp: int,
                 fill: float | None) -> None:
    """Warps (F, H, W, C) frames into ``out`` (F, H', W', C)."""
    oh, ow = out.shape[1:3]
    border = cv2.BORDER_REPLICATE if fill is None else cv2.BORDER_CONSTANT
    value = (0.0 if fill is None else float(fill),) * 4
    # OpenCV's fixed-point path is within +-1 for uint8 only (int16 is off by hundreds); other types
    # are warped as float32.
    work_type = None if frames.dtype in (np.uint8, np.float32) and out.dtype == frames.dtype else np.float32
    maps = _nearest_maps(index_matrix, (oh, ow)) if interp == cv2.INTER_NEAREST else None
    channels = frames.shape[3]
    for src, dst in zip(frames, out):
        if work_type is not None:
            src = src.astype(work_type)
        for c0 in range(0, channels, 4):  # OpenCV warps at most 4 channels at a time
            part = src[:, :, c0:c0 + 4]
            n = part.shape[2]
            part = part[:, :, 0] if n == 1 else np.ascontiguousarray(part)
            if maps is not None:
                res = cv2.remap(part, maps[0], maps[1], cv2.INTER_NEAREST, borderMode=border, borderValue=value)
            else:
                res = cv2.warpAffine(part, index_matrix, (ow, oh), flags=interp | cv2.WARP_INVERSE_MAP,
                                     borderMode=border, borderValue=value)
            res = res.reshape(oh, ow, n)
            if dst.dtype.kind in "iu" and res.dtype.kind == "f":
                info = np.iinfo(dst.dtype)
                res = np.rint(np.clip(res, info.min, info.max))
            dst[:, :, c0:c0 + 4] = res


# -- operators ------------------------------------------------------------------------------------------------


class _Warp(Operator):
    """Shared run loop: per-sample output sizes and matrices, then ``cv2.warpAffine`` on the pool."""

    row_wise = True

    op = ""

    def __init__(self, node, build):
        super().__init__(node, build)
        interp = self.args.get("interp_type")
        self.interp = DALIInterpType.INTERP_LINEAR if interp is None else DALIInterpType(interp)
        if self.interp not in _CV2_INTERP:
            raise OpArgumentError(f"fn.{self.op}: argument 'interp_type' must be INTERP_NN or INTERP_LINEAR (only "
                                  f"nearest and linear interpolation are supported), got {self.interp.name}")
        if self.args.get("dtype") is not None and self.args.get("output_dtype") is not None:
            raise OpArgumentError(f"fn.{self.op}: give 'dtype' or its deprecated alias 'output_dtype', not both")
        self.dtype_arg = self.args.get("dtype") if self.args.get("dtype") is not None else self.args.get("output_dtype")
        if self.dtype_arg is not None:
            DALIDataType(self.dtype_arg)

    def geometry(self, inputs, args, n: int, in_hw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-sample output (height, width) (n, 2) and output-to-input matrices (n, 2, 3)."""
        raise NotImplementedError

    def _size_arg(self, args, n: int) -> np.ndarray | None:
        if not args.given("size"):
            return None
        if args.is_per_sample("size"):
            size = args.per_sample("size", np.float64, (2,))
        else:
            size = np.asarray(args["size"], np.float64).reshape(-1)
            if size.size == 0:
                return None
            if size.size != 2:
                raise OpArgumentError(f"fn.{self.op}: argument 'size' must have 2 elements [height, width], "
                                      f"got {size.tolist()}")
            size = np.broadcast_to(size, (n, 2))
        size = np.floor(size + 0.5)
        if size.min() <= 0:
            raise ValueError(f"fn.{self.op}: output size must be positive, got {size.astype(np.int64).tolist()}")
        return size.astype(np.int64)

    def run(self, ctx, inputs, args):
        images = inputs[0]
        n = len(images)
        if n == 0:
            return images
        layout = SpatialLayout.parse(self.op, images.layout(), images.ndim(), allow_depth=False)
        dtype = resampled_dtype(self.op, images.np_dtype, self.dtype_arg, float_to_any=True)
        samples = images.samples()
        shapes = np.array(images.shape(), np.int64).reshape(n, -1)
        in_hw = shapes[:, list(layout.axes)]
        out_hw, matrices = self.geometry(inputs, args, n, in_hw)
        index_matrices = to_index_matrix(matrices)
        out_shapes = shapes.copy()
        out_shapes[:, list(layout.axes)] = out_hw
        out = allocate_batch(out_shapes, dtype)
        fill = self.args.get("fill_value")
        interp = _CV2_INTERP[self.interp]
        h_axis = layout.axes[0]
        source_info = images.source_info

        def chunk(start: int, stop: int) -> None:
            for i in range(start, stop):
                x, y = samples[i], out[i]
                lead = int(np.prod(x.shape[:h_axis]))
                frames = np.ascontiguousarray(x).reshape(lead, x.shape[h_axis], x.shape[h_axis + 1], -1)
                dst = y.reshape(lead, y.shape[h_axis], y.shape[h_axis + 1], frames.shape[3])
                try:
                    _warp_frames(frames, index_matrices[i], dst, interp, fill)
                except Exception as e:
                    src = source_info[i] if source_info is not None and i < len(source_info) else None
                    e.add_note(f"fn.{self.op}: sample {i}" + (f" ({src})" if src else ""))
                    raise

        ctx.parallel_for(chunk, n)
        return TensorListCPU(out, layout.layout)


class WarpAffine(_Warp):
    """``fn.warp_affine``."""

    op = "warp_affine"

    def __init__(self, node, build):
        super().__init__(node, build)
        has_input = len(node.inputs) > 1
        has_arg = "matrix" in node.arg_inputs or node.args.get("matrix") is not None
        if has_input and has_arg:
            raise OpArgumentError("fn.warp_affine: give the matrix either as the second input or as the 'matrix' "
                                  "argument, not both")
        if not has_input and not has_arg:
            raise OpArgumentError("fn.warp_affine: argument 'matrix' must be provided when the transforms are not "
                                  "passed as the second input")
        matrix = node.args.get("matrix")
        if matrix is not None and len(matrix) != 6:
            raise OpArgumentError(f"fn.warp_affine: argument 'matrix' must have 6 elements (2x3), got {len(matrix)}")

    def geometry(self, inputs, args, n, in_hw):
        if len(inputs) > 1:
            mats = inputs[1].samples()
            try:
                m = np.stack([np.asarray(s, np.float64).reshape(2, 3) for s in mats])
            except ValueError:
                raise ValueError(f"fn.warp_affine: the matrix input must have 6 elements (2x3) per sample, got shapes "
                                 f"{sorted({tuple(np.shape(s)) for s in mats})}") from None
        else:
            m = np.array(args.per_sample("matrix", np.float64, (2, 3)))
        if len(m) != n:
            raise ValueError(f"fn.warp_affine: got {len(m)} matrices for {n} samples")
        if not self.args["inverse_map"]:
            m = invert_affine(m)
        size = self._size_arg(args, n)
        return (in_hw if size is None else size), m


class Rotate(_Warp):
    """``fn.rotate``."""

    op = "rotate"

    def geometry(self, inputs, args, n, in_hw):
        angle = args.per_sample("angle", np.float32)
        size = self._size_arg(args, n)
        if size is not None:
            out_hw = size
        elif self.args["keep_size"]:
            out_hw = in_hw
        else:
            out_hw = np.stack(rotated_size(in_hw[:, 0], in_hw[:, 1], angle), axis=1)
        return out_hw, rotation_matrices(in_hw, out_hw, angle)


_COMMON = (
    Arg("size", "floats", None, "Output [height, width] (rounded); default: see the operator.", tensor=True),
    Arg("fill_value", "float", None,
        "Value outside the input; when unset, the edge pixels repeat."),
    Arg("interp_type", "interp_type", None, "INTERP_LINEAR (default) or INTERP_NN."),
    Arg("dtype", "dtype", None, "Output type: the input type (default) or FLOAT; float input may go to integers."),
    Arg("output_dtype", "dtype", None, "Deprecated alias of dtype."),
)

WARP_AFFINE = register(OpSchema(
    name="warp_affine", impl=WarpAffine, devices=("cpu", "gpu"), min_inputs=1, max_inputs=2,
    doc="""Applies an affine transform to images and sequences (frame by frame).

``matrix`` (2x3, 6 values, per-sample allowed; or a second input) maps output coordinates to
input coordinates (pixel centres at +0.5); with ``inverse_map=False`` it maps input to output and
is inverted. The output size is ``size``, by default the input size. Layouts with adjacent H and W
(HWC, FHWC, CHW, ...); volumes (DHWC) are not supported. ``device="gpu"`` runs the host
implementation; the result moves to the pipeline's device.""",
    args=(Arg("matrix", "floats", None, "2x3 output-to-input matrix, row-major.", tensor=True),
          Arg("inverse_map", "bool", True, "The matrix maps output to input coordinates (else input to output).")
          ) + _COMMON,
))

ROTATE = register(OpSchema(
    name="rotate", impl=Rotate, devices=("cpu", "gpu"),
    doc="""Rotates images and sequences counter-clockwise by ``angle`` degrees about their centre.

The output grows to hold the whole rotated image, unless ``keep_size`` (input size) or ``size`` is
given. Layouts with adjacent H and W (HWC, FHWC, CHW, ...). ``device="gpu"`` runs the host
implementation; the result moves to the pipeline's device.""",
    args=(Arg("angle", "float", REQUIRED, "Angle in degrees, counter-clockwise.", tensor=True),
          Arg("keep_size", "bool", False, "Keep the input size (corners are cut off)."),
          ) + _COMMON,
    rejected={"axis": "3-D rotation (volumes) is not supported; for 2-D images rotate always turns in the image "
                      "plane, so leave 'axis' out"},
))
