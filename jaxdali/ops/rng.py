"""Counter-based random numbers: every value is a pure function of (seed, iteration, sample, element).

No generator object is shared between threads or carried between batches, so thread scheduling,
prefetch depth and restarts cannot change the data, and a checkpoint needs only the iteration index.
The mixing function is SplitMix64's finaliser applied to a Weyl sequence, vectorised with NumPy.
"""

from __future__ import annotations

import numpy as np

__all__ = ["derive_seed", "sample_keys", "uniform", "normal", "random_seed"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK = (1 << 64) - 1


def _mix(z: np.ndarray) -> np.ndarray:
    z = z ^ (z >> np.uint64(30))  # a new array: the steps below work in place on it
    z *= _M1
    z ^= z >> np.uint64(27)
    z *= _M2
    z ^= z >> np.uint64(31)
    return z


def _mix_int(z: int) -> int:
    """``_mix`` of one 64-bit value with Python integers (no array round trip)."""
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & _MASK
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def derive_seed(*parts: int) -> int:
    """A 64-bit seed that depends on every part (order matters); pure Python integers in and out."""
    h = 0
    for p in parts:
        h = _mix_int(h ^ ((int(p) * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & _MASK))
    return h


def random_seed() -> int:
    """A fresh seed from the OS, for pipelines created without ``seed``."""
    return int(np.random.SeedSequence().generate_state(1, np.uint32)[0])


def sample_keys(seed: int, iteration: int, batch_size: int) -> np.ndarray:
    """One 64-bit key per sample of a batch: (seed, iteration, sample index) -> uint64[batch_size]."""
    base = np.uint64(derive_seed(seed, iteration))
    with np.errstate(over="ignore"):
        return _mix(base + (np.arange(1, batch_size + 1, dtype=np.uint64) * _GOLDEN))


def _bits(keys: np.ndarray, count: int, stream: int) -> np.ndarray:
    """uint64 bits of shape (len(keys), count) for the given stream of each key."""
    offset = np.uint64(derive_seed(stream))
    with np.errstate(over="ignore"):
        counters = (np.arange(1, count + 1, dtype=np.uint64) * _GOLDEN)[None, :]
        return _mix((keys[:, None] ^ offset) + counters)


def uniform(keys: np.ndarray, count: int, stream: int = 0) -> np.ndarray:
    """float64 values uniform in [0, 1), shape (len(keys), count)."""
    return (_bits(keys, count, stream) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def normal(keys: np.ndarray, count: int, stream: int = 0) -> np.ndarray:
    """float64 standard-normal values, shape (len(keys), count) (Box-Muller on two uniform streams)."""
    u1 = uniform(keys, count, stream * 2 + 1)
    u2 = uniform(keys, count, stream * 2 + 2)
    return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
