"""Tile-compressed FITS images (a ``BINTABLE`` HDU with ``ZIMAGE = T``)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from jaxdali.ops.readers.fits_format import FitsError, Hdu

__all__ = ["read_compressed_image"]


def read_compressed_image(hdu: Hdu, read: Callable[[int, int], bytes], where: str) -> np.ndarray:
    """The scaled image of a tile-compressed HDU."""
    raise FitsError(f"{where}: HDU {hdu.number} is a tile-compressed image ({hdu.header.get('ZCMPTYPE')!r}), which "
                    "this reader does not decompress")
