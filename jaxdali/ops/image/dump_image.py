"""``fn.dump_image``: writes every sample as a plain-text PPM/PGM file and passes the batch through.

As DALI: sample ``i`` of each batch goes to ``"{i}-{suffix}-0.ppm"`` in the working directory
(overwritten every iteration); HWC uint8 images with 3 channels are written as ASCII PPM (``P3``),
with 1 channel as ASCII PGM (``P2``), one image row per text line, each value followed by a space.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register

__all__ = ["DUMP_IMAGE", "ascii_pnm"]

#: For every uint8 value: its decimal digits and a space, left-aligned in 4 bytes, and that length.
_DIGITS = np.zeros((256, 4), np.uint8)
_LENGTHS = np.zeros(256, np.intp)
for _value in range(256):
    _text = f"{_value} ".encode()
    _DIGITS[_value, :len(_text)] = np.frombuffer(_text, np.uint8)
    _LENGTHS[_value] = len(_text)
del _value, _text


def ascii_pnm(image: np.ndarray) -> bytes:
    """The plain PPM (3 channels) or PGM (1 channel) text of an (H, W, C) uint8 image, built in whole-array
    NumPy steps (a table of each value's digits, the unused table bytes masked away)."""
    h, w, c = image.shape
    magic = b"P3" if c == 3 else b"P2"
    header = b"%s\n%d %d\n255\n" % (magic, w, h)
    rows = image.reshape(h, w * c)
    text = np.empty((h, w * c * 4 + 1), np.uint8)
    text[:, :-1] = _DIGITS[rows].reshape(h, -1)
    text[:, -1] = ord("\n")
    keep = np.empty(text.shape, bool)
    keep[:, :-1] = (np.arange(4) < _LENGTHS[rows][..., None]).reshape(h, -1)
    keep[:, -1] = True
    return header + text[keep].tobytes()


class DumpImage(Operator):
    """Writes each sample with :func:`ascii_pnm` and returns the input unchanged (no copy)."""

    def __init__(self, node, build):
        super().__init__(node, build)
        if self.args["input_layout"] != "HWC":
            raise OpArgumentError(f"fn.dump_image: argument 'input_layout' must be 'HWC' (the only layout DALI "
                                  f"writes), got {self.args['input_layout']!r}")

    def run(self, ctx, inputs, args):
        (images,) = inputs
        if images.np_dtype != np.uint8:
            raise TypeError(f"fn.dump_image: images must be uint8, got {images.np_dtype}")
        samples = images.samples()
        for i, sample in enumerate(samples):
            if sample.ndim != 3 or sample.shape[2] not in (1, 3) or 0 in sample.shape:
                origin = f" ({images.source_info[i]})" if images.source_info and images.source_info[i] else ""
                raise ValueError(f"fn.dump_image: sample {i}{origin} must be a non-empty HWC image with 1 or 3 "
                                 f"channels, got shape {sample.shape}")
        suffix = self.args["suffix"]

        def work(lo: int, hi: int) -> None:
            for i in range(lo, hi):
                # Written aside and renamed: prefetching rewrites the files while the user may be reading them.
                name = f"{i}-{suffix}-0.ppm"
                part = f".{name}.{os.getpid()}-{threading.get_ident()}.part"
                with open(part, "wb") as f:
                    f.write(ascii_pnm(samples[i]))
                os.replace(part, name)

        ctx.parallel_for(work, len(samples))
        return images


DUMP_IMAGE = register(OpSchema(
    name="dump_image", impl=DumpImage, devices=("cpu", "gpu"),
    doc="Writes each image of the batch to `<sample index>-<suffix>-0.ppm` in the working directory as plain-text "
        "PPM (3 channels) or PGM (1 channel), for debugging, and returns the input unchanged. Images must be "
        "HWC uint8.",
    args=(Arg("input_layout", "str", "HWC", "Layout of the input images; only 'HWC' is supported (as in DALI)."),
          Arg("suffix", "str", "", "Text put in the file names between the sample index and '-0.ppm'.")),
))
