"""The building blocks of the crop, flip and normalise operators, for the host (NumPy) and the device
(``jax.numpy``); ``fn.crop``, ``fn.flip``, ``fn.normalize`` and ``fn.crop_mirror_normalize`` compose them.

* crop: ``copy_window`` (host, one sample) and ``device_window`` (device, a dense batch);
* flip: ``flipped`` (host, a view of one sample) and ``device_flip`` (device, per-sample flags);
* normalise: ``normalize`` (``(x - offset) * factor`` in float32, host or device),
  ``normalize_into`` (host, written into a float32 destination; uint8 images by the compiled kernel
  ``_normalize_kernel.c`` without the GIL where it is built, else by NumPy) and
  ``normalize_batch_into`` (the same for a batch of equally shaped images, mirrored per sample, in one
  kernel call).

The float32 operations are the same on both sides, in the same order, so host and device give the
same bits.
"""

from __future__ import annotations

import pathlib
from typing import Any, Sequence

import numpy as np

from jaxdali.core import options
from jaxdali.ops.crop_plan import window_slices
from jaxdali.ops.kernel_loader import load_kernel
from jaxdali.ops.layouts import channel_shape

__all__ = ["copy_window", "device_window", "flipped", "device_flip", "normalize", "normalize_into",
           "normalize_batch_into", "normalize_kernel_status"]

_KERNEL, _KERNEL_REASON = load_kernel("jaxdali.ops._normalize_kernel",
                                      pathlib.Path(__file__).with_name("_normalize_kernel.c"), "normalisation kernel")


def normalize_kernel_status() -> tuple[str, str]:
    """Which path ``normalize_into`` takes for uint8 images, ``"compiled kernel"`` or ``"numpy fallback"``, and
    why."""
    if options.get("disable_kernel"):
        return "numpy fallback", "disabled by config 'disable_kernel' (JAXDALI_DISABLE_KERNEL)"
    if _KERNEL is None:
        return "numpy fallback", f"compiled kernel {_KERNEL_REASON}"
    return "compiled kernel", _KERNEL_REASON

# -- crop ------------------------------------------------------------------------------------------


def copy_window(src: np.ndarray, dst: np.ndarray, anchor: Sequence[int], fill, layout: str, store=None) -> None:
    """Writes the window of ``src`` starting at ``anchor`` into ``dst`` (the window's shape).

    Parts of the window outside ``src`` (channels included: a ``dst`` with more channels than ``src``
    gets padding channels) get ``fill``, one value per channel of ``dst`` already in its type, or a
    function that returns them (called only when needed).
    ``store(dst_part, src_part)`` writes the part inside ``src`` (default ``np.copyto``; an operator
    passes its conversion or normalisation).
    """
    src_sl, dst_sl, outside = window_slices(anchor, dst.shape, src.shape)
    if outside:
        fill = fill() if callable(fill) else fill
        dst[...] = fill.reshape(channel_shape(layout, dst.ndim, fill.size))
    region = src[src_sl]
    if region.size:
        (store or np.copyto)(dst[dst_sl], region)


def device_window(x, anchors: Sequence[Any], sizes: Sequence[int]):
    """Device crop of a dense batch ``x`` (batch axis first) to windows of static ``sizes``.

    ``anchors`` holds, per sample axis, an int (the same for every sample) or an int32 array of
    shape (batch,) with positions from ``crop_anchor`` (so a window no larger than the input stays
    inside it). Returns (window, mask): mask is None when every window lies inside the input,
    otherwise a boolean array that broadcasts against the window's leading axes and is False where
    the window is outside the input (the caller fills those elements).
    """
    import jax
    import jax.numpy as jnp
    from jax import lax

    shape = x.shape[1:]
    pads = []
    for a, n, e in zip(anchors, sizes, shape):
        if isinstance(a, (int, np.integer)):
            pads.append((max(-int(a), 0), max(int(a) + n - e, 0)))
        else:
            pads.append((max(n - e, 0),) * 2)
    if any(lo or hi for lo, hi in pads):
        x = jnp.pad(x, [(0, 0)] + pads)
    starts = [a + lo for a, (lo, _) in zip(anchors, pads)]
    if all(isinstance(s, (int, np.integer)) for s in starts):
        window = x[(slice(None),) + tuple(slice(int(s), int(s) + n) for s, n in zip(starts, sizes))]
    else:
        batch = x.shape[0]
        table = jnp.stack([jnp.broadcast_to(jnp.asarray(s, jnp.int32), (batch,)) for s in starts], axis=1)
        window = jax.vmap(lambda xi, st: lax.dynamic_slice(xi, tuple(st[k] for k in range(len(sizes))), sizes))(
            x, table)
    mask = None
    ndim = len(sizes)
    for axis, (a, n, e, (lo, hi)) in enumerate(zip(anchors, sizes, shape, pads)):
        if not (lo or hi):
            continue
        pos = jnp.arange(n, dtype=jnp.int32) + jnp.asarray(a, jnp.int32)[..., None]
        inside = (pos >= 0) & (pos < e)
        inside = inside.reshape((-1,) + (1,) * axis + (n,) + (1,) * (ndim - axis - 1))
        mask = inside if mask is None else mask & inside
    return window, mask


# -- flip ------------------------------------------------------------------------------------------


def flipped(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """A view of ``x`` reversed along ``axes``."""
    index = [slice(None)] * x.ndim
    for axis in axes:
        index[axis] = slice(None, None, -1)
    return x[tuple(index)]


def device_flip(x, axis: int, flag):
    """The batch ``x`` reversed along ``axis`` (batch axis included in the count) where ``flag`` is
    non-zero: a constant (the whole batch) or one value per sample."""
    import jax.numpy as jnp

    if isinstance(flag, (bool, int, np.integer)):
        return jnp.flip(x, axis) if flag else x
    flag = jnp.reshape(flag, (-1,) + (1,) * (x.ndim - 1))
    return jnp.where(flag != 0, jnp.flip(x, axis), x)


# -- normalise -------------------------------------------------------------------------------------


def normalize(x, offset, factor):
    """``(x - offset) * factor`` in float32 (NumPy or ``jax.numpy`` arrays; ``offset`` and ``factor``
    broadcast against ``x``)."""
    return (x.astype(np.float32) - offset) * factor


def pixel_rows(dst: np.ndarray, src: np.ndarray, offset: np.ndarray, factor: np.ndarray, c_axis: int) -> tuple | None:
    """Channels-last ``dst`` and ``src`` (..., W, C) as rows (..., W * C) with the per-channel ``offset``
    and ``factor`` tiled along a row; None unless channels are last and ``dst``'s pixels are contiguous.

    NumPy's inner loop then runs over a whole row instead of C (3) values at a time, several times
    faster for interleaved (HWC) output, with the same float32 operation on every element. A mirrored
    ``dst`` (negative W stride) is written in memory order from a copy of ``src`` with its pixels reversed.
    """
    if c_axis != dst.ndim - 1 or dst.ndim < 2:
        return None
    w_axis = dst.ndim - 2
    width, channels = dst.shape[-2:]
    if channels < 2 or dst.strides[-1] != dst.itemsize or abs(dst.strides[-2]) != channels * dst.itemsize:
        return None
    if dst.strides[w_axis] < 0:
        backwards = (slice(None),) * w_axis + (slice(None, None, -1),)
        # Whole pixels reversed at a time (one C-value item each), not one channel value at a time.
        pixels = np.ascontiguousarray(src).view(np.dtype((np.void, channels * src.itemsize)))
        dst, src = dst[backwards], np.ascontiguousarray(pixels[backwards]).view(src.dtype)
    merged = dst.shape[:-2] + (width * channels,)
    return dst.reshape(merged), src.reshape(merged), np.tile(offset, width), np.tile(factor, width)


def normalize_into(src: np.ndarray, dst: np.ndarray, offset: np.ndarray, factor: np.ndarray, c_axis: int) -> None:
    """``normalize(src, ...)`` written into the float32 array ``dst`` (of ``src``'s shape, any strides);
    ``offset`` and ``factor`` hold one value per channel (axis ``c_axis``)."""
    if (_KERNEL is not None and src.dtype == np.uint8 and src.ndim == 3 and c_axis == 2 and dst.dtype == np.float32
            and not options.get("disable_kernel")):
        # One pass without the GIL, whatever dst's strides (a transposed, mirrored view of a CHW output).
        _KERNEL.normalize(src, dst, np.ascontiguousarray(offset, np.float32).reshape(-1),
                          np.ascontiguousarray(factor, np.float32).reshape(-1))
        return
    rows = pixel_rows(dst, src, offset, factor, c_axis)
    if rows is not None:
        dst, src, offset, factor = rows
        np.subtract(src, offset, out=dst, dtype=np.float32)
        np.multiply(dst, factor, out=dst)
        return
    if dst.strides[c_axis] != dst.itemsize:
        # Planar output (e.g. HWC -> CHW): one channel at a time, so every write is contiguous
        # (about 4x faster than writing through the transposed view; the same float32 operations).
        for ch in range(src.shape[c_axis]):
            sel = (slice(None),) * c_axis + (ch,)
            plane = dst[sel]
            np.subtract(src[sel], offset[ch], out=plane, dtype=np.float32)
            np.multiply(plane, factor[ch], out=plane)
        return
    shape = [1] * src.ndim
    shape[c_axis] = -1
    np.subtract(src, offset.reshape(shape), out=dst, dtype=np.float32)
    np.multiply(dst, factor.reshape(shape), out=dst)


def normalize_batch_into(samples: Sequence[np.ndarray], dst: np.ndarray, offset: np.ndarray, factor: np.ndarray,
                         mirror: np.ndarray | None) -> None:
    """``normalize_into(samples[i], dst[i] (its W axis reversed where mirror[i]), ...)`` for every sample:
    (H, W, C) uint8 images of one shape into the float32 ``dst`` (n, H, W, C), any strides (a CHW batch seen
    in HWC order), channels last. One call of the compiled kernel for the whole batch, else sample by sample."""
    if (_KERNEL is not None and not options.get("disable_kernel") and dst.dtype == np.float32
            and all(s.dtype == np.uint8 for s in samples)):
        flags = None if mirror is None else np.ascontiguousarray(mirror, np.int32)
        _KERNEL.normalize_batch(samples, dst, np.ascontiguousarray(offset, np.float32).reshape(-1),
                                np.ascontiguousarray(factor, np.float32).reshape(-1), flags)
        return
    for i, sample in enumerate(samples):
        normalize_into(sample, flipped(dst[i], [1] if mirror is not None and mirror[i] else []), offset, factor, 2)
