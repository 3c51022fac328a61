"""The iterator that drives pipelines: ``_DaliBaseIterator``, the base of the JAX and PyTorch iterators.

It wraps one pipeline per device, keeps an ``EpochCounters`` (``jaxdali.plugin.epoch_counter``)
and applies its decisions to the pipelines through the ``IteratorAPI`` protocol
(``jaxdali.plugin.protocols``): it schedules runs, fetches each pipeline's outputs, counts the batch,
ends epochs, resets, and writes and restores checkpoints (``jaxdali.plugin.resume``). The framework
iterators subclass it; they implement ``__next__`` (usually ``return self._next_batch()``) and
``_assemble_batch``, which turns the per-pipeline outputs into framework arrays.

The behaviour is DALI 2.4's (``spec/dali_jax_plugin.md`` §2), with the deliberate differences
listed in the note of ``_DaliBaseIterator``.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from jaxdali._caller import user_stacklevel
from jaxdali.ops.readers.shared_listing import shared_listings
from jaxdali.pipeline.batch import PipelineBatch
from jaxdali.plugin import resume
from jaxdali.plugin.epoch_counter import EpochCounters, LastBatchPolicy, ReaderLayout
from jaxdali.plugin.messages import (
    CHECKPOINTING_DISABLED_MSG,
    FILL_LAST_BATCH_MSG,
    INEXACT_MASK_MSG,
    MANUAL_SIZE_MSG,
    MIXED_CHECKPOINTING_MSG,
    NEGATIVE_SIZE_MSG,
    NO_DATA_MSG,
    NO_PIPELINES_MSG,
    READER_AND_PADDED_MSG,
    READER_AND_SIZE_MSG,
    RESET_MID_EPOCH_MSG,
    SAME_BATCH_SIZE_MSG,
    SIZE_ZERO_MSG,
    VARIABLE_BATCH_MSG,
)


_AUTO_RESET_VALUES = {False: False, None: False, "no": False, "False": False,
                      True: True, "yes": True, "True": True}


def _parse_auto_reset(value) -> bool:
    """DALI's accepted ``auto_reset`` values, plus the strings "True" and "False"."""
    # Identity for the singletons, so that 1 and 0 (equal to True and False) are rejected as in DALI.
    if value is True or value is False or value is None or isinstance(value, str):
        if value in _AUTO_RESET_VALUES:
            return _AUTO_RESET_VALUES[value]
    raise ValueError(f"Unsupported value for `auto_reset` {value}")


def _resolve_policy(fill_last_batch, last_batch_policy) -> LastBatchPolicy:
    if fill_last_batch is not None:
        warnings.warn(FILL_LAST_BATCH_MSG, Warning, stacklevel=user_stacklevel())
        return LastBatchPolicy.FILL if fill_last_batch else LastBatchPolicy.PARTIAL
    if type(last_batch_policy) is not LastBatchPolicy:
        raise ValueError(
            "Wrong type for `last_batch_policy`. "
            f"Expected {LastBatchPolicy}, got {type(last_batch_policy)}"
        )
    return last_batch_policy


_NOTHING = object()  # no batch buffered by the constructor
_EPOCH_END = object()  # the constructor's fetch found the (restored) epoch already over


class _DaliBaseIterator:
    """Epoch, reset and checkpoint logic shared by the framework iterators.

    Args:
      pipelines: one pipeline or a list of them (one per device), all with the same
        ``max_batch_size``.
      size: DALI default -1. Samples per epoch summed over all pipelines (size mode). Exclusive with
        ``reader_name``; -1 without ``reader_name`` reads until a source raises StopIteration (only
        for a single pipeline; the policy is then FILL and the data unpadded).
      reader_name: DALI default None. Name of the reader whose metadata sets the epoch length,
        padding and sharding (recommended).
      auto_reset: DALI default False. False, None or "no": ``reset()`` (or a new ``iter()``) starts
        the next epoch. True or "yes": the iterator resets itself when it raises StopIteration.
      fill_last_batch: deprecated (warns): True means FILL, False PARTIAL.
      last_batch_padded: DALI default False. Size mode: whether the data source pads its last batch.
        Must not be set with ``reader_name``.
      last_batch_policy: DALI default ``LastBatchPolicy.FILL``.
      prepare_first_batch: DALI default True: fetch the first batch in the constructor.

    Subclasses implement ``__next__`` (typically ``return self._next_batch()``) and
    ``_assemble_batch``; they set every attribute ``_assemble_batch`` needs *before* calling
    ``super().__init__``, which fetches the first batch when ``prepare_first_batch`` is set.

    Lifetime: ``close()`` (or leaving a ``with iterator:`` block) closes the wrapped pipelines, which
    stops their threads and frees their buffers. An iterator dropped without ``close()`` needs no
    garbage collection either: nothing refers back to it or to its pipelines, so its pipelines are
    freed with it and their finalizers stop their threads.

    .. note::
       Deliberate differences from DALI 2.4: ``auto_reset`` also accepts the strings "True" and
       "False" (DALI rejects them although its docs mention "True"); DROP with a padded reader
       drains the reader's padding batches at the end of an epoch (see
       ``EpochCounters.batches_to_discard_on_reset``); ``len()`` is 0, not an error, for ``size=-1``
       with batch size 1; when restoring, counters come from the first *restored* pipeline; a
       batch that DROP discards is not converted to framework arrays; a ``for`` loop started
       mid-epoch continues it without DALI's "Ignoring..." warning (an explicit ``reset()``
       mid-epoch still warns), and a new loop right after ``reset()`` does not reset again.
    """

    def __init__(
        self,
        pipelines,
        size=-1,
        reader_name=None,
        auto_reset=False,
        fill_last_batch=None,
        last_batch_padded=False,
        last_batch_policy=LastBatchPolicy.FILL,
        prepare_first_batch=True,
    ):
        if pipelines is None:
            raise AssertionError(NO_PIPELINES_MSG)
        pipelines = list(pipelines) if isinstance(pipelines, (list, tuple)) else [pipelines]
        if not pipelines:
            raise AssertionError(NO_PIPELINES_MSG)
        self._pipes = pipelines
        self._num_gpus = len(pipelines)
        # Frameworks expect a public `batch_size` attribute on data iterators.
        self.batch_size = pipelines[0].max_batch_size
        if any(p.max_batch_size != self.batch_size for p in pipelines):
            raise AssertionError(SAME_BATCH_SIZE_MSG)
        size = int(size)
        self._auto_reset = _parse_auto_reset(auto_reset)
        self._prepare_first_batch = prepare_first_batch
        policy = _resolve_policy(fill_last_batch, last_batch_policy)
        if size == 0:
            raise AssertionError(SIZE_ZERO_MSG)
        if size < 0 and not (len(pipelines) == 1 or reader_name):
            raise AssertionError(NEGATIVE_SIZE_MSG)
        if reader_name and size >= 0:
            raise AssertionError(READER_AND_SIZE_MSG)
        if reader_name and last_batch_padded:
            raise AssertionError(READER_AND_PADDED_MSG)
        if size > 0 and not reader_name:
            warnings.warn(MANUAL_SIZE_MSG, Warning, stacklevel=user_stacklevel())
        self._reader_name = reader_name

        self._apis = []
        with shared_listings():  # the pipelines' readers list their data set once
            for pipe in pipelines:
                pipe.build()
                self._apis.append(pipe.iterator_api())

        if reader_name:
            layout, shard_ids = ReaderLayout.from_meta([p.reader_meta(reader_name) for p in pipelines])
            self._counters = EpochCounters.for_reader(policy, layout, shard_ids, self.batch_size)
        else:
            self._counters = EpochCounters.for_size(
                policy, size, self.batch_size, len(pipelines), bool(last_batch_padded)
            )
        # Counters for the epoch after the current one, when the current one is the residual of an
        # epoch resumed on another shard layout (elastic resume); None otherwise.
        self._next_counters: EpochCounters | None = None
        # Batches fetched from each pipeline over its life (its iteration), and where the counters'
        # path began: (that iteration, the shard ids of its fresh counters). Checkpoints are checked
        # against them (``EpochCounters.consistent_with``).
        self._fetches = 0
        self._origin: tuple[int, tuple[int, ...]] = (0, self._counters.shard_ids)
        # Samples counted when a source ended the epoch before ``size`` (the next reset cannot start one).
        self._source_ended_at: int | None = None
        self._ever_scheduled = False
        self._ever_consumed = False
        self._replaced_rows: list[tuple[int, ...]] = []
        # Whether next() handed out a batch since the last reset(): a new `for` loop then resets.
        self._consumed_since_reset = False
        self._mask_warned = False

        self._enable_checkpointing = pipelines[0].enable_checkpointing
        if any(p.enable_checkpointing != self._enable_checkpointing for p in pipelines):
            raise ValueError(MIXED_CHECKPOINTING_MSG)
        if self._enable_checkpointing:
            self._restore_counters()
            # Taken before the first batch is prepared, so that checkpoints() of an iterator that
            # handed out nothing yet describes the very beginning.
            data = self._iterator_data()
            self._initial_checkpoints = [api.checkpoint(data) for api in self._apis]

        self._first_batch = _NOTHING
        if self._prepare_first_batch:
            try:
                self._first_batch = self._next_batch()
            except StopIteration:
                # Restoring at the end of an epoch is legitimate: the iterator is simply there.
                if not any(api.is_restored_from_checkpoint and api.restored_iteration > 0
                           for api in self._apis):
                    raise RuntimeError(NO_DATA_MSG) from None
                # The user's first next() must see that end of epoch, as the original run did
                # (any auto-reset has already happened).
                self._first_batch = _EPOCH_END
            else:
                self._ever_consumed = self._consumed_since_reset = False

    _closed = False  # a class default, so that close() works on an iterator whose __init__ failed

    # -- the subclass contract ------------------------------------------------------------------

    def __next__(self):
        raise NotImplementedError

    def _assemble_batch(self, batches: list[PipelineBatch], rows: tuple[int, ...] | None):
        """Convert one batch to the framework's form (subclasses implement this).

        Args:
          batches: per wrapped pipeline, what its ``share_and_schedule()`` returned.
          rows: None to use every row. Otherwise PARTIAL trimming (PyTorch): reader mode, the rows to
            keep of each pipeline (NP entries, possibly 0); size mode, the rows to keep of each of
            the first ``len(rows)`` pipelines, the others being left out.
        """
        raise NotImplementedError

    # -- iteration ------------------------------------------------------------------------------

    def next(self):
        """Returns the next batch of data."""
        self._ever_consumed = True
        return self.__next__()

    def __iter__(self):
        # A fresh iterator is not reset (that would discard its prepared batch); an exhausted one
        # is, so a plain `for` loop per epoch works without auto_reset; a loop started mid-epoch
        # continues the epoch. DALI calls reset() whenever its counter is not 0, which warns
        # "Ignoring..." mid-epoch and also right after a reset in FILL without padding. A source that
        # ended its epoch early is reset too, so that the loop learns no further epoch can start.
        counters = self._counters
        if self._first_batch is _EPOCH_END:
            # Restored from a checkpoint taken after an epoch's last batch, before its StopIteration:
            # the original iterator's new loop would have started the next epoch, so this one does too
            # (next() without a loop still reports that end first).
            self._first_batch = _NOTHING
            if counters.epoch_over:
                self.reset()
            return self
        if self._consumed_since_reset and (counters.epoch_over or self._source_ended_at is not None
                                           or counters.batches_to_discard_on_reset()):
            self.reset()
        return self

    def _next_batch(self):
        """Steps 1-8 of ``next()`` (spec §2.4); returns what ``_assemble_batch`` made."""
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed: next() needs a new iterator (built from "
                               "checkpoints() to continue where this one stopped)")
        self._ever_consumed = self._consumed_since_reset = True
        if self._first_batch is not _NOTHING:
            batch, self._first_batch = self._first_batch, _NOTHING
            if batch is _EPOCH_END:
                raise StopIteration
            return batch
        batches = self._fetch_outputs(check_epoch_end=True)
        # Rows each pipeline's error_policy="replace" filled with a copy of another row (not real).
        self._replaced_rows = [b.replaced_rows for b in batches]
        counters = self._counters
        # The policy tests spare FILL (the common case) two calls on this per-batch path.
        dropped = counters.policy is LastBatchPolicy.DROP and counters.drops_next_batch()
        counted = counters.advance()
        rows = counted.partial_rows() if counters.policy is LastBatchPolicy.PARTIAL else None
        batch = None if dropped else self._assemble_batch(batches, rows)
        self._counters = counted
        if dropped:
            self._end_epoch()
        return batch

    def _fetch_outputs(self, check_epoch_end: bool) -> list[PipelineBatch]:
        if not self._ever_scheduled:
            self._schedule_runs()
        if check_epoch_end and self._counters.epoch_ended:
            self._end_epoch()
        try:
            batches = [api.share_and_schedule() for api in self._apis]
        except StopIteration:
            if self._counters.size < 0 and self._auto_reset:
                self.reset()
            elif not self._counters.epoch_over:
                self._source_ended_at = self._counters.counter
            raise
        self._fetches += 1
        if self._reader_name or self._counters.size != -1:
            for b in batches:  # a pipeline's outputs all have its batch's length
                if len(b.outputs[0]) != self.batch_size:
                    raise AssertionError(VARIABLE_BATCH_MSG)
        return batches

    def _schedule_runs(self) -> None:
        self._ever_scheduled = True
        for api in self._apis:
            api.schedule_run()

    def _end_epoch(self):
        if self._auto_reset:
            self.reset()
        raise StopIteration

    def reset(self) -> None:
        """Start the next epoch; ignored with a warning while the epoch is not finished."""
        for _ in range(self._counters.batches_to_discard_on_reset()):
            self._fetch_outputs(check_epoch_end=False)
            self._counters = self._counters.advance()
        if not self._counters.epoch_over:
            if self._source_ended_at is not None:
                # DALI ignores this reset too, and every later epoch is then empty: a loop that waits
                # for a number of batches would spin forever.
                raise RuntimeError(
                    f"{type(self).__name__}: the pipeline's source ended after "
                    f"{self._source_ended_at} samples of an epoch of size={self._counters.size}, "
                    "so no further epoch can start; pass size= the samples per epoch, or size=-1 to let "
                    "the source end each epoch")
            warnings.warn(RESET_MID_EPOCH_MSG, RuntimeWarning, stacklevel=user_stacklevel())
            return
        self._consumed_since_reset = False
        if self._next_counters is not None:
            self._counters, self._next_counters = self._next_counters, None
            self._origin = (self._fetches, self._counters.shard_ids)
        else:
            self._counters = self._counters.next_epoch()
        self._source_ended_at = None
        for api in self._apis:
            api.reset()
            if api.empty():
                api.schedule_run()
                self._ever_scheduled = True

    # -- lifetime -------------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the wrapped pipelines (``Pipeline.close``): their threads stop, operators close and
        buffers are freed, also after an error. Idempotent. ``next()`` raises RuntimeError afterwards;
        ``checkpoints()`` still gives the state after the last batch handed out."""
        self._closed = True
        self._first_batch = _NOTHING
        for pipe in getattr(self, "_pipes", ()):
            pipe.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- sizes ----------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """Samples in the current epoch: per pipeline (reader mode) or summed (size mode)."""
        return self._counters.size

    def __len__(self) -> int:
        """Batches (steps) in the current epoch."""
        return self._counters.num_batches

    # Read-only views under DALI's attribute names, used by DALI example code (e.g. `it._size`).
    @property
    def _size(self) -> int:
        return self._counters.size

    @property
    def _counter(self) -> int:
        return self._counters.counter

    def _nonpadding_mask(self) -> np.ndarray:
        """Bool mask (NP*bs) of the real rows of the last batch counted; see ``EpochCounters``. Rows
        that an operator's ``error_policy="replace"`` filled with a copy of another row are not real.

        Warns once per iterator when the configuration cannot make the mask count every sample
        exactly once per epoch (``EpochCounters.mask_is_exact``).
        """
        mask = self._counters.nonpadding_mask()
        for j, rows in enumerate(self._replaced_rows):
            mask[[j * self.batch_size + r for r in rows]] = False
        if not self._mask_warned and not self._counters.mask_is_exact:
            self._mask_warned = True
            warnings.warn(INEXACT_MASK_MSG, RuntimeWarning, stacklevel=user_stacklevel())
        return mask

    # -- checkpoints ----------------------------------------------------------------------------

    def checkpoints(self) -> list[bytes]:
        """One checkpoint per wrapped pipeline, at the last batch handed out, with the counters.

        Raises:
          ValueError: the pipelines were built without ``enable_checkpointing``.
        """
        if not self._enable_checkpointing:
            raise ValueError(CHECKPOINTING_DISABLED_MSG)
        if not self._ever_consumed:
            return list(self._initial_checkpoints)
        data = self._iterator_data()
        return [api.checkpoint(data) for api in self._apis]

    def _iterator_data(self) -> dict[str, Any]:
        return resume.iterator_data(self._counters, self._origin, self._next_counters)

    def _restore_counters(self) -> None:
        state = resume.restore(self._apis, self._reader_name, self._counters)
        if state is not None:
            self._fetches = state.fetches
            self._counters, self._next_counters, self._origin = state.counters, state.next_counters, state.origin
