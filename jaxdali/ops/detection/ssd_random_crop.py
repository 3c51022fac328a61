"""``fn.ssd_random_crop`` (deprecated in DALI for ``fn.random_bbox_crop``): the SSD paper's random crop of
an image with its boxes and labels, in one operator.

Per sample, rounds are drawn until one gives a crop: each round picks one of seven options with equal
probability -- no crop, or a minimum IoU of -1 (any), 0.1, 0.3, 0.5, 0.7 or 0.9 -- and a crop option
makes ``num_attempts`` tries: width and height uniform in [0.3, 1] of the image's (a try whose
width / height ratio is outside [0.5, 2] fails), the top-left corner uniform where the window fits.
A try succeeds when every box has at least the minimum IoU with the window and at least one box's
centre lies inside it. The boxes whose centres lie inside are kept (with their labels), expressed
relative to the window and clamped to [0, 1]; the image is cut at the window's corners rounded to
pixels. DALI loops until a round succeeds; here the draws of 64 rounds are made at once (vectorised
over the batch, rounds, tries and boxes) and, in the rare case that none of them ends (each round ends with
probability at least 1/7), the sample is not cropped. Random values come from the per-sample
counter-based generator (seeds and checkpoints as for every random operator; not DALI's stream).
"""

from __future__ import annotations

import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.convert import round_half_away
from jaxdali.ops.detection.rows import Rows, split_rows
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpSchema, register
from jaxdali.tensors import TensorListCPU

__all__ = ["SSD_RANDOM_CROP"]

_OP = "ssd_random_crop"
#: Minimum IoU of each option; NaN is the no-crop option.
_MIN_IOU = np.array([-1.0, 0.1, 0.3, 0.5, 0.7, 0.9, np.nan], np.float32)
_ROUNDS = 64
#: Rounds evaluated before the others (the chance that none of them ends the draw is below (6/7)^8 = 0.29).
_FIRST_ROUNDS = 8
_F32 = np.float32


def choose_windows(boxes: np.ndarray, present: np.ndarray, u: np.ndarray, attempts: int) -> np.ndarray:
    """The windows (left, top, width, height) chosen for a batch, NaN where a sample is not cropped.

    ``boxes``: (n, N, 4) ltrb, padded; ``present``: (n, N) which of them are real; ``u``: (n, rounds,
    1 + 4 * attempts) draws. The first rounds usually end the draw (each ends with probability at
    least 1/7), so they are evaluated first, and the others only for the samples they did not settle.
    """
    windows = np.full((len(boxes), 4), np.nan)
    pending = np.arange(len(boxes))
    for rounds in (slice(0, _FIRST_ROUNDS), slice(_FIRST_ROUNDS, None)):
        ended, found = _round_windows(boxes[pending], present[pending], u[pending, rounds], attempts)
        windows[pending[ended]] = found[ended]
        pending = pending[~ended]
    return windows


def _round_windows(boxes: np.ndarray, present: np.ndarray, u: np.ndarray, attempts: int):
    """(whether one of these rounds ends each sample's draw, (n, 4) the window it gives, NaN for no crop)."""
    no_crop = len(_MIN_IOU) - 1
    option = np.minimum((u[..., 0] * len(_MIN_IOU)).astype(np.int64), no_crop)  # (n, rounds)
    w = (_F32(0.3) + _F32(0.7) * u[..., 1:1 + attempts]).astype(_F32)  # (n, rounds, attempts)
    h = (_F32(0.3) + _F32(0.7) * u[..., 1 + attempts:1 + 2 * attempts]).astype(_F32)
    left = (u[..., 1 + 2 * attempts:1 + 3 * attempts] * (1 - w)).astype(_F32)
    top = (u[..., 1 + 3 * attempts:] * (1 - h)).astype(_F32)
    ratio = w / h
    valid = (ratio >= 0.5) & (ratio <= 2)
    b = boxes[:, None, None]  # (n, 1, 1, N, 4)
    lx, ty, rx, by = left[..., None], top[..., None], (left + w)[..., None], (top + h)[..., None]
    inter = np.maximum(np.minimum(b[..., 2], rx) - np.maximum(b[..., 0], lx), 0) * \
        np.maximum(np.minimum(b[..., 3], by) - np.maximum(b[..., 1], ty), 0)
    area = (b[..., 3] - b[..., 1]) * (b[..., 2] - b[..., 0])
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / (area + (w * h)[..., None] - inter)
    real = present[:, None, None]
    valid &= ((iou >= _MIN_IOU[option][..., None, None]) | ~real).all(axis=-1)
    xc = (0.5 * (boxes[..., 0].astype(np.float64) + boxes[..., 2]))[:, None, None]
    yc = (0.5 * (boxes[..., 1].astype(np.float64) + boxes[..., 3]))[:, None, None]
    inside = (xc >= lx) & (xc <= lx.astype(np.float64) + w[..., None]) & \
        (yc >= ty) & (yc <= ty.astype(np.float64) + h[..., None])
    valid &= (inside & real).any(axis=-1)
    ends = (option == no_crop) | valid.any(axis=-1)  # (n, rounds)
    r = np.argmax(ends, axis=1)
    a = np.argmax(valid[np.arange(len(r)), r], axis=1)
    index = (np.arange(len(r)), r, a)
    window = np.stack([left[index], top[index], w[index], h[index]], axis=1).astype(np.float64)
    window[option[np.arange(len(r)), r] == no_crop] = np.nan
    return ends.any(axis=1), window


class SSDRandomCrop(Operator):
    """``fn.ssd_random_crop``: the host implementation."""

    def run(self, ctx, inputs, args):
        images, boxes, labels = inputs
        n = len(images)
        if images.ndim() not in (2, 3):
            raise TypeError(f"fn.{_OP}: the image input must be HW or HWC, got {images.ndim()} dimensions")
        if boxes.np_dtype != np.float32:
            raise TypeError(f"fn.{_OP}: the boxes must be float32, got {boxes.np_dtype}; convert with fn.cast")
        rows = Rows.of(boxes, _OP, 4, what="boxes input")
        counts = np.bincount(rows.sample, minlength=n)
        label_samples = labels.samples()
        for i, lab in enumerate(label_samples):
            if lab.ndim not in (1, 2) or lab.ndim == 2 and lab.shape[1] != 1:
                raise ValueError(f"fn.{_OP}: labels of sample {i} must have shape [N] or [N, 1], got {list(lab.shape)}")
        attempts = int(self.args["num_attempts"])
        u = rng.uniform(ctx.sample_keys(self.seed), _ROUNDS * (1 + 4 * attempts)).reshape(n, _ROUNDS, -1)
        per_sample = split_rows(rows.values, counts)
        padded = np.zeros((n, max(counts.max(initial=0), 1), 4), np.float32)
        present = np.arange(padded.shape[1])[None, :] < counts[:, None]
        padded[present] = rows.values
        windows = choose_windows(padded, present, u, attempts)
        samples = images.samples()
        out_images: list = [None] * n
        out_boxes: list = [None] * n
        out_labels: list = [None] * n

        def work(start: int, stop: int) -> None:
            for i in range(start, stop):
                if np.isnan(windows[i, 0]):  # the inputs as they are (outputs are never written to)
                    out_images[i], out_boxes[i], out_labels[i] = samples[i], per_sample[i], label_samples[i]
                    continue
                left, top, w, h = windows[i]
                b = per_sample[i].astype(np.float64)
                keep = (0.5 * (b[:, 0] + b[:, 2]) >= left) & (0.5 * (b[:, 0] + b[:, 2]) <= left + w) & \
                    (0.5 * (b[:, 1] + b[:, 3]) >= top) & (0.5 * (b[:, 1] + b[:, 3]) <= top + h)
                if len(label_samples[i]) != len(b):  # DALI reads past the labels here; uncropped samples pass
                    raise ValueError(f"fn.{_OP}: sample {i} is cropped, which keeps some of its {len(b)} boxes and "
                                     f"their labels, but it has {len(label_samples[i])} labels: give one per box")
                moved = (b[keep] - [left, top, left, top]) / [w, h, w, h]
                out_boxes[i] = np.clip(moved, 0.0, 1.0).astype(np.float32)
                out_labels[i] = np.array(label_samples[i][keep])
                height, width = samples[i].shape[:2]
                x0, x1 = round_half_away(np.array([left, left + w]) * width).astype(np.int64)
                y0, y1 = round_half_away(np.array([top, top + h]) * height).astype(np.int64)
                out_images[i] = samples[i][y0:y1, x0:x1].copy()

        ctx.parallel_for(work, n)
        return [TensorListCPU(out_images, images.layout()), TensorListCPU(out_boxes, boxes.layout()),
                TensorListCPU(out_labels, labels.layout())]


SSD_RANDOM_CROP = register(OpSchema(
    name=_OP, impl=SSDRandomCrop, devices=("cpu",), min_inputs=3, max_inputs=3, num_outputs=3,
    doc="""Deprecated in DALI (use ``fn.random_bbox_crop``): SSD's random crop of an image with its boxes.

Inputs: an HWC or HW image (any type), float32 boxes [N, 4] (ltrb, normalised) and labels [N] (or
[N, 1]); a sample that is cropped needs one label per box (DALI reads past the labels), one that is
not cropped is passed through whatever its labels (as in DALI).
Outputs: the cropped image, the kept boxes relative to the crop (clamped to [0, 1]) and their
labels. See ``jaxdali.ops.detection.ssd_random_crop`` for the draw. Labels keep their input shape
([K] or [K, 1]); DALI 2.4 returns [K] after a crop and fails on batches mixing [N, 1] labels. An HW
image is cropped to an HW window, an image of any type like a uint8 one (DALI 2.4 fails on both).""",
    args=(Arg("num_attempts", "int", 1, "Windows tried per drawn IoU option before another option is drawn.",
              min=1),),
))
