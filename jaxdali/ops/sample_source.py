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
#: with the same values, when the source computes a sample twice).
Consume = Callable[[int, np.ndarray], None]


class SampleSource:
    """The samples of one batch, computed on demand.

    Attributes:
      batch: a stand-in with each sample's shape, dtype, layout and source info, for the reader's
        planning; its samples are zero-size broadcast views whose values must never be read.
      feed: ``feed(start, stop, consume)`` computes samples ``start`` .. ``stop - 1`` on the calling
        thread and calls ``consume(i, sample)`` for each; errors are raised as the operator's ``run``
        raises them.
    """

    __slots__ = ("batch", "feed", "origin")

    def __init__(self, shapes: list[tuple[int, ...]], dtype: np.dtype, layout: str, source_info: list | None,
                 feed: Callable[[int, int, Consume], None]):
        zero = np.zeros((), dtype)
        self.batch = TensorListCPU([np.broadcast_to(zero, shape) for shape in shapes], layout, source_info)
        self.feed = feed
        #: The producing operator's name, for error notes.
        self.origin = ""

    def __len__(self) -> int:
        return len(self.batch)

    @property
    def source_info(self) -> list | None:
        return self.batch.source_info

    @source_info.setter
    def source_info(self, info: list | None) -> None:
        self.batch.source_info = info

    def check(self, i: int, sample: np.ndarray, op: str) -> None:
        """Raises if ``sample`` is not the shape and dtype announced for sample ``i`` (the reader planned for them)."""
        expected = self.batch.samples()[i]
        if sample.shape != expected.shape or sample.dtype != expected.dtype:
            raise RuntimeError(f"fn.{op}: sample {i} was announced as {expected.shape} {expected.dtype} but came "
                               f"out {sample.shape} {sample.dtype}; this is a jaxdali bug, please report it")

    def materialize(self) -> TensorListCPU:
        """All samples as an ordinary batch (for a reader that cannot consume them one by one)."""
        out: list = [None] * len(self)
        self.feed(0, len(self), out.__setitem__)
        return TensorListCPU(out, self.batch.layout(), self.batch.source_info)
