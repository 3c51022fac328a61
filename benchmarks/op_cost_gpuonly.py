"""Per-operator cost cases of the operators DALI 2.4 runs on the GPU only (run by ``benchmarks/op_cost.py``).

DALI has no CPU implementation of these, so its column reports an error and there is no ratio: read
jaxdali's ms/batch alone (``python benchmarks/op_cost.py --libs jaxdali --only jitter,...``).
"""

import functools

import numpy as np
from op_cost import types_of


@functools.lru_cache(maxsize=8)
def _wave_maps(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """remap's maps for one image size: a gentle wave (fn.water's), float32 HW."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    return x + 4 * np.sin(y / 16), y + 4 * np.cos(x / 16)


def _maps(fn, images):
    """remap's inputs: the photos and each photo's maps (cached per size; python_function hands them over)."""
    mapx, mapy = fn.python_function(images, function=lambda image: _wave_maps(*image.shape[:2]), num_outputs=2)
    return images, mapx, mapy


CASES = {
    "jitter": lambda fn, images: fn.jitter(images, nDegree=4),
    "experimental.median_blur": lambda fn, images: fn.experimental.median_blur(images, window_size=[5, 5]),
    "experimental.median_blur_5x3": lambda fn, images: fn.experimental.median_blur(images, window_size=[5, 3]),
    "experimental.dilate": lambda fn, images: fn.experimental.dilate(images, mask_size=[5, 5]),
    "experimental.erode": lambda fn, images: fn.experimental.erode(images, mask_size=[3, 3], iterations=2),
    "experimental.remap": lambda fn, images: fn.experimental.remap(*_maps(fn, images)),
    "experimental.remap_nn": lambda fn, images: fn.experimental.remap(*_maps(fn, images),
                                                                       interp=types_of(fn).INTERP_NN),
}
