"""The FFT operators: ``fn.power_spectrum`` (one transform along an axis) and ``fn.spectrogram``
(short-time transform of a 1-D signal).

Frames are strided views of the (padded) signal, windowed and transformed by one ``scipy.fft.rfft``
per sample over all its frames at once; no per-frame Python. (SciPy, which JAX requires, transforms
float32 in float32, several times faster than ``numpy.fft``, which works in float64.) SciPy is
imported when the first pipeline using these operators is built: importing it costs ~0.35 s and
~12 MB of PSS that pipelines without audio should not pay.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from jaxdali.core.buffers import owned_empty
from jaxdali.ops.layouts import sample_name
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["POWER_SPECTRUM", "SPECTROGRAM", "hann_window", "magnitude"]


def magnitude(spectrum: np.ndarray, power: int, out: np.ndarray | None = None) -> np.ndarray:
    """float32 ``|X|^2`` (power 2) or ``|X|`` (power 1) of a complex spectrum, into ``out`` if given."""
    sq = np.square(spectrum.real, dtype=np.float32, out=out)
    sq += np.square(spectrum.imag, dtype=np.float32)
    return sq if power == 2 else np.sqrt(sq, out=sq)


@functools.lru_cache(maxsize=32)
def hann_window(length: int) -> np.ndarray:
    """DALI's default window: Hann sampled at the sample centres, ``0.5 * (1 - cos(2 pi (k + 0.5) / length))``."""
    k = np.arange(length, dtype=np.float64) + 0.5
    return (0.5 * (1.0 - np.cos(2.0 * np.pi * k / length))).astype(np.float32)


def _rfft():
    """``scipy.fft.rfft``, imported on first use."""
    import scipy.fft

    return scipy.fft.rfft


def _require_float(op: str, x: TensorListCPU) -> None:
    if x.np_dtype != np.float32:
        raise TypeError(f"fn.{op}: the input must be FLOAT (float32) samples, got {x.np_dtype}")


class PowerSpectrum(Operator):
    """``|rfft(x, nfft)|^power`` along ``axis``; the axis becomes ``nfft // 2 + 1`` bins."""

    def __init__(self, node, build):
        super().__init__(node, build)
        self._rfft = _rfft()

    def run(self, ctx, inputs, args):
        (x,) = inputs
        _require_float("power_spectrum", x)
        ndim = x.ndim()
        axis = self.args["axis"]
        if not -ndim <= axis < ndim:
            raise OpArgumentError(f"fn.power_spectrum: argument 'axis' is {axis}, out of range for "
                                  f"{ndim}-D input")
        axis %= ndim
        nfft, power = self.args["nfft"], self.args["power"]
        dense = x.dense()
        if dense is not None:
            # Samples of one shape: one transform call per thread over its block of samples, which
            # pocketfft runs several transforms at a time (SIMD lanes), 2.5x faster, the same values.
            n = nfft or dense.shape[axis + 1]
            shape = list(dense.shape)
            shape[axis + 1] = n // 2 + 1
            result = owned_empty(shape, np.float32)

            def work_dense(lo: int, hi: int) -> None:
                magnitude(self._rfft(dense[lo:hi], n=n, axis=axis + 1), power, result[lo:hi])

            ctx.parallel_for(work_dense, len(dense))
            return TensorListCPU(result, x.layout())
        samples = x.samples()
        out: list = [None] * len(samples)

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                n = nfft or samples[i].shape[axis]
                out[i] = magnitude(self._rfft(samples[i], n=n, axis=axis), power)

        ctx.parallel_for(work, len(samples))
        return TensorListCPU(out, x.layout())


class Spectrogram(Operator):
    """Frames of ``window_length`` every ``window_step`` samples, windowed, ``rfft`` of ``nfft`` points."""

    def __init__(self, node, build):
        super().__init__(node, build)
        length, step = self.args["window_length"], self.args["window_step"]
        nfft = self.args["nfft"] or length
        if length > nfft:
            raise OpArgumentError(f"fn.spectrogram: argument 'window_length' ({length}) can't be bigger than "
                                  f"'nfft' ({nfft})")
        window = self.args["window_fn"]
        if window is None:
            self._window = hann_window(length)
        elif len(window) != length:
            raise OpArgumentError(f"fn.spectrogram: argument 'window_fn' has {len(window)} values, "
                                  f"'window_length' is {length}")
        else:
            self._window = np.asarray(window, np.float32)
        layout = self.args["layout"]
        if layout not in ("ft", "tf"):
            raise OpArgumentError(f"fn.spectrogram: argument 'layout' must be 'ft' or 'tf', got {layout!r}")
        self._length, self._step, self._nfft = length, step, nfft
        self._rfft = _rfft()

    def run(self, ctx, inputs, args):
        (x,) = inputs
        _require_float("spectrogram", x)
        samples = x.samples()
        out: list = [None] * len(samples)
        names = [sample_name(x.source_info, i) for i in range(len(samples))]
        for i, s in enumerate(samples):
            if sum(d != 1 for d in s.shape) > 1:
                raise ValueError(f"fn.spectrogram: {names[i]}: the input must be 1-D (or have one non-unit "
                                 f"dimension), got shape {s.shape}")

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                out[i] = self._one(samples[i].reshape(-1), names[i])

        ctx.parallel_for(work, len(samples))
        return TensorListCPU(out, self.args["layout"])

    def _one(self, signal: np.ndarray, name: str) -> np.ndarray:
        length, step = self._length, self._step
        if self.args["center_windows"]:
            count = signal.size // step + 1
            signal = _pad(signal, length // 2, (count - 1) * step + length - length // 2 - signal.size,
                          self.args["reflect_padding"])
        else:
            if signal.size < length:
                raise ValueError(f"fn.spectrogram: {name}: the signal ({signal.size} samples) is shorter than "
                                 f"'window_length' ({length})")
            count = (signal.size - length) // step + 1
        frames = as_strided(signal, (count, length), (signal.strides[0] * step, signal.strides[0]), writeable=False)
        spectrum = magnitude(self._rfft(frames * self._window, n=self._nfft, axis=1), self.args["power"])
        return spectrum if self.args["layout"] == "tf" else np.ascontiguousarray(spectrum.T)


def _pad(signal: np.ndarray, before: int, after: int, reflect: bool) -> np.ndarray:
    """``signal`` extended by ``before``/``after`` samples: mirrored (without repeating the edge sample,
    as often as needed) or zeros."""
    after = max(after, 0)
    out = np.zeros(before + signal.size + after, signal.dtype)
    out[before:before + signal.size] = signal
    if reflect and signal.size > 1:
        period = 2 * (signal.size - 1)
        for idx, part in ((np.arange(-before, 0), slice(0, before)),
                          (np.arange(signal.size, signal.size + after), slice(before + signal.size, None))):
            idx = np.abs(idx) % period
            out[part] = signal[np.where(idx >= signal.size, period - idx, idx)]
    return out


POWER_SPECTRUM = register(OpSchema(
    name="power_spectrum", impl=PowerSpectrum,
    doc="Power spectrum (or magnitude) of the real FFT of each sample along one axis; the axis becomes "
        "`nfft // 2 + 1` frequency bins (the signal is cut or zero-padded to `nfft`).\n\n.. note:: Within "
        "float32 FFT rounding of DALI 2.4 (relative 1e-5).",
    args=(Arg("axis", "int", -1, "The transformed axis."),
          Arg("nfft", "int", None, "FFT size (default: the axis' length).", min=1),
          Arg("power", "int", 2, "2: power spectrum, 1: magnitude.", choices=(1, 2))),
))

SPECTROGRAM = register(OpSchema(
    name="spectrogram", impl=Spectrogram, devices=("cpu", "gpu"),
    doc="Short-time Fourier transform of 1-D signals: windows of `window_length` samples every `window_step`, "
        "multiplied by `window_fn` (periodic Hann by default), transformed with `nfft` points. Output "
        "(`nfft // 2 + 1`, windows) with layout \"ft\", or transposed with \"tf\".\n\n.. note:: Within float32 "
        "FFT rounding of DALI 2.4 (relative 1e-5). With device='gpu' it runs on the host.",
    args=(Arg("nfft", "int", None, "FFT size (default: `window_length`).", min=1),
          Arg("window_length", "int", 512, "Window size in samples.", min=1),
          Arg("window_step", "int", 256, "Step between windows in samples.", min=1),
          Arg("window_fn", "floats", None, "Window samples (`window_length` values; default Hann)."),
          Arg("center_windows", "bool", True, "Pad the signal so windows are centred at multiples of the step."),
          Arg("reflect_padding", "bool", True, "Mirror the signal at its ends (else zeros) when centring."),
          Arg("power", "int", 2, "2: power, 1: magnitude.", choices=(1, 2)),
          Arg("layout", "str", "ft", "Output layout: \"ft\" or \"tf\".")),
))
