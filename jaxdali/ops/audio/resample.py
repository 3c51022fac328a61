"""``fn.audio_resample``: windowed-sinc resampling of 1-D signals or (time, channels) interleaved audio.

The rate ratio comes from ``in_rate``/``out_rate``, ``scale`` (out/in) or ``out_length``, each a
constant or per sample. Values are resampled as they are (an INT16 signal stays in its range) in
float32; with a different output ``dtype`` the input is first scaled to -1..1 and the result to the
target type's range (``normalize``).
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.audio import sinc
from jaxdali.ops.audio.normalize import from_unit_range, to_unit_range
from jaxdali.ops.convert import convert
from jaxdali.ops.layouts import sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU
from jaxdali.types import to_numpy_type

__all__ = ["AUDIO_RESAMPLE"]

_OP = "audio_resample"


class AudioResample(Operator):
    """Per-sample rate ratio and output length; ``sinc.resample`` over each signal on the worker pool."""

    def __init__(self, node, build):
        super().__init__(node, build)
        given = {name for name in ("in_rate", "out_rate", "scale", "out_length")
                 if node.args.get(name) is not None or name in node.arg_inputs}
        rates = {"in_rate", "out_rate"} & given
        if len(rates) == 1:
            raise OpArgumentError(f"fn.{_OP}: arguments 'in_rate' and 'out_rate' must be given together "
                                  f"(got only '{rates.pop()}')")
        modes = [m for m in ("rates" if rates else None, "scale" if "scale" in given else None,
                             "out_length" if "out_length" in given else None) if m]
        if len(modes) != 1:
            raise OpArgumentError(f"fn.{_OP}: give exactly one of 'in_rate' with 'out_rate', 'scale' or "
                                  f"'out_length' (got {modes or 'none'})")
        self._mode = modes[0]
        dtype = self.args["dtype"]
        self._dtype = None if dtype is None else np.dtype(to_numpy_type(dtype))
        self._lobes = sinc.lobes_for_quality(self.args["quality"])

    def _plan(self, args, lengths: list[int], names: list[str]) -> tuple[np.ndarray, np.ndarray, list[int]]:
        """Per sample (in_rate, out_rate, output length)."""
        n = len(lengths)
        # DALI's rate arguments are float32: the output length is computed from those values.
        if self._mode == "rates":
            in_rate = args.per_sample("in_rate", np.float32).astype(np.float64)
            out_rate = args.per_sample("out_rate", np.float32).astype(np.float64)
        elif self._mode == "scale":
            in_rate, out_rate = np.ones(n), args.per_sample("scale", np.float32).astype(np.float64)
        else:
            out_len = args.per_sample("out_length", np.int64)
            bad = np.flatnonzero(out_len < 0)
            if bad.size:
                raise ValueError(f"fn.{_OP}: argument 'out_length' must be >= 0, got {out_len[bad[0]]} for "
                                 f"{names[bad[0]]}")
            in_rate = np.asarray(lengths, np.float64)
            out_rate = out_len.astype(np.float64)
            out_rate[in_rate == 0] = 1.0
            in_rate[in_rate == 0] = 1.0
            return in_rate, out_rate, [int(v) for v in out_len]
        for name, values in (("in_rate", in_rate), ("out_rate", out_rate)):
            bad = np.flatnonzero(~(values > 0))
            if bad.size:
                shown = "scale" if self._mode == "scale" else name
                raise ValueError(f"fn.{_OP}: argument '{shown}' must be > 0, got {values[bad[0]]} for "
                                 f"{names[bad[0]]}")
        return in_rate, out_rate, [sinc.resampled_length(k, a, b) for k, a, b in zip(lengths, in_rate, out_rate)]

    def run(self, ctx, inputs, args):
        (x,) = inputs
        n = len(x)
        if x.ndim() not in (1, 2):
            raise ValueError(f"fn.{_OP}: the input must be 1-D (time) or 2-D (time, channels), got "
                             f"{x.ndim()} dimensions")
        samples = x.samples()
        names = [sample_name(x.source_info, i) for i in range(n)]
        in_rate, out_rate, out_lengths = self._plan(args, [s.shape[0] for s in samples], names)
        src_dtype = x.np_dtype
        dtype = self._dtype or src_dtype
        out: list = [None] * n

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                if dtype == src_dtype:
                    y = sinc.resample(samples[i], in_rate[i], out_rate[i], self._lobes, out_lengths[i])
                    out[i] = convert(y, dtype)
                else:
                    y = sinc.resample(to_unit_range(samples[i]), in_rate[i], out_rate[i], self._lobes,
                                      out_lengths[i])
                    out[i] = from_unit_range(y, dtype)

        ctx.parallel_for(work, n)
        return TensorListCPU(out, x.layout())


AUDIO_RESAMPLE = register(OpSchema(
    name=_OP, impl=AudioResample, devices=("cpu", "gpu"),
    doc="Resamples audio, 1-D (time) or 2-D (time, channels), with a windowed-sinc filter; give `in_rate` and "
        "`out_rate`, or `scale`, or `out_length`. Integer types are resampled in their own range; a "
        "different `dtype` rescales through -1..1.\n\n.. note:: Within 3e-4 of the signal's peak of DALI 2.4 "
        "(1e-6 when the rate ratio is exact in float32): outputs sit at their exact input positions, which "
        "DALI advances in float32 steps. With device='gpu' it runs on the host.",
    args=(Arg("in_rate", "float", None, "Input sampling rate (with `out_rate`).", tensor=True),
          Arg("out_rate", "float", None, "Output sampling rate (with `in_rate`).", tensor=True),
          Arg("scale", "float", None, "Output rate / input rate.", tensor=True),
          Arg("out_length", "int", None, "Requested output length in samples.", tensor=True),
          Arg("dtype", "dtype", None, "Output type (unset: the input's)."),
          Arg("quality", "float", 50.0, "Resampling quality, 0 (3 sinc lobes) to 100 (64 lobes).", min=0, max=100)),
))
