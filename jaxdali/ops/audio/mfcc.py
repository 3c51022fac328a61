"""``fn.mfcc``: mel-frequency cepstral coefficients, a DCT (types I-IV) along one axis of a mel spectrogram.

The DCT is a cached (n_mfcc, N) matrix applied with one ``tensordot`` per sample; ``lifter`` scales
coefficient ``i`` by ``1 + (lifter / 2) sin(pi (i + 1) / lifter)``.
"""

from __future__ import annotations

import functools

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["MFCC", "dct_matrix"]


@functools.lru_cache(maxsize=32)
def dct_matrix(dct_type: int, n: int, count: int, normalize: bool, lifter: float) -> np.ndarray:
    """The (count, n) float32 DCT of ``dct_type`` (unnormalised as in the textbook sums, or orthonormal),
    its rows scaled by the lifter when ``lifter > 0``."""
    k = np.arange(count, dtype=np.float64)[:, None]
    i = np.arange(n, dtype=np.float64)[None, :]
    if dct_type == 1:
        m = np.cos(np.pi / max(n - 1, 1) * i * k)
        m[:, 0] *= 0.5
        m[:, -1] *= 0.5
    elif dct_type == 2:
        m = np.cos(np.pi / n * (i + 0.5) * k)
        if normalize:
            m *= np.where(k == 0, np.sqrt(1.0 / n), np.sqrt(2.0 / n))
    elif dct_type == 3:
        m = np.cos(np.pi / n * i * (k + 0.5))
        if normalize:
            m *= np.where(i == 0, np.sqrt(1.0 / n), np.sqrt(2.0 / n))
        else:
            m[:, 0] *= 0.5
    else:
        m = np.cos(np.pi / n * (i + 0.5) * (k + 0.5))
        if normalize:
            m *= np.sqrt(2.0 / n)
    if lifter > 0:
        m *= 1.0 + (lifter / 2.0) * np.sin(np.pi * (k + 1.0) / lifter)
    return m.astype(np.float32)


class Mfcc(Operator):
    """``dct_matrix`` applied along ``axis`` of each sample."""

    def __init__(self, node, build):
        super().__init__(node, build)
        if self.args["normalize"] and self.args["dct_type"] == 1:
            raise OpArgumentError("fn.mfcc: argument 'normalize' is not supported with 'dct_type' 1")

    def run(self, ctx, inputs, args):
        (x,) = inputs
        if x.np_dtype != np.float32:
            raise TypeError(f"fn.mfcc: the input must be FLOAT (float32), got {x.np_dtype}")
        ndim = x.ndim()
        axis = self.args["axis"]
        if not 0 <= axis < ndim:
            raise OpArgumentError(f"fn.mfcc: argument 'axis' is {axis}, out of range for {ndim}-D input")
        samples = x.samples()
        out: list = [None] * len(samples)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                s = samples[i]
                n = s.shape[axis]
                m = dct_matrix(self.args["dct_type"], n, min(self.args["n_mfcc"], n), self.args["normalize"],
                               self.args["lifter"])
                out[i] = np.ascontiguousarray(np.moveaxis(np.tensordot(m, s, axes=([1], [axis])), 0, axis))

        ctx.parallel_for(work, len(samples))
        return TensorListCPU(out, x.layout())


MFCC = register(OpSchema(
    name="mfcc", impl=Mfcc, devices=("cpu", "gpu"),
    doc="Mel-frequency cepstral coefficients: the first `n_mfcc` coefficients of a DCT (type `dct_type`, "
        "orthonormal with `normalize`) along `axis` of a mel spectrogram, optionally liftered.\n\n.. note:: "
        "Within float32 summation order of DALI 2.4 (relative 1e-5). With device='gpu' it runs on the host.",
    args=(Arg("n_mfcc", "int", 20, "Number of coefficients (at most the axis' length).", min=1),
          Arg("dct_type", "int", 2, "DCT type, 1 to 4.", choices=(1, 2, 3, 4)),
          Arg("normalize", "bool", False, "Orthonormal DCT (not with type 1)."),
          Arg("axis", "int", 0, "Axis transformed (the mel axis).", min=0),
          Arg("lifter", "float", 0.0, "Cepstral lifter coefficient (0: none).", min=0)),
))
