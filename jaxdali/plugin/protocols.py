"""What the iterator driver (``jaxdali.plugin.driver``) needs from the pipelines it wraps.

``Pipeline`` implements ``IterablePipeline``; ``Pipeline.iterator_api()`` returns an ``IteratorAPI``.
Written as protocols so that the driver can be tested with any object that offers these calls.
"""

from __future__ import annotations

from typing import Protocol

from jaxdali.pipeline.batch import PipelineBatch

__all__ = ["IteratorAPI", "IterablePipeline"]


class IteratorAPI(Protocol):
    """What ``pipeline.iterator_api()`` returns: the calls an iterator makes on one pipeline."""

    def schedule_run(self) -> None:
        """Schedule work: the first call after construction or ``reset`` prefetches
        ``prefetch_queue_depth`` batches, later calls one."""

    def share_and_schedule(self) -> PipelineBatch:
        """The next batch (``outputs``: one TensorList-like per pipeline output, ``len()`` = batch size;
        ``replaced_rows``; ``prepared``), and one more run scheduled (DALI's share_outputs, release_outputs, schedule_run, in one step: the
        outputs stay valid). Raises StopIteration when an external source ended the epoch; nothing
        is scheduled then."""

    def reset(self) -> None:
        """Start the next epoch after a source raised StopIteration; a no-op otherwise."""

    def empty(self) -> bool:
        """True when no scheduled batch is waiting to be consumed."""

    def checkpoint(self, iterator_data: dict) -> bytes:
        """The pipeline checkpoint at the last consumed batch, embedding ``iterator_data``."""

    @property
    def restored_iterator_data(self) -> dict | None:
        """Iterator data stored in the checkpoint this pipeline was restored from, if any."""

    @property
    def is_restored_from_checkpoint(self) -> bool: ...

    @property
    def restored_iteration(self) -> int:
        """Batches the restored pipeline had consumed when its checkpoint was taken (0 if fresh)."""

    def reader_resume(self, name: str) -> dict | None:
        """After a restore on another shard layout: ``{"residual": samples left in the resumed
        epoch, "next_epoch": the reader epoch that follows}`` for reader ``name``; else None."""


class IterablePipeline(Protocol):
    """The pipeline side: what ``_DaliBaseIterator`` uses of each pipeline it wraps."""

    max_batch_size: int
    enable_checkpointing: bool

    def build(self) -> None:
        """Build the pipeline; idempotent."""

    def reader_meta(self, name: str) -> dict:
        """``epoch_size``, ``epoch_size_padded``, ``number_of_shards``, ``shard_id``,
        ``pad_last_batch``, ``stick_to_shard`` of reader ``name`` (RuntimeError if unknown)."""

    def iterator_api(self) -> IteratorAPI:
        """Lock the pipeline into the iterator API style and return its ``IteratorAPI``."""
