"""Data about the data: ``shapes``, ``get_property``, and the reinterpreting ``reinterpret``."""

from __future__ import annotations

import math

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import REQUIRED, Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, to_numpy_type

__all__ = ["SHAPES", "GET_PROPERTY", "REINTERPRET"]


class Shapes(Operator):
    """Each sample's shape as a 1-D array of ``dtype``."""

    def run(self, ctx, inputs, args):
        (x,) = inputs
        dtype = to_numpy_type(self.args["dtype"])
        return TensorListCPU(np.array(x.shape(), dtype).reshape(len(x), x.ndim()))


class GetProperty(Operator):
    """A sample property as uint8 bytes: ``source_info`` (where the sample came from) or ``layout``."""

    def run(self, ctx, inputs, args):
        (x,) = inputs
        key = self.args["key"]
        if key == "layout":
            values = [x.layout()] * len(x)
        else:
            values = list(x.source_info) if x.source_info is not None else [""] * len(x)
        return TensorListCPU([np.frombuffer(v.encode(), np.uint8).copy() for v in values])


class Reinterpret(Operator):
    """The same bytes seen with another type and/or shape (no copy)."""

    def __init__(self, node, build):
        super().__init__(node, build)
        given = [k for k in ("shape", "rel_shape", "src_dims") if self.args.get(k) is not None or k in node.arg_inputs]
        if len(given) > 1:
            raise OpArgumentError(f"fn.reinterpret: give at most one of 'shape', 'rel_shape' and 'src_dims', got "
                                  f"{given}")

    def run(self, ctx, inputs, args):
        x = inputs[0]
        n = len(x)
        dtype = np.dtype(to_numpy_type(self.args["dtype"])) if self.args.get("dtype") is not None else x.np_dtype
        if len(inputs) > 1:
            if inputs[1].np_dtype.kind not in "iu":
                raise OpArgumentError(f"fn.reinterpret: the shape input must be of an integer type, got "
                                      f"{inputs[1].np_dtype}")
            shapes = [tuple(int(v) for v in np.asarray(s).reshape(-1)) for s in inputs[1].samples()]
        elif args.given("shape"):
            shapes = [tuple(int(v) for v in np.asarray(args.sample_value("shape", i)).reshape(-1)) for i in range(n)]
        else:
            shapes = None
        layout = self.args.get("layout")
        out = []
        for i, s in enumerate(x.samples()):
            shape = self._shape(s, dtype, args, i, shapes[i] if shapes is not None else None)
            out.append(self._view(s, dtype, shape, i))
        ndim = out[0].ndim if out else x.ndim()
        if layout is None:
            layout = x.layout() if ndim == x.ndim() else ""
        if layout and len(layout) != ndim:
            raise OpArgumentError(f"fn.reinterpret: 'layout' {layout!r} has {len(layout)} characters for "
                                  f"{ndim}-D output")
        return TensorListCPU(out, layout)

    def _shape(self, s: np.ndarray, dtype: np.dtype, args, i: int, shape) -> tuple[int, ...] | None:
        if args.given("rel_shape"):
            rel = np.asarray(args.sample_value("rel_shape", i), np.float64).reshape(-1)
            if len(rel) != s.ndim:
                raise OpArgumentError(f"fn.reinterpret: 'rel_shape' has {len(rel)} entries for {s.ndim}-D sample {i}")
            return tuple(-1 if r < 0 else int(round(r * e)) for r, e in zip(rel, s.shape))
        if args.given("src_dims"):
            dims = [int(d) for d in np.asarray(args.sample_value("src_dims", i)).reshape(-1)]
            if any(not -1 <= d < s.ndim for d in dims):
                raise OpArgumentError(f"fn.reinterpret: 'src_dims' {dims} has an axis outside the {s.ndim}-D sample {i}")
            return tuple(1 if d == -1 else s.shape[d] for d in dims)
        return shape

    @staticmethod
    def _view(s: np.ndarray, dtype: np.dtype, shape, i: int) -> np.ndarray:
        s = np.ascontiguousarray(s)
        if shape is None:
            if s.ndim == 0 or (s.shape[-1] * s.itemsize) % dtype.itemsize:
                raise OpArgumentError(f"fn.reinterpret: the innermost extent of sample {i} ({s.shape[-1:]} x "
                                      f"{s.itemsize} bytes) is not a multiple of the size of {dtype}")
            return s.view(dtype)
        shape = list(shape)
        total = s.nbytes
        if shape.count(-1) > 1:
            raise OpArgumentError(f"fn.reinterpret: the shape {shape} of sample {i} has more than one -1")
        if -1 in shape:
            known = math.prod(e for e in shape if e != -1) * dtype.itemsize
            if known == 0 or total % known:
                raise OpArgumentError(f"fn.reinterpret: sample {i} ({total} bytes) does not fit the shape {shape} "
                                      f"of {dtype}")
            shape[shape.index(-1)] = total // known
        if math.prod(shape) * dtype.itemsize != total:
            raise OpArgumentError(f"fn.reinterpret: sample {i} has {total} bytes, the shape {shape} of {dtype} needs "
                                  f"{math.prod(shape) * dtype.itemsize}")
        return s.reshape(-1).view(np.uint8).view(dtype).reshape(shape)


SHAPES = register(OpSchema(
    name="shapes", impl=Shapes, devices=("cpu", "gpu"),
    doc="The shape of each sample, as a 1-D array (DALI deprecates it in favour of `DataNode.shape()`).",
    args=(Arg("dtype", "dtype", DALIDataType.INT64, "Output type."),),
    rejected={"type": "deprecated alias of 'dtype'; use dtype"}))

GET_PROPERTY = register(OpSchema(
    name="get_property", impl=GetProperty, devices=("cpu", "gpu"),
    doc="A property of each sample as uint8 bytes: `source_info` (the file or record it came from, empty "
        "when unknown) or `layout`.",
    args=(Arg("key", "str", REQUIRED, "The property.", choices=("source_info", "layout")),)))

REINTERPRET = register(OpSchema(
    name="reinterpret", impl=Reinterpret, devices=("cpu", "gpu"), min_inputs=1, max_inputs=2,
    doc="Views the same bytes with another `dtype` and/or shape (from `shape`, `rel_shape`, `src_dims` or the "
        "second input, which holds the shape), without copying; a type change alone rescales the innermost extent.",
    args=(Arg("dtype", "dtype", None, "Output type (default: the input's)."),
          Arg("shape", "ints", None, "Output shape; -1 infers one extent.", tensor=True),
          Arg("rel_shape", "floats", None, "Output shape relative to the input's; -1 infers one extent.",
              tensor=True),
          Arg("src_dims", "ints", None, "Output extents taken from these input axes (-1: a unit axis).", tensor=True),
          Arg("layout", "str", None, "Output layout (default: the input's when the rank is unchanged)."))))
