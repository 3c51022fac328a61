"""``PipelineBatch``: one batch as a pipeline hands it to a framework iterator."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["PipelineBatch"]


@dataclasses.dataclass(frozen=True)
class PipelineBatch:
    """One batch of a pipeline, for framework iterators (``IteratorAPI.share_and_schedule``).

    Attributes:
      outputs: one TensorList per pipeline output, in output order (what ``Pipeline.run()`` returns).
      replaced_rows: rows that an operator's ``error_policy="replace"`` filled with a copy of another
        row (not real samples), ascending.
      prepared: what the iterator's finisher (``Pipeline.set_output_device``) made of the outputs on
        the producer thread, one entry per output (None where it made nothing); None without a
        finisher. For a batch whose device stage is deferred, its ``PendingOutputs``; once a group's
        program ran it, that program's whole outputs (held until the iterator has taken the batch).
    """

    outputs: tuple
    replaced_rows: tuple[int, ...] = ()
    prepared: tuple[Any, ...] | None = None
