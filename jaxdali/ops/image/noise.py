"""``fn.noise.gaussian``, ``fn.noise.shot``, ``fn.noise.salt_and_pepper``.

Per-element noise is drawn from a NumPy PCG64 generator created for each sample from that sample's
key (``RunContext.sample_keys``): values are a pure function of (seed, iteration, sample), so they
do not depend on threads or prefetching and a pipeline restored from a checkpoint draws the same
noise. Samples are processed on the worker pool (NumPy's generators fill arrays without the GIL).
The distributions are DALI's; its exact random streams are not reproduced.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.geometry import convert, sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.core.buffers import owned_empty
from jaxdali.tensors import TensorListCPU

__all__ = ["GAUSSIAN_NOISE", "SHOT_NOISE", "SALT_AND_PEPPER_NOISE"]


def _work_type(dtype: np.dtype) -> type:
    return np.float64 if dtype == np.float64 else np.float32


class _Noise(Operator):
    """Shared frame: per-sample parameters and generator, output of the input's shape and type."""

    op = ""
    params: tuple[str, ...] = ()

    def sample_params(self, args, i: int, dtype: np.dtype, who: str) -> dict:
        return {name: float(np.asarray(args.sample_value(name, i)).reshape(-1)[0]) for name in self.params}

    def apply(self, src: np.ndarray, dst: np.ndarray, gen: np.random.Generator, params: dict, layout: str) -> None:
        raise NotImplementedError

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        shapes = [tuple(s) for s in x.shape()]
        params = [self.sample_params(args, i, x.np_dtype, sample_name(x, i)) for i in range(n)]
        dense = owned_empty((n,) + shapes[0], x.np_dtype) if n and len(set(shapes)) == 1 else None
        outs = [dense[i] if dense is not None else np.empty(s, x.np_dtype) for i, s in enumerate(shapes)]
        keys = ctx.sample_keys(self.seed)
        samples, layout = x.samples(), x.layout()

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                gen = np.random.Generator(np.random.PCG64(int(keys[i])))
                self.apply(samples[i], outs[i], gen, params[i], layout)

        ctx.parallel_for(work, n)
        return TensorListCPU(dense if dense is not None else outs, layout)


class GaussianNoise(_Noise):
    op = "noise.gaussian"
    params = ("mean", "stddev")

    def sample_params(self, args, i, dtype, who):
        p = super().sample_params(args, i, dtype, who)
        if p["stddev"] < 0:
            raise ValueError(f"fn.{self.op}: argument 'stddev' must be >= 0, got {p['stddev']} for {who}")
        return p

    def apply(self, src, dst, gen, params, layout):
        work = _work_type(src.dtype)
        noisy = gen.standard_normal(src.shape, dtype=work)
        noisy *= work(params["stddev"])
        noisy += work(params["mean"])
        noisy += src
        np.copyto(dst, convert(noisy, dst.dtype), casting="unsafe")


class ShotNoise(_Noise):
    op = "noise.shot"
    params = ("factor",)

    def apply(self, src, dst, gen, params, layout):
        factor = params["factor"]
        if factor == 0:
            np.copyto(dst, src)
            return
        work = _work_type(src.dtype)
        lam = np.maximum(src.astype(work) / work(factor), 0)
        events = gen.poisson(lam).astype(work)
        events *= work(factor)
        np.copyto(dst, convert(events, dst.dtype), casting="unsafe")


class SaltAndPepperNoise(_Noise):
    op = "noise.salt_and_pepper"
    params = ("prob", "salt_vs_pepper")

    def __init__(self, node, build):
        super().__init__(node, build)
        self._per_channel = self.args["per_channel"]

    def sample_params(self, args, i, dtype, who):
        p = super().sample_params(args, i, dtype, who)
        for name in self.params:
            if not 0 <= p[name] <= 1:
                raise ValueError(f"fn.{self.op}: argument '{name}' must be in [0, 1], got {p[name]} for {who}")
        floating = np.dtype(dtype).kind == "f"
        for name, default in (("salt_val", 1.0 if floating else np.iinfo(dtype).max),
                              ("pepper_val", -1.0 if floating else np.iinfo(dtype).min)):
            value = args.sample_value(name, i)
            value = default if value is None else float(np.asarray(value).reshape(-1)[0])
            p[name] = convert(np.asarray([value], np.float64), dtype)[0]
        return p

    def _channel_axis(self, layout: str, ndim: int) -> int | None:
        """The axis sharing one draw per pixel: C, the last axis when the layout is empty, else none."""
        if self._per_channel or ndim == 0:
            return None
        if not layout:
            return ndim - 1
        return layout.index("C") if "C" in layout else None

    def apply(self, src, dst, gen, params, layout):
        c_axis = self._channel_axis(layout, src.ndim)
        draw_shape = list(src.shape)
        if c_axis is not None:
            draw_shape[c_axis] = 1
        u = gen.random(tuple(draw_shape), dtype=np.float32)
        noisy = u < np.float32(params["prob"])
        salt = u < np.float32(params["prob"] * params["salt_vs_pepper"])
        np.copyto(dst, src)
        np.copyto(dst, params["pepper_val"], where=noisy & ~salt)
        np.copyto(dst, params["salt_val"], where=salt)


_NOTE = ("\n\n.. note:: Same distribution as DALI 2.4, different random stream (per-sample PCG64 seeded from the "
         "pipeline seed, iteration and sample: checkpoints resume it exactly). With device='gpu' it runs on the host.")

GAUSSIAN_NOISE = register(OpSchema(
    name="noise.gaussian", impl=GaussianNoise, devices=("cpu", "gpu"),
    doc="Adds Gaussian noise N(mean, stddev) to every element; the output has the input's shape and type "
        "(integers round half away from zero and saturate)." + _NOTE,
    args=(Arg("mean", "float", 0.0, "Mean of the distribution.", tensor=True),
          Arg("stddev", "float", 1.0, "Standard deviation of the distribution.", tensor=True)),
))

SHOT_NOISE = register(OpSchema(
    name="noise.shot", impl=ShotNoise, devices=("cpu", "gpu"),
    doc="Shot (Poisson) noise: out = poisson(max(0, in / factor)) * factor, or the input when factor is 0; "
        "the output has the input's shape and type." + _NOTE,
    args=(Arg("factor", "float", 20.0, "Value of one event (larger: more noise; 0: identity).", tensor=True),),
))

SALT_AND_PEPPER_NOISE = register(OpSchema(
    name="noise.salt_and_pepper", impl=SaltAndPepperNoise, devices=("cpu", "gpu"),
    doc="Replaces each pixel (all its channels, or each element with per_channel=True) by the salt value with "
        "probability prob * salt_vs_pepper and by the pepper value with probability prob * (1 - salt_vs_pepper); "
        "the output has the input's shape and type." + _NOTE,
    args=(Arg("prob", "float", 0.05, "Probability that an element is replaced.", tensor=True),
          Arg("salt_vs_pepper", "float", 0.5, "Probability that a replaced element gets salt.", tensor=True),
          Arg("salt_val", "float", None, "Salt value; default: 1.0 for floats, the type's maximum for integers.",
              tensor=True),
          Arg("pepper_val", "float", None, "Pepper value; default: -1.0 for floats, the type's minimum for "
              "integers.", tensor=True),
          Arg("per_channel", "bool", False, "Draw each channel of a pixel independently.")),
))
