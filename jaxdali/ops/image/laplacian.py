"""``fn.laplacian``: the sum of the second derivatives along H and W of images and sequences.

Each partial derivative is separable: the second-derivative kernel of ``window_size`` taps (OpenCV's
``getDerivKernels(2, 0, k)``, DALI's kernel) along its axis and a binomial smoothing kernel of
``smoothing_size`` taps along the other. Both passes run in float32 through ``cv2.sepFilter2D``
(integer weights: exact for integer inputs), mirrored border (101), then the sum is scaled and
converted to the output type.
"""

from __future__ import annotations

import functools

import cv2
import numpy as np

from jaxdali.ops.geometry import convert, sample_name
from jaxdali.ops.image.spatial import planes, spatial_layout
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType, to_numpy_type

__all__ = ["LAPLACIAN", "second_derivative_kernel", "smoothing_kernel"]

_OP = "laplacian"


@functools.lru_cache(maxsize=64)
def second_derivative_kernel(size: int) -> np.ndarray:
    """The (size, 1) float32 second-derivative kernel (size 3: [1, -2, 1])."""
    kernel, _ = cv2.getDerivKernels(2, 0, size, normalize=False, ktype=cv2.CV_32F)
    return kernel.reshape(-1, 1)


@functools.lru_cache(maxsize=64)
def smoothing_kernel(size: int) -> np.ndarray:
    """The (size, 1) float32 binomial kernel (size 3: [1, 2, 1]; size 1: [1])."""
    k = np.ones(1)
    for _ in range(size - 1):
        k = np.convolve(k, [1.0, 1.0])
    return k.astype(np.float32).reshape(-1, 1)


def _per_axis(name: str, value, who: str) -> list:
    v = np.asarray(value).reshape(-1).tolist()
    if len(v) not in (1, 2):
        raise ValueError(f"fn.{_OP}: argument '{name}' has {len(v)} values for {who} (expected 1, or 2 for H and W)")
    return v * 2 if len(v) == 1 else v


class Laplacian(Operator):
    """d2/dH2 + d2/dW2 with smoothing across, per plane, through two OpenCV separable passes."""

    def __init__(self, node, build):
        super().__init__(node, build)
        if self.args["normalized_kernel"] and (self.args.get("scale") is not None or "scale" in node.arg_inputs):
            raise OpArgumentError(f"fn.{_OP}: arguments 'normalized_kernel' and 'scale' cannot both be given")
        dtype = self.args["dtype"]
        self._dtype = np.dtype(to_numpy_type(dtype)) if dtype is not None else None
        if dtype is not None and dtype != DALIDataType.FLOAT:
            raise OpArgumentError(f"fn.{_OP}: argument 'dtype' must be FLOAT (or unset: the input type), "
                                  f"got {dtype.name}")

    def _plan(self, args, i: int, who: str) -> tuple:
        """((kernel_x, kernel_y, factor) for d/dW2, the same for d/dH2) for sample ``i``."""
        windows = _per_axis("window_size", args.sample_value("window_size", i), who)
        smoothing = args.sample_value("smoothing_size", i)
        smoothing = windows if smoothing is None else _per_axis("smoothing_size", smoothing, who)
        scale = args.sample_value("scale", i)
        scales = [1.0, 1.0] if scale is None else _per_axis("scale", scale, who)
        for name, values in (("window_size", windows), ("smoothing_size", smoothing)):
            low = 3 if name == "window_size" else 1
            if any(v < low or v > 23 or v % 2 == 0 for v in values):
                raise ValueError(f"fn.{_OP}: argument '{name}' must be odd, in [{low}, 23], got {values} for {who}")
        h, w = 0, 1
        plan = []
        for axis, other in ((w, h), (h, w)):
            deriv, smooth = second_derivative_kernel(int(windows[axis])), smoothing_kernel(int(smoothing[other]))
            factor = scales[axis]
            if self.args["normalized_kernel"]:
                factor = 2.0 ** -(windows[axis] - 3 + smoothing[other] - 1)
            plan.append((deriv, smooth, np.float32(factor)) if axis == w else (smooth, deriv, np.float32(factor)))
        return tuple(plan)

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        layout = spatial_layout(_OP, x.layout(), x.ndim())
        out_dtype = self._dtype or x.np_dtype
        plans = [self._plan(args, i, sample_name(x, i)) for i in range(n)]
        shapes = [tuple(s) for s in x.shape()]
        dense = owned_empty((n,) + shapes[0], out_dtype) if n and len(set(shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, out_dtype) for i, s in enumerate(shapes)]
        samples = x.samples()
        cv_input = x.np_dtype in (np.uint8, np.uint16, np.int16, np.float32)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if not samples[i].size:
                    continue
                src = np.ascontiguousarray(samples[i]) if cv_input else samples[i].astype(np.float32)
                acc = np.empty(src.shape, np.float32)
                part = np.empty(src.shape, np.float32)
                (kx0, ky0, f0), (kx1, ky1, f1) = plans[i]
                for s, a, p in zip(planes(src, layout), planes(acc, layout), planes(part, layout)):
                    cv2.sepFilter2D(s, cv2.CV_32F, kx0, ky0, dst=a, borderType=cv2.BORDER_REFLECT_101)
                    cv2.sepFilter2D(s, cv2.CV_32F, kx1, ky1, dst=p, borderType=cv2.BORDER_REFLECT_101)
                if f0 != 1 or f1 != 1:
                    acc *= f0
                    part *= f1
                acc += part
                np.copyto(outs[i], convert(acc, out_dtype), casting="unsafe")

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


LAPLACIAN = register(OpSchema(
    name=_OP, impl=Laplacian, devices=("cpu", "gpu"),
    doc="Laplacian of images (HW, HWC, CHW) and sequences (F...): the sum over H and W of the second derivative "
        "along the axis (`window_size` taps) smoothed along the other axis (binomial, `smoothing_size` taps), "
        "each scaled by `scale` (or by 2^-(window + smoothing - 4) with `normalized_kernel`); mirrored border. "
        "Integer outputs round and saturate.\n\n.. note:: Volumes are not supported. With device='gpu' it runs "
        "on the host.",
    args=(Arg("window_size", "ints", (3,), "Derivative kernel size, odd, 3..23 (one, or one per axis H, W).",
              tensor=True),
          Arg("smoothing_size", "ints", None, "Smoothing kernel size, odd, 1..23; default: window_size.",
              tensor=True),
          Arg("scale", "floats", None, "Factor of each partial derivative (one, or one per axis); default 1.",
              tensor=True),
          Arg("normalized_kernel", "bool", False, "Scale the partial derivatives by their kernels' weight."),
          Arg("dtype", "dtype", None, "Output type: FLOAT, or unset for the input type.")),
))
