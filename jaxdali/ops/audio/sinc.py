"""Windowed-sinc resampling of 1-D signals (optionally with interleaved channels), as DALI does it.

The kernel is ``sinc(x) * hann(x / lobes)`` over ``[-lobes, lobes]`` input samples, tabulated at 64
points per lobe and linearly interpolated, never widened when downsampling (DALI's choice). Output
sample ``j`` sits at input position ``j * in_rate / out_rate`` and takes the ``2 * lobes`` input
samples around it (those outside the signal count as zeros). ``quality`` (0..100) maps to the lobe
count ``round(0.007 q^2 - 0.09 q + 3)``: 3 at 0, 16 at 50, 64 at 100.

Positions are exact. (DALI advances them in float32 steps within blocks of 256 outputs; where the
rate ratio is not exact in float32 its outputs drift from these by up to about 1e-4 of the signal's
peak.) When the ratio is a fraction ``M / L`` with few phases ``L`` (44100 -> 16000: 441 / 160), the
output splits into ``L`` phases that share one set of weights each, and every phase is one strided
product over the input's windows: a polyphase filter with no gather. Other ratios gather the taps of
blocks of outputs. Neither has per-sample Python loops.
"""

from __future__ import annotations

import fractions
import functools
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["lobes_for_quality", "resampled_length", "resample"]

#: Tabulated kernel points per lobe.
_POINTS_PER_LOBE = 64
#: Output samples computed per vectorised step of the general path (bounds its gathered taps).
_BLOCK = 8192
#: The polyphase path is taken for ratios with at most this many phases...
_MAX_PHASES = 1024
#: ... when each phase has at least this many outputs.
_MIN_OUTPUTS_PER_PHASE = 16


def lobes_for_quality(quality: float) -> int:
    """Number of sinc lobes on each side of the kernel for a resampling ``quality`` in [0, 100]."""
    return int(round(0.007 * quality * quality - 0.09 * quality + 3))


def resampled_length(in_length: int, in_rate: float, out_rate: float) -> int:
    """Output samples of a signal of ``in_length`` samples resampled from ``in_rate`` to ``out_rate``."""
    if in_rate == out_rate:
        return in_length
    return int(math.ceil(in_length * out_rate / in_rate))


@functools.lru_cache(maxsize=16)
def _kernel_table(lobes: int) -> tuple[np.ndarray, np.ndarray, np.float32, np.float32]:
    """(table, slope, scale, center): the kernel at ``x`` is ``table`` linearly interpolated at
    ``x * scale + center``; ``slope[i] = table[i + 1] - table[i]``."""
    coeffs = lobes * _POINTS_PER_LOBE + 1
    step = 2.0 * lobes / (coeffs - 1)
    i = np.arange(coeffs, dtype=np.float64) - (coeffs - 1) * 0.5
    # DALI's Hann envelope spans ``coeffs`` (not ``coeffs - 1``) table steps: slightly wider than the sinc.
    hann = 0.5 * (1.0 + np.cos(np.pi * i * np.float32(2.0 / coeffs)))
    table = np.zeros(coeffs + 2, np.float32)  # zero guards: interpolation past the ends stays 0
    table[:coeffs] = np.sinc(i * np.float32(step)) * hann
    return table, np.diff(table), np.float32(1.0 / step), np.float32((coeffs - 1) * 0.5)


def _tap_weights(first: np.ndarray, lobes: int) -> np.ndarray:
    """(n, 2 * lobes) float32 weights of the taps ``x = first, first + 1, ...`` (offsets of the input samples
    from the output's position, ``first`` in [-lobes, 1 - lobes))."""
    table, slope, scale, center = _kernel_table(lobes)
    x = first.astype(np.float32)[:, None] + np.arange(2 * lobes, dtype=np.float32)
    t = x * scale + center
    ti = t.astype(np.int32)  # t >= 0: truncation is floor
    frac = t - ti.astype(np.float32)
    return table[ti] + frac * slope[ti]


def _phases(in_rate: float, out_rate: float, n_out: int) -> tuple[int, int] | None:
    """(M, L) with in_rate / out_rate == M / L exactly, when the polyphase path suits the ratio."""
    ratio = fractions.Fraction(in_rate) / fractions.Fraction(out_rate)
    if ratio.denominator > _MAX_PHASES or n_out < ratio.denominator * _MIN_OUTPUTS_PER_PHASE:
        return None
    return ratio.numerator, ratio.denominator


def resample(signal: np.ndarray, in_rate: float, out_rate: float, lobes: int, out_length: int | None = None,
             out: np.ndarray | None = None) -> np.ndarray:
    """``signal`` (samples,) or (samples, channels), any real dtype, resampled to float32.

    ``out_length`` defaults to ``resampled_length``; ``out`` is an optional float32 destination.
    """
    n_in = signal.shape[0]
    if out_length is None:
        out_length = resampled_length(n_in, in_rate, out_rate)
    if out is None:
        out = np.empty((out_length,) + signal.shape[1:], np.float32)
    src = signal.astype(np.float32, copy=False).reshape(n_in, -1)
    dst = out.reshape(out_length, -1)
    if in_rate == out_rate and out_length == n_in:
        dst[...] = src
        return out
    if not out_length:
        return out
    # Zeros around the signal: every tap of every output reads inside the padded array.
    reach = int(math.ceil((out_length - 1) * in_rate / out_rate)) + lobes + 1
    padded = np.zeros((lobes + max(n_in, reach) + 1, src.shape[1]), np.float32)
    padded[lobes:lobes + n_in] = src
    phases = _phases(in_rate, out_rate, out_length)
    if phases is not None:
        _polyphase(padded, dst, *phases, lobes)
    else:
        _gathered(padded, dst, in_rate / out_rate, lobes)
    return out


def _polyphase(padded: np.ndarray, dst: np.ndarray, m: int, n_phases: int, lobes: int) -> None:
    """Output ``j = q * L + r`` sits at ``q * M + r * M / L``: phase ``r`` uses one weight row for all ``q``,
    over the input windows starting every ``M`` samples."""
    r = np.arange(n_phases)
    ceil_r = -((-r * m) // n_phases)  # ceil(r * M / L), exact
    weights = _tap_weights((ceil_r - lobes) - (r * m) / n_phases, lobes)  # (L, taps)
    windows = sliding_window_view(padded, 2 * lobes, axis=0)  # (n, channels, taps), a view
    for phase in range(n_phases):
        count = len(range(phase, dst.shape[0], n_phases))
        start = ceil_r[phase]  # first tap of output q=0, in the padded signal (offset -lobes + lobes)
        rows = windows[start:start + (count - 1) * m + 1:m]
        np.einsum("nct,t->nc", rows, weights[phase], out=dst[phase::n_phases])


def _gathered(padded: np.ndarray, dst: np.ndarray, scale: float, lobes: int) -> None:
    """Any ratio: the taps of each block of outputs gathered and weighted."""
    windows = sliding_window_view(padded, 2 * lobes, axis=0)  # (n, channels, taps), a view
    for start in range(0, dst.shape[0], _BLOCK):
        pos = np.arange(start, min(start + _BLOCK, dst.shape[0]), dtype=np.float64) * scale
        first = np.ceil(pos).astype(np.int64)  # index of the first tap in the padded signal (ceil - lobes + lobes)
        weights = _tap_weights((first - lobes) - pos, lobes)
        np.einsum("nt,nct->nc", weights, windows[first], out=dst[start:start + len(pos)])
