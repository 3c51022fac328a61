"""Random crop windows (the "random resized crop" window of Inception training), vectorised over samples.

``random_crop_windows`` is a pure function: per-sample image sizes and per-sample uniform draws in,
integer windows out. It does no I/O and keeps no state, so the operators that use it
(``fn.decoders.image_random_crop``; ``fn.random_resized_crop`` shares it) get windows that depend
only on (seed, iteration, sample). The draws come from ``jaxdali.ops.rng.uniform(keys,
crop_window_draws(num_attempts), stream)``.

The algorithm, for an image of H x W, area range [lo, hi] and aspect-ratio range [rlo, rhi]
(aspect ratio = width / height):

1. Extreme shapes exit early. If even a full-height window at the widest allowed ratio is smaller
   than lo*H*W (H*rhi < lo*W), the window is h = H, w = H*rhi. Symmetrically, for a very tall
   image (W/rlo < lo*H) the window is w = W, h = W/rlo.
2. Otherwise up to ``num_attempts`` candidates are drawn: area = U(lo, hi)*H*W, ratio log-uniform
   in [rlo, rhi], w = round(sqrt(area*ratio)), h = round(sqrt(area/ratio)) (each at least 1). The
   first candidate with w <= W, h <= H and rlo <= w/h <= rhi is taken.
3. When every attempt fails, the whole image is clamped to the ratio range (h = H, w = H*rhi when
   too wide; w = W, h = W/rlo when too tall) and then shrunk, keeping its ratio, until its area is
   at most hi*H*W.
4. The position is uniform over the integers y in [0, H-h], x in [0, W-w].

The random streams are not DALI's, so windows are not DALI's bit for bit; their distribution is.
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops.schema import OpArgumentError

__all__ = ["crop_window_draws", "random_crop_windows", "check_ranges"]


def crop_window_draws(num_attempts: int) -> int:
    """Number of uniform draws per sample that ``random_crop_windows`` consumes."""
    return 2 * int(num_attempts) + 2


def check_ranges(op: str, random_area, random_aspect_ratio, num_attempts: int) -> tuple[tuple, tuple]:
    """Validates the window arguments; returns ((lo, hi), (rlo, rhi)). Errors name ``fn.<op>``.

    As in DALI, a single value v means [v, v], ``random_area`` may exceed 1 (such candidates are
    rejected) and ``num_attempts=0`` goes straight to the fallback. Aspect ratios must be > 0
    because they are drawn log-uniformly.
    """

    def pair(name, value, positive):
        v = tuple(float(x) for x in value)
        if len(v) == 1:
            v = (v[0], v[0])
        if len(v) != 2:
            raise OpArgumentError(f"fn.{op}: argument '{name}' must have 1 or 2 elements [min, max], got {list(value)}")
        if not v[0] <= v[1]:
            raise OpArgumentError(f"fn.{op}: argument '{name}' must satisfy min <= max (provided empty range), "
                                  f"got {list(value)}")
        if positive and not v[0] > 0:
            raise OpArgumentError(f"fn.{op}: argument '{name}' must be > 0, got {list(value)}")
        if not positive and not v[0] >= 0:
            raise OpArgumentError(f"fn.{op}: argument '{name}' must be >= 0, got {list(value)}")
        return v

    area = pair("random_area", random_area, positive=False)
    ratio = pair("random_aspect_ratio", random_aspect_ratio, positive=True)
    if int(num_attempts) < 0:
        raise OpArgumentError(f"fn.{op}: argument 'num_attempts' must be >= 0, got {num_attempts}")
    return area, ratio


def random_crop_windows(heights, widths, uniforms, random_area=(0.08, 1.0),
                        random_aspect_ratio=(3 / 4, 4 / 3), num_attempts: int = 10):
    """Random crop windows for a batch of images.

    Args:
      heights, widths: integer arrays of shape (n,), each image's size (at least 1).
      uniforms: float array of shape (n, crop_window_draws(num_attempts)) of values in [0, 1), e.g.
        ``rng.uniform(keys, crop_window_draws(num_attempts), stream)``. Columns 0..A-1 give the
        areas, A..2A-1 the aspect ratios, and the last two the y and x positions.
      random_area: [lo, hi], the window's area as a fraction of the image's.
      random_aspect_ratio: [rlo, rhi], the range of width / height.
      num_attempts: candidates drawn before the fallback.

    Returns:
      (y, x, h, w), four int64 arrays of shape (n,): top-left corner and size of each window, with
      0 <= y, 0 <= x, 1 <= h, 1 <= w, y + h <= H and x + w <= W.
    """
    H = np.asarray(heights, np.float64).reshape(-1)
    W = np.asarray(widths, np.float64).reshape(-1)
    n = H.shape[0]
    A = int(num_attempts)
    u = np.asarray(uniforms, np.float64)
    u = u.reshape(n, u.size // n if n else crop_window_draws(A))
    if u.shape[1] < crop_window_draws(A):
        raise ValueError(f"random_crop_windows: need {crop_window_draws(A)} uniforms per sample for "
                         f"num_attempts={A}, got {u.shape[1]}")
    if n and (H.min() < 1 or W.min() < 1):
        raise ValueError(f"random_crop_windows: image sizes must be >= 1, got heights {H.tolist()} "
                         f"and widths {W.tolist()}")
    lo, hi = (float(v) for v in random_area)
    rlo, rhi = (float(v) for v in random_aspect_ratio)

    # 2. All candidates at once: (n, A).
    area = (lo + u[:, :A] * (hi - lo)) * (H * W)[:, None]
    log_lo, log_hi = np.log(rlo), np.log(rhi)
    ratio = np.exp(log_lo + u[:, A:2 * A] * (log_hi - log_lo))
    cw = np.maximum(np.rint(np.sqrt(area * ratio)), 1.0)
    ch = np.maximum(np.rint(np.sqrt(area / ratio)), 1.0)
    cratio = cw / ch
    ok = (cw <= W[:, None]) & (ch <= H[:, None]) & (cratio >= rlo) & (cratio <= rhi)
    if A:
        first = np.argmax(ok, axis=1)  # the first accepted candidate (0 when none is)
        found = ok[np.arange(n), first]
        w = cw[np.arange(n), first]
        h = ch[np.arange(n), first]
    else:
        found = np.zeros(n, bool)
        w = h = np.zeros(n)

    # 3. Fallback: clamp the whole image to the ratio range, then shrink to area <= hi*H*W.
    fw, fh = W.copy(), H.copy()
    too_wide = W > H * rhi
    too_tall = W < H * rlo
    fw = np.where(too_wide, H * rhi, fw)
    fh = np.where(too_tall, W / rlo, fh)
    scale = np.sqrt(np.minimum(1.0, hi * H * W / (fw * fh)))
    fw = np.clip(np.rint(fw * scale), 1, W)
    fh = np.clip(np.rint(fh * scale), 1, H)
    w = np.where(found, w, fw)
    h = np.where(found, h, fh)

    # 1. Early exits for extreme shapes (they win over the attempts).
    wide_exit = H * rhi < lo * W
    tall_exit = W / rlo < lo * H
    w = np.where(wide_exit, np.clip(np.rint(H * rhi), 1, W), w)
    h = np.where(wide_exit, H, h)
    w = np.where(tall_exit, W, w)
    h = np.where(tall_exit, np.clip(np.rint(W / rlo), 1, H), h)

    # 4. Uniform integer position.
    y = np.floor(u[:, 2 * A] * (H - h + 1))
    x = np.floor(u[:, 2 * A + 1] * (W - w + 1))
    y = np.minimum(y, H - h)
    x = np.minimum(x, W - w)
    return y.astype(np.int64), x.astype(np.int64), h.astype(np.int64), w.astype(np.int64)
