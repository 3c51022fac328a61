"""Shared frame of the window filters DALI 2.4 runs on the GPU only (CV-CUDA's median blur and morphology).

Those filters take images (HW, HWC, CHW) and sequences of them (FHWC, FCHW) of uint8, uint16 or float32,
with at most 4 interleaved channels, and a per-sample window given as ``(width, height)`` (CV-CUDA's
order). Here a sample is seen as a stack of 2-D planes (``spatial.planes``); each operator filters the
planes of a sample on the worker pool and writes into the preallocated output.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from jaxdali.ops.image.spatial import planes
from jaxdali.ops.layouts import allocate_batch, check_type, image_layout, sample_name
from jaxdali.tensors import TensorListCPU
from jaxdali.types import DALIDataType

__all__ = ["WINDOW_LAYOUTS", "WINDOW_TYPES", "window_pair", "filter_planes"]

#: DALI 2.4's input layouts of median_blur, dilate and erode.
WINDOW_LAYOUTS = ("HW", "HWC", "FHWC", "CHW", "FCHW")
#: The input types CV-CUDA filters.
WINDOW_TYPES = (DALIDataType.UINT8, DALIDataType.UINT16, DALIDataType.FLOAT)
_MAX_CHANNELS = 4


def window_pair(op: str, name: str, value, who: str) -> tuple[int, int]:
    """A two-value argument (``window_size``, ``mask_size``, ``anchor``) as ``(x, y)`` integers."""
    v = np.asarray(value).reshape(-1)
    if v.size != 2:
        raise ValueError(f"fn.{op}: argument '{name}' must have 2 values (width, height), got {v.tolist()} for {who}")
    return int(v[0]), int(v[1])


def filter_planes(op: str, ctx, x: TensorListCPU,
                  params: Callable[[int, str], object],
                  apply: Callable[[np.ndarray, np.ndarray, object], None]) -> TensorListCPU:
    """Runs ``apply(src_plane, dst_plane, params(i, who))`` over every plane of every sample of ``x``.

    Planes are (H, W) or (H, W, C) arrays, C in 2..4. ``params`` is called first for every sample (so argument errors surface before any work), then the
    samples are filtered on the worker pool. Outputs have the input's shape, type and layout.
    """
    layout = image_layout(op, x.layout(), x.ndim(), WINDOW_LAYOUTS)
    check_type(op, "input", x.np_dtype, WINDOW_TYPES)
    shapes = [tuple(s) for s in x.shape()]
    if layout.endswith("C"):
        wide = [(i, s[-1]) for i, s in enumerate(shapes) if s[-1] > _MAX_CHANNELS]
        if wide:
            i, c = wide[0]
            raise ValueError(f"fn.{op}: interleaved images may have at most {_MAX_CHANNELS} channels, got {c} for "
                             f"{sample_name(x.source_info, i)} (use a CHW layout for more)")
    values = [params(i, sample_name(x.source_info, i)) for i in range(len(x))]
    out = allocate_batch(shapes, x.np_dtype)
    samples = x.samples()

    def work(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            src = np.ascontiguousarray(samples[i])
            if not src.size:
                continue
            for s, d in zip(planes(src, layout), planes(out[i], layout)):
                if s.ndim == 3 and s.shape[2] == 1:  # OpenCV sees one channel as a 2-D image
                    s, d = s[..., 0], d[..., 0]
                apply(s, d, values[i])

    ctx.parallel_for(work, len(x))
    return TensorListCPU(out, layout)
