"""Shared frame of the image filters that run one OpenCV call per 2-D plane of a sample.

A sample's layout names its spatial axes (``D``, ``H``, ``W``) and optional ``F`` (frames) and ``C``
(channels). OpenCV filters (H, W, C) images with up to 512 interleaved channels, so a sample is seen
as a stack of such planes: the axes before ``H`` index the planes (``C`` first gives one
single-channel plane per channel), ``C`` last stays interleaved. The filters here write every
plane straight into the preallocated output.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from jaxdali.ops.geometry import image_layout

#: Layouts accepted by the 2-D plane filters (``D`` only where the operator filters volumes too).
PLANE_LAYOUTS = ("HW", "HWC", "CHW", "FHW", "FHWC", "FCHW", "CFHW")
VOLUME_LAYOUTS = ("DHW", "DHWC", "FDHW", "FDHWC")


def spatial_layout(op: str, layout: str, ndim: int, volumes: bool = False) -> str:
    """The sample layout (DALI's default for ``ndim`` when unset); an error names ``op`` when unsupported."""
    return image_layout(op, layout, ndim, PLANE_LAYOUTS + (VOLUME_LAYOUTS if volumes else ()))


def spatial_axes(layout: str) -> str:
    """The spatial axis names of ``layout`` in order (``"HW"`` or ``"DHW"``)."""
    return "".join(a for a in layout if a in "DHW")


def planes(x: np.ndarray, layout: str) -> Iterator[np.ndarray]:
    """Views of ``x`` as contiguous (H, W) or (H, W, C) planes, over every index of the axes before ``H``
    (``D`` included). ``x`` must be C-contiguous."""
    lead = layout.index("H")
    flat = x.reshape((-1,) + x.shape[lead:])
    yield from flat
