"""Run-length masks of COCO annotations, and the label image ``fn.readers.coco(pixelwise_masks=True)`` makes.

Masks are column-major run lengths (COCO's RLE): ``counts[0]`` pixels of background, then
``counts[1]`` of foreground, and so on, walking down each column left to right. Polygons are
rasterised the way the COCO API does (on a 5x finer grid, keeping the points where the outline
crosses pixel centres), and the per-label masks are merged into one label image following DALI's
merge rules (a higher label overwrites a lower one, except on the last run), so the result is
DALI's bit for bit.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rle_from_string", "rle_from_polygon", "rle_union", "label_image"]

_SCALE = 5.0


def rle_from_string(text: str) -> np.ndarray:
    """Decodes COCO's compressed RLE text (6 bits per character, each count a delta from the one
    two before it from the fourth count on)."""
    counts: list[int] = []
    data = text.encode("ascii")
    pos = 0
    while pos < len(data):
        value = shift = 0
        while True:
            if pos >= len(data):
                raise ValueError("truncated RLE string")
            c = data[pos] - 48
            pos += 1
            value |= (c & 0x1F) << shift
            shift += 5
            if not c & 0x20:
                if c & 0x10:
                    value -= 1 << shift  # sign-extend
                break
        if len(counts) > 2:
            value += counts[-2]
        counts.append(value & 0xFFFFFFFF)
    return np.asarray(counts, dtype=np.uint32)


def _c_int(values: np.ndarray) -> np.ndarray:
    """C's (int) cast of doubles: truncation toward zero; NaN becomes INT_MIN as on x86."""
    out = np.full(values.shape, -(1 << 31), dtype=np.int64)
    ok = ~np.isnan(values)
    out[ok] = np.trunc(values[ok]).astype(np.int64)
    return out


def rle_from_polygon(xy: np.ndarray, h: int, w: int) -> np.ndarray:
    """The run lengths of the polygon with vertices ``xy`` (k x 2 float64) on an h x w grid."""
    k = len(xy)
    x = _c_int(_SCALE * xy[:, 0] + 0.5)
    y = _c_int(_SCALE * xy[:, 1] + 0.5)
    xs, ys = x, y
    xe, ye = np.roll(x, -1), np.roll(y, -1)
    dx, dy = np.abs(xe - xs), np.abs(ys - ye)
    along_x = dx >= dy
    flip = (along_x & (xs > xe)) | (~along_x & (ys > ye))
    xs, xe = np.where(flip, xe, xs), np.where(flip, xs, xe)
    ys, ye = np.where(flip, ye, ys), np.where(flip, ys, ye)
    steps = np.where(along_x, dx, dy)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(along_x, (ye - ys) / dx.astype(np.float64), (xe - xs) / dy.astype(np.float64))
    # Dense points along every edge: t = 0..steps (reversed when flipped).
    edge = np.repeat(np.arange(k), steps + 1)
    first = np.concatenate(([0], np.cumsum(steps + 1)[:-1]))
    d = np.arange(edge.size) - first[edge]
    t = np.where(flip[edge], steps[edge] - d, d)
    s = slope[edge]
    ax = along_x[edge]
    with np.errstate(invalid="ignore"):
        u = np.where(ax, t + xs[edge], _c_int(xs[edge] + s * t + 0.5))
        v = np.where(ax, _c_int(ys[edge] + s * t + 0.5), t + ys[edge])
    # Where the outline moves to another column, keep the crossing of a pixel centre.
    j = np.flatnonzero(u[1:] != u[:-1]) + 1
    xd = np.where(u[j] < u[j - 1], u[j], u[j] - 1).astype(np.float64)
    xd = (xd + 0.5) / _SCALE - 0.5
    keep = (np.floor(xd) == xd) & (xd >= 0) & (xd <= w - 1)
    j, xd = j[keep], xd[keep]
    yd = np.minimum(v[j], v[j - 1]).astype(np.float64)
    yd = np.ceil(np.clip((yd + 0.5) / _SCALE - 0.5, 0, h))
    starts = (xd.astype(np.int64) * h + yd.astype(np.int64)).astype(np.uint32)
    a = np.sort(np.append(starts, np.uint32(h * w)))
    runs = np.diff(a, prepend=np.uint32(0)).astype(np.int64)
    # A zero run means two crossings at one pixel: it cancels, and the run after it joins the one before.
    counts = [int(runs[0])]
    i = 1
    while i < len(runs):
        if runs[i] > 0:
            counts.append(int(runs[i]))
            i += 1
        else:
            i += 1
            if i < len(runs):
                counts[-1] += int(runs[i])
                i += 1
    return np.asarray(counts, dtype=np.uint32)


def rle_union(masks: list[np.ndarray]) -> np.ndarray:
    """The union of run-length masks of one image (as the COCO API merges them)."""
    if len(masks) == 1:
        return masks[0]
    acc = [int(c) for c in masks[0]]
    for other in masks[1:]:
        a, b = acc, [int(c) for c in other]
        out: list[int] = []
        ca, cb = a[0] if a else 0, b[0] if b else 0
        va = vb = v = 0
        ia = ib = 1
        run = 0
        more = 1
        while more > 0:
            c = min(ca, cb)
            run += c
            more = 0
            ca -= c
            if not ca and ia < len(a):
                ca = a[ia]
                ia += 1
                va = not va
            more += ca
            cb -= c
            if not cb and ib < len(b):
                cb = b[ib]
                ib += 1
                vb = not vb
            more += cb
            previous, v = v, va or vb
            if v != previous or more == 0:
                out.append(run)
                run = 0
        acc = out
    return np.asarray(acc, dtype=np.uint32)


def label_image(h: int, w: int, labels: np.ndarray, polygon_masks: dict[int, list[np.ndarray]],
                rle_masks: dict[int, np.ndarray]) -> np.ndarray:
    """The int32 (h, w, 1) label image of one sample, as DALI builds it.

    ``labels`` are the labels of all the sample's objects; ``polygon_masks[label]`` the masks of
    its polygons and ``rle_masks[label]`` its (last) RLE annotation. A label with polygons takes
    their union, ignoring its RLE annotation.
    """
    out = np.zeros((w * h,), np.int32)
    present = sorted(set(int(x) for x in labels))
    if not present:
        return out.reshape(w, h).T[..., None].copy()
    per_label = dict(rle_masks)
    for label, masks in polygon_masks.items():
        per_label[label] = rle_union(masks)
    empty: list[int] = []
    first = present[0]
    cnts = [int(c) for c in per_label.get(first, empty)]
    vals = [first if i % 2 else 0 for i in range(len(cnts))]
    for label in present[1:]:
        b = [int(c) for c in per_label.get(label, empty)]
        if not b:
            continue
        cnts, vals = _overlay(cnts, vals, b, label)
    values = np.repeat(np.asarray(vals, np.int32), np.asarray(cnts, np.int64))[:w * h]
    out[:values.size] = values
    return out.reshape(w, h).T[..., None].copy()


def _overlay(cnts: list[int], vals: list[int], b: list[int], label: int) -> tuple[list[int], list[int]]:
    """Merges the runs of one label's mask ``b`` into the labelled runs (cnts, vals)."""
    m_a = len(cnts)
    cnt_a = cnts[0] if m_a else 0
    next_val = val_a = vals[0] if m_a else 0
    cnt_b = b[0]
    vb = next_vb = False
    ia = ib = 1
    out_c: list[int] = []
    out_v: list[int] = []
    more = 1
    while more > 0:
        c = min(cnt_a, cnt_b)
        more = 0
        cnt_a -= c
        if not cnt_a and ia < m_a:
            cnt_a = cnts[ia]
            next_val = vals[ia]
            ia += 1
        more += cnt_a
        cnt_b -= c
        if not cnt_b and ib < len(b):
            cnt_b = b[ib]
            ib += 1
            next_vb = not next_vb
        more += cnt_b
        if val_a and vb:
            out_v.append(val_a if not cnt_a else label)
        elif val_a:
            out_v.append(val_a)
        elif vb:
            out_v.append(label)
        else:
            out_v.append(0)
        out_c.append(c)
        val_a, vb = next_val, next_vb
        if cnt_a == 0:
            break
    return out_c, out_v
