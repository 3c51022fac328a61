"""A batch computed sample by sample while its only reader consumes it (decode -> resize fusion).

An operator offering ``sample_source`` (the image decoders) returns a ``SampleSource`` instead of a
batch when the plan says its output has one reader offering ``run_fed`` (resize). The reader then asks
for the samples a chunk at a time on its worker threads and writes each result before the next sample
is computed, so only a few decoded images are alive at a time instead of the whole batch, and each is
resized while its pixels are still in the cache. The values are those of the two operators run one
after the other.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from jaxdali.tensors import TensorListCPU

__all__ = ["SampleSource", "Consume"]

#: ``consume(i, sample)``: what the reader does with sample ``i`` (it may be called again for the same ``i``,
#: with the same values, when the source computes a sample twice). The sample's rows may be strided (each
#: row contiguous along its remaining axes), e.g. a window decoded from a wider block-aligned region.
Consume = Callable[[int, np.ndarray], None]


class SampleSource:
    """The samples of one batch, computed on demand.

    Attributes:
      batch: a stand-in with each sample's shape, dtype, layout and source info, for the reader's
        planning; its samples are zero-size broadcast views whose values must never be read.
      feed: ``feed(start, stop, consume, parts=None)`` computes samples ``start`` .. ``stop - 1`` on the
        calling thread and calls ``consume(i, sample)`` for each; errors are raised as the operator's
        ``run`` raises them. ``parts[i]``, when given and not None, is the (y, x, h, w) region of sample
        ``i`` that the reader needs: only that region is computed (its values those of the whole sample).
    """

    __slots__ = ("batch", "feed", "takes_parts", "origin", "producer")

    def __init__(self, shapes: list[tuple[int, ...]], dtype: np.dtype, layout: str, source_info: list | None,
                 feed: Callable[..., None], takes_parts: bool = True):
        dtype = np.dtype(dtype)
        zero = bytes(dtype.itemsize)  # read-only: so are the views (one element repeated, 0 strides)
        self.batch = TensorListCPU([np.ndarray(shape, dtype, zero, 0, (0,) * len(shape)) for shape in shapes],
                                   layout, source_info)
        self.feed = feed
        #: Whether ``feed`` computes parts of samples (else it ignores ``parts``).
        self.takes_parts = takes_parts
        #: The producing operator's display name (for error notes) and instance name (for statistics).
        self.origin = ""
        self.producer = ""

    def __len__(self) -> int:
        return len(self.batch)

    @property
    def source_info(self) -> list | None:
        return self.batch.source_info

    @source_info.setter
    def source_info(self, info: list | None) -> None:
        self.batch.source_info = info

    def check(self, i: int, sample: np.ndarray, op: str, part: tuple[int, int, int, int] | None = None) -> None:
        """Raises if ``sample`` is not the shape and dtype announced for sample ``i`` (or for its ``part``):
        the reader planned for them."""
        expected = self.batch.samples()[i]
        shape = expected.shape if part is None else (part[2], part[3], *expected.shape[2:])
        if sample.shape != shape or sample.dtype != expected.dtype:
            raise RuntimeError(f"fn.{op}: sample {i} was announced as {shape} {expected.dtype} but came out "
                               f"{sample.shape} {sample.dtype}; this is a jaxdali bug, please report it")

    def materialize(self) -> TensorListCPU:
        """All samples as an ordinary batch (for a reader that cannot consume them one by one)."""
        out: list = [None] * len(self)
        self.feed(0, len(self), lambda i, sample: out.__setitem__(i, np.ascontiguousarray(sample)))
        return TensorListCPU(out, self.batch.layout(), self.batch.source_info)
