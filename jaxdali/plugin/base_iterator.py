"""``LastBatchPolicy`` and the framework-free epoch arithmetic shared by the framework iterators.

Two layers live here:

1. ``EpochCounters``: a frozen dataclass holding the iterator's counters, with pure methods for
   every decision ``next()`` and ``reset()`` make (epoch end, advance, DROP, the counter update of
   ``reset()``, PARTIAL trimming, the padding mask) and a plain-dict form with DALI 2.4's key
   names for checkpoints. It touches no pipeline, so it is tested on its own.
2. ``_DaliBaseIterator``: drives pipelines through the small ``IteratorAPI`` protocol below and
   keeps an ``EpochCounters``. The JAX and PyTorch iterators subclass it; they implement
   ``__next__`` (usually ``return self._next_batch()``) and ``_assemble_batch``, which turns the
   per-pipeline outputs into framework arrays.

The behaviour is DALI 2.4's (``spec/dali_jax_plugin.md`` §2), with the deliberate differences
listed in the notes of ``EpochCounters.batches_to_discard_on_reset`` and ``_DaliBaseIterator``.

Vocabulary: ``bs`` is the per-pipeline batch size, ``NP`` the number of pipelines this iterator
wraps, ``N`` the reader's ``epoch_size``, ``S`` its ``num_shards``. In *reader mode*
(``reader_name`` given) ``counter`` and ``size`` count samples per pipeline; in *size mode* they count
samples summed over all pipelines, and ``size=-1`` means "until a source raises StopIteration".
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import warnings
from typing import Any, Protocol, Sequence

import numpy as np

from jaxdali._caller import user_stacklevel
from jaxdali.ops.sampling import shard_sizes as _shard_sizes
from jaxdali.core.checkpoint import MAX_COUNT, CheckpointError, check_dict, check_int, check_int_list
from jaxdali.pipeline.batch import PipelineBatch

__all__ = ["LastBatchPolicy", "ReaderLayout", "EpochCounters", "IteratorAPI", "IterablePipeline"]


# DALI's texts, kept word for word because users match on them (spec §7).
NO_PIPELINES_MSG = "Number of provided pipelines has to be at least 1"  # E1
SAME_BATCH_SIZE_MSG = "All pipelines should have the same batch size set"  # E6
SIZE_ZERO_MSG = "Size cannot be 0"  # E8
NEGATIVE_SIZE_MSG = "Negative size is supported only for a single pipeline"  # E9
READER_AND_SIZE_MSG = "When reader_name is provided, size should not be set"  # E10
READER_AND_PADDED_MSG = "When reader_name is provided, last_batch_padded should not be set"  # E11
NO_DATA_MSG = (  # E14
    "It seems that there is no data in the pipeline. This may happen if `last_batch_policy` is set "
    "to PARTIAL and the requested batch size is greater than the shard size."
)
MIXED_CHECKPOINTING_MSG = (  # E15
    "All wrapped pipelines must have the same value for `enable_checkpointing`."
)
VARIABLE_BATCH_MSG = (  # E16
    "Variable batch size is not supported by the iterator when reader_name is provided or iterator "
    "size is set explicitly"
)
CHECKPOINTING_DISABLED_MSG = "Cannot access checkpoints with checkpointing disabled"  # E21
ITERATOR_DATA_NOT_JSON_MSG = (  # E24 (iterator side)
    "Iterator checkpoint data is not a valid JSON string. "
    "Please make sure that the checkpoint was created with the same version of jaxdali."
)
# W1 and W3 contain a run of spaces in DALI (a line continuation inside the string literal).
RESET_MID_EPOCH_MSG = (  # W1
    "DALI iterator does not support resetting while epoch is not finished. " + " " * 29 + "Ignoring..."
)
MANUAL_SIZE_MSG = (  # W2
    "Please set `reader_name` and don't set last_batch_padded and size manually whenever possible. "
    "This may lead, in some situations, to missing some samples or returning duplicated ones. "
    "Check the Sharding section of the documentation for more details."
)
FILL_LAST_BATCH_MSG = (  # W3
    "Please do not use `fill_last_batch` and use `last_batch_policy` " + " " * 27 + "instead."
)
PARTLY_RESTORED_MSG = (
    "Some, but not all of the pipelines used were restored from checkpoint. "
    "This iterator might produce unexpected results."
)
DIFFERENT_ITERATOR_DATA_MSG = (
    "The provided pipelines had different iterator data in the checkpoints they were restored "
    "from. This iterator might produce unexpected results."
)
NO_ITERATOR_DATA_MSG = (
    "Iterator data was not saved in the checkpoint. This iterator might produce unexpected results."
)
INEXACT_MASK_MSG = (
    "The padding mask cannot count every sample exactly once per epoch here: with "
    "last_batch_policy=FILL and pad_last_batch=False, a shard that does not fill whole batches reads "
    "into the next epoch, so later epochs can lack samples (and, with several shards, hold one twice). "
    "For exact evaluation, give the reader pad_last_batch=True."
)


@enum.unique
class LastBatchPolicy(enum.Enum):
    """What an iterator does with the last batch of an epoch when the epoch does not fill it.

    * ``FILL``: return a full batch. The reader completes it, with copies of the epoch's last
      sample when it pads (``pad_last_batch=True``), otherwise with the first samples of the
      next epoch.
    * ``DROP``: do not return a batch that cannot be filled from the current epoch.
    * ``PARTIAL``: return the last batch shorter (only for frameworks that accept a ragged batch
      dimension, e.g. PyTorch; the JAX iterator rejects it).

    Dataset ``[1..7]``, batch size 2 (``padded``: the reader pads)::

        policy    padded  last batch  next epoch starts with
        PARTIAL   yes     [7]         [1, 2]
        PARTIAL   no      [7]         [2, 3]
        FILL      yes     [7, 7]      [1, 2]
        FILL      no      [7, 1]      [2, 3]
        DROP      yes     [5, 6]      [1, 2]
        DROP      no      [5, 6]      [2, 3]
    """

    FILL = 0
    DROP = 1
    PARTIAL = 2


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# =============================================================================================
# Layer 1: the counter state machine.


@dataclasses.dataclass(frozen=True)
class ReaderLayout:
    """The reader facts an iterator in reader mode needs, as read from ``reader_meta``.

    Args:
      epoch_size: N, the reader's dataset size without padding.
      epoch_size_padded: the reader's ``epoch_size_padded`` (``ceil(N/S)*S`` when it pads, else N).
      num_shards: S.
      pad_last_batch: whether the reader pads each shard's last batch.
      stick_to_shard: whether the reader re-reads its own shard every epoch.
    """

    epoch_size: int
    epoch_size_padded: int
    num_shards: int
    pad_last_batch: bool
    stick_to_shard: bool

    @classmethod
    def from_meta(cls, metas: Sequence[dict]) -> tuple["ReaderLayout", tuple[int, ...]]:
        """The layout shared by all pipelines' reader metadata, and each pipeline's shard id.

        Raises:
          AssertionError: the pipelines' readers disagree on ``epoch_size`` or ``number_of_shards``,
            or some but not all pad / stick to their shard (DALI's E13 texts).
        """
        first = metas[0]

        def disagree(what: str) -> AssertionError:
            return AssertionError(f"Reader Operator should have the same {what} in all the pipelines.")

        for key, what in (("epoch_size", "size value"), ("number_of_shards", "`num_shards` argument set")):
            if any(meta[key] != first[key] for meta in metas):
                raise disagree(what)
        for key in ("pad_last_batch", "stick_to_shard"):
            flags = [bool(meta[key]) for meta in metas]
            if any(flags) and not all(flags):
                raise disagree(f"`{key}` argument set")
        layout = cls(
            epoch_size=int(first["epoch_size"]),
            epoch_size_padded=int(first["epoch_size_padded"]),
            num_shards=int(first["number_of_shards"]),
            pad_last_batch=bool(first["pad_last_batch"]),
            stick_to_shard=bool(first["stick_to_shard"]),
        )
        return layout, tuple(int(meta["shard_id"]) for meta in metas)

    @functools.cached_property
    def initial_shard_sizes(self) -> tuple[int, ...]:
        """Real sizes of shards 0..S-1 (``floor((k+1)N/S) - floor(kN/S)``)."""
        return tuple(int(x) for x in _shard_sizes(self.epoch_size, self.num_shards))


@dataclasses.dataclass(frozen=True)
class EpochCounters:
    """The counters of an iterator and every decision made from them; immutable.

    Build one with ``for_reader`` or ``for_size``. Each method returns a new value.

    Fields (the DALI 2.4 attribute each one corresponds to is in brackets):
      policy: the effective ``LastBatchPolicy``.
      batch_size: bs.
      num_pipelines: NP.
      last_batch_padded: whether the data is padded (reader mode: the reader's ``pad_last_batch``).
      layout: the reader layout in reader mode, None in size mode.
      counter: samples consumed in the current epoch (``_counter``): per pipeline in reader mode,
        summed over pipelines in size mode.
      size: the epoch length in the same unit (``_size``); -1 for "until StopIteration".
      shard_ids: reader mode: the shard each wrapped reader is on now, length NP (``_shards_id``).
      read_ahead: reader mode: how far each shard position has read into its next epoch, length S
        (``_counter_per_gpu``; only FILL without padding makes it non-zero).
      shard_sizes: reader mode: shard sizes as seen by each shard position, length S
        (``_shard_sizes_per_gpu``; rotated by FILL without padding).
    """

    policy: LastBatchPolicy
    batch_size: int
    num_pipelines: int
    last_batch_padded: bool
    layout: ReaderLayout | None
    counter: int
    size: int
    shard_ids: tuple[int, ...] = ()
    read_ahead: tuple[int, ...] = ()
    shard_sizes: tuple[int, ...] = ()

    def __post_init__(self):
        if not isinstance(self.policy, LastBatchPolicy):
            raise ValueError(f"policy must be a LastBatchPolicy: got {self.policy!r}")
        if self.batch_size < 1 or self.num_pipelines < 1:
            raise ValueError(
                f"batch_size and num_pipelines must be >= 1: got batch_size={self.batch_size}, "
                f"num_pipelines={self.num_pipelines}"
            )
        if self.layout is not None:
            lengths = {
                "shard_ids": (len(self.shard_ids), self.num_pipelines),
                "read_ahead": (len(self.read_ahead), self.layout.num_shards),
                "shard_sizes": (len(self.shard_sizes), self.layout.num_shards),
            }
            for name, (got, expected) in lengths.items():
                if got != expected:
                    raise ValueError(f"{name} must have {expected} entries: got {got}")

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def for_reader(
        cls,
        policy: LastBatchPolicy,
        layout: ReaderLayout,
        shard_ids: Sequence[int],
        batch_size: int,
    ) -> "EpochCounters":
        """Counters of a fresh reader-mode iterator; ``size`` per spec §2.3.

        ================  ==============  ==========================
        policy            reader pads?    size
        ================  ==============  ==========================
        DROP              any             ``N // S`` (smallest shard)
        FILL, PARTIAL     yes             ``epoch_size_padded // S``
        FILL, PARTIAL     no              ``ceil(ceil(N/S)/bs)*bs``
        ================  ==============  ==========================
        """
        n, s = layout.epoch_size, layout.num_shards
        if policy is LastBatchPolicy.DROP:
            size = n // s
        elif layout.pad_last_batch:
            size = layout.epoch_size_padded // s
        else:
            size = _ceil_div(_ceil_div(n, s), batch_size) * batch_size
        return cls(
            policy=policy,
            batch_size=int(batch_size),
            num_pipelines=len(shard_ids),
            last_batch_padded=layout.pad_last_batch,
            layout=layout,
            counter=0,
            size=size,
            shard_ids=tuple(int(k) for k in shard_ids),
            read_ahead=(0,) * s,
            shard_sizes=layout.initial_shard_sizes,
        )

    @classmethod
    def for_size(
        cls,
        policy: LastBatchPolicy,
        size: int,
        batch_size: int,
        num_pipelines: int,
        last_batch_padded: bool,
    ) -> "EpochCounters":
        """Counters of a fresh size-mode iterator. ``size < 0`` forces FILL and no padding."""
        if size < 0:
            policy, last_batch_padded = LastBatchPolicy.FILL, False
        return cls(
            policy=policy,
            batch_size=int(batch_size),
            num_pipelines=int(num_pipelines),
            last_batch_padded=bool(last_batch_padded),
            layout=None,
            counter=0,
            size=int(size),
        )

    # -- queries --------------------------------------------------------------------------------

    @property
    def reader_mode(self) -> bool:
        return self.layout is not None

    @property
    def step(self) -> int:
        """How much one ``next()`` adds to ``counter``: bs (reader mode) or NP*bs (size mode)."""
        return self.batch_size if self.reader_mode else self.num_pipelines * self.batch_size

    @property
    def epoch_ended(self) -> bool:
        """The epoch-end check of ``next()`` (§2.4 step 3): ``size > 0 and counter >= size``."""
        return 0 < self.size <= self.counter

    @property
    def epoch_over(self) -> bool:
        """Whether ``reset()`` may start the next epoch: ``counter >= size`` or ``size < 0``."""
        return self.counter >= self.size or self.size < 0

    @property
    def num_batches(self) -> int:
        """``len()`` of the iterator (§2.8): batches per pipeline per epoch; 0 when ``size < 0``."""
        if self.size < 0:
            return 0
        per_step = self.batch_size if self.reader_mode else self.num_pipelines * self.batch_size
        if self.policy is LastBatchPolicy.DROP:
            return self.size // per_step
        return _ceil_div(self.size, per_step)

    def drops_next_batch(self) -> bool:
        """Whether the batch fetched next would be dropped (§2.4 step 8), judged before advancing.

        Reader mode: DROP and, for some shard position i, ``read_ahead[i] + counter + bs >
        shard_sizes[i]``. Size mode: DROP and ``counter + NP*bs > size``.
        """
        if self.policy is not LastBatchPolicy.DROP:
            return False
        counter = self.counter + self.step
        if self.reader_mode:
            return any(r + counter > s for r, s in zip(self.read_ahead, self.shard_sizes))
        return counter > self.size

    def partial_rows(self) -> tuple[int, ...] | None:
        """PARTIAL trimming of the batch just counted (§2.6); call it on the counters *after* ``advance``.

        Returns None when the batch is returned whole. Otherwise, reader mode: the number of rows to
        keep from each pipeline's batch (NP entries, possibly 0); size mode: the rows to keep from the
        first pipelines, one entry per pipeline kept (the others are left out).
        """
        if self.policy is not LastBatchPolicy.PARTIAL:
            return None
        bs = self.batch_size
        if self.reader_mode:
            left = self._rows_left()
            if all(x >= bs for x in left):
                return None
            return tuple(min(bs, max(0, x)) for x in left)
        if not self.counter > self.size > 0:
            return None
        need = self.num_pipelines * bs - (self.counter - self.size)
        kept = _ceil_div(need, bs)
        return (bs,) * (kept - 1) + (need % bs or bs,)

    def nonpadding_mask(self) -> np.ndarray:
        """Which rows of the batch the counters describe (the last one counted) are real samples.

        Returns a bool array of length NP*bs. Pipeline j has handed out ``counter - start`` rows in
        this epoch, where ``start = min(read_ahead)`` is the counter the epoch began with (non-zero
        only for FILL without padding, whose epochs begin where the previous one read ahead); the
        first ``initial_shard_size[shard_ids[j]]`` of them are real. So a padded reader's copies of
        its last sample are not real, and without padding the rows that wrap around to samples
        already handed out in this epoch are not. DALI counts from 0 instead of ``start``, so its
        count of real rows drifts down by the read-ahead every epoch (1597, 1594, 1591, ...).

        Exact (every sample the epoch holds counted once) with padding, with DROP, and without
        padding for one shard or ``stick_to_shard``; see ``mask_is_exact`` for the rest.

        Raises:
          AttributeError: in size mode (there are no shard sizes to compare with), as in DALI.
        """
        if not self.reader_mode:
            raise AttributeError(
                "The padding mask needs per-shard sizes: it is only available for iterators created "
                "with `reader_name`."
            )
        rows = np.arange(self.batch_size)
        start = min(self.read_ahead)
        return np.concatenate([rows < left + start for left in self._rows_left()])

    @property
    def mask_is_exact(self) -> bool:
        """Whether every epoch holds every sample, so that counting the mask's real rows counts each
        sample of the data set exactly once per epoch.

        False only for FILL without padding when a reader's epoch does not fill whole batches (the
        shards differ in size or one is not a multiple of bs): its last batch then reads ahead into
        the next epoch, which starts where that read stopped and can end before the samples read
        ahead come round again; with several shards rotating, the rows read ahead can also be
        samples that another pipeline hands out in the same epoch.
        """
        if not self.reader_mode or self.policy is not LastBatchPolicy.FILL or self.last_batch_padded:
            return True
        n, s = self.layout.epoch_size, self.layout.num_shards
        return n % s == 0 and (n // s) % self.batch_size == 0

    def _rows_left(self) -> list[int]:
        """DALI's ``bs - (counter - initial_shard_size[shard_ids[j]])`` for every pipeline j."""
        initial = self.layout.initial_shard_sizes
        return [self.batch_size - (self.counter - initial[k]) for k in self.shard_ids]

    # -- transitions ----------------------------------------------------------------------------

    def advance(self) -> "EpochCounters":
        """Count one fetched batch (§2.4 step 7)."""
        # Runs in every next(): a copy of the fields with the new counter, not dataclasses.replace, which
        # re-runs __init__ and the validation of fields that cannot have changed (~30 us, cold).
        advanced = object.__new__(EpochCounters)
        fields = advanced.__dict__
        fields.update(self.__dict__)
        fields["counter"] = self.counter + self.step
        return advanced

    def batches_to_discard_on_reset(self) -> int:
        """How many batches ``reset()`` must fetch, count (``advance``) and discard before it resets.

        * DALI's DROP pre-drain (§2.5 step 1): if the epoch has not ended by count but the next
          batch would be dropped, fetch it, so that stopping after ``len()`` batches and resetting
          equals running into StopIteration.
        * Our fix of DALI's DROP + padded reader desync (§2.11-1): once a DROP epoch is over, a
          padded reader may still owe batches of its current reader epoch (every padded reader epoch
          has ``ceil(epoch_size_padded/S/bs)`` batches); they are drained too, so that the next epoch
          starts with the next shard's real data instead of padding.

        .. note::
           DALI 2.4 skips the second part: N=10, S=3, bs=3, padded, DROP gives a second epoch of
           pure padding ``[2,2,2│5,5,5│9,9,9]``. Here the second epoch is ``[3,4,5│6,7,8│0,1,2]``.
        """
        if self.policy is not LastBatchPolicy.DROP:
            return 0
        discard, counters = 0, self
        if not counters.epoch_ended and counters.drops_next_batch():
            discard, counters = 1, counters.advance()
        if counters.reader_mode and counters.layout.pad_last_batch and counters.epoch_over:
            per_shard = counters.layout.epoch_size_padded // counters.layout.num_shards
            reader_epoch = _ceil_div(per_shard, self.batch_size) * self.batch_size
            discard += max(0, _ceil_div(reader_epoch - counters.counter, self.batch_size))
        return discard

    def next_epoch(self) -> "EpochCounters":
        """The counters at the start of the next epoch (§2.5 step 2a-c); requires ``epoch_over``.

        FILL without padding keeps track of how far each shard position has read into the next
        epoch, and (unless the readers stick to their shard) rotates the shard sizes right by one,
        recomputing ``size`` from them; every other case restarts the count at 0. Readers that do not
        stick to their shard move to the next shard.
        """
        if not self.epoch_over:
            raise ValueError(
                f"the epoch is not over: counter={self.counter} < size={self.size}"
            )
        bs = self.batch_size
        fill_no_pad = self.policy is LastBatchPolicy.FILL and not self.last_batch_padded
        if not self.reader_mode:
            counter = self.counter % self.size if fill_no_pad and self.size > 0 else 0
            return dataclasses.replace(self, counter=counter)

        stick = self.layout.stick_to_shard
        num_shards = self.layout.num_shards
        read_ahead, shard_sizes, size = self.read_ahead, self.shard_sizes, self.size
        if fill_no_pad:
            consumed = self.counter - min(read_ahead)
            read_ahead = tuple(r + consumed - s for r, s in zip(read_ahead, shard_sizes))
            counter = min(read_ahead)
        else:
            counter = 0
        shard_ids = self.shard_ids if stick else tuple((k + 1) % num_shards for k in self.shard_ids)
        if fill_no_pad:
            if not stick:
                shard_sizes = _rotate_right(shard_sizes)
            size = _ceil_div(max(s - r for s, r in zip(shard_sizes, read_ahead)), bs) * bs
            if size == 0:
                # Every shard position has already read its whole next epoch: skip that epoch.
                # (DALI rotates here even when sticking to the shard; so do we.)
                read_ahead, counter = (0,) * num_shards, 0
                shard_sizes = _rotate_right(shard_sizes)
                size = _ceil_div(max(shard_sizes), bs) * bs
        return dataclasses.replace(
            self,
            counter=counter,
            size=size,
            shard_ids=shard_ids,
            read_ahead=read_ahead,
            shard_sizes=shard_sizes,
        )

    # -- checkpoint form ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The dynamic counters as a JSON-able dict with DALI 2.4's keys.

        Reader mode: ``_counter``, ``_counter_per_gpu`` (read_ahead), ``_shard_sizes_per_gpu``,
        ``_shards_id``, ``_size``; size mode: ``_counter`` and ``_size`` only.

        >>> layout = ReaderLayout(10, 10, 3, False, False)
        >>> c = EpochCounters.for_reader(LastBatchPolicy.FILL, layout, [0, 1, 2], 2)
        >>> c.advance().advance().to_dict()
        {'_counter': 4, '_counter_per_gpu': [0, 0, 0], '_shard_sizes_per_gpu': [3, 3, 4], '_shards_id': [0, 1, 2], '_size': 4}
        """
        if not self.reader_mode:
            return {"_counter": self.counter, "_size": self.size}
        return {
            "_counter": self.counter,
            "_counter_per_gpu": list(self.read_ahead),
            "_shard_sizes_per_gpu": list(self.shard_sizes),
            "_shards_id": list(self.shard_ids),
            "_size": self.size,
        }

    def restore(self, data: dict[str, Any] | str | bytes) -> "EpochCounters":
        """These counters with the dynamic fields taken from ``data`` (a ``to_dict`` result or its JSON).

        Every field is checked for its type and range (``consistent_with`` checks the values).

        Raises:
          CheckpointError (a ValueError): ``data`` is not valid JSON (E24 text), lacks a key, has a
            value of the wrong type or range, or vectors of the wrong length for this iterator (the
            message names the field).
        """
        data = _parsed_iterator_data(data)
        keys = list(self.to_dict())
        missing = [k for k in keys if k not in data]
        if missing:
            raise CheckpointError(
                f"Iterator checkpoint data lacks {missing}: expected keys {keys}, got {sorted(data)}. "
                "Was it saved by an iterator created with the same arguments (reader_name or size)?"
            )
        counter = check_int(data["_counter"], "iterator._counter", 0, MAX_COUNT)
        size = check_int(data["_size"], "iterator._size", -1, MAX_COUNT)
        if size == 0 or (size < 0) != (self.size < 0):
            raise CheckpointError(f"checkpoint field 'iterator._size' is {size}; this iterator's epochs have "
                                  f"{self.size} samples")
        if not self.reader_mode:
            return dataclasses.replace(self, counter=counter, size=size)
        num_shards = self.layout.num_shards
        fields = {
            "read_ahead": ("_counter_per_gpu", num_shards, MAX_COUNT),
            "shard_sizes": ("_shard_sizes_per_gpu", num_shards, self.layout.epoch_size),
            "shard_ids": ("_shards_id", self.num_pipelines, num_shards - 1),
        }
        values = {}
        for field, (key, expected, maximum) in fields.items():
            if isinstance(data[key], list) and len(data[key]) != expected:
                raise CheckpointError(
                    f"Iterator checkpoint data does not match this iterator: {key} has "
                    f"{len(data[key])} entries in the checkpoint, {expected} in this iterator"
                )
            values[field] = check_int_list(data[key], f"iterator.{key}", expected, 0, maximum)
        return dataclasses.replace(self, counter=counter, size=size, **values)

    # -- what a checkpoint can hold ----------------------------------------------------------------

    def fetches_left_in_epoch(self) -> int | None:
        """Batches ``next()`` still fetches in this epoch (a batch DROP discards included); None when
        the epoch ends only when a source says so (``size < 0``)."""
        if self.size < 0:
            return None
        step = self.step
        to_size = max(0, _ceil_div(self.size - self.counter, step))
        if self.policy is not LastBatchPolicy.DROP:
            return to_size
        if self.reader_mode:
            room = min(s - r for s, r in zip(self.shard_sizes, self.read_ahead)) - self.counter
        else:
            room = self.size - self.counter
        return min(to_size, max(1, room // step + 1))

    def _advanced_by(self, fetches: int) -> "EpochCounters":
        return dataclasses.replace(self, counter=self.counter + fetches * self.step) if fetches else self

    def reachable_after(self, fetches: int) -> list["EpochCounters"] | None:
        """From these counters (those of a fresh iterator), the counters an iterator can hold once
        it has fetched ``fetches`` batches, following ``next()`` and ``reset()``: the state after the
        last fetch, and also the state after the ``reset()`` that follows when that fetch ended an
        epoch. None when that cannot be told (``size < 0``); [] when no state is reachable (a reset
        fetches batches and ``fetches`` falls among them).

        Cost: O(epochs) until the counters at an epoch start repeat, then whole cycles are skipped.
        """
        counters, done, seen = self, 0, {}
        while True:
            key = (counters.counter, counters.size, counters.shard_ids, counters.read_ahead, counters.shard_sizes)
            if key in seen and done < fetches:
                period = done - seen[key]
                if period == 0:  # epochs without a fetch, forever: any of them
                    return None
                # Skip whole cycles, stopping short of `fetches` so that the end is found below.
                done += (fetches - done - 1) // period * period
                seen.clear()
            seen[key] = done
            n = counters.fetches_left_in_epoch()
            if n is None:
                return None
            if done + n > fetches:
                return [counters._advanced_by(fetches - done)]
            at_end = counters._advanced_by(n)
            discard = at_end.batches_to_discard_on_reset()
            following = at_end._advanced_by(discard).next_epoch()
            if done + n == fetches:
                return [at_end] + ([following] if discard == 0 else [])
            done += n + discard
            if done >= fetches:
                return [following] if done == fetches else []
            counters = following

    def consistent_with(self, fresh: "EpochCounters", fetches: int) -> str:
        """'' when an iterator that started as ``fresh`` can hold these counters after ``fetches``
        batches; otherwise which checkpoint fields differ from what it would hold."""
        reachable = fresh.reachable_after(fetches)
        if reachable is None:  # the epoch length is the source's: only the counter can be checked
            step = self.step
            if self.counter % step or self.counter > fetches * step:
                return (f"checkpoint field 'iterator._counter' is {self.counter}: after {fetches} batches of "
                        f"{step} samples it is a multiple of {step} no larger than {fetches * step}")
            return ""
        mine = self.to_dict()
        if any(c.to_dict() == mine for c in reachable):
            return ""
        if not reachable:
            return f"no iterator state follows exactly {fetches} batches ('pipeline.runner.iteration')"
        expected = reachable[0].to_dict()
        return "; ".join(f"checkpoint field 'iterator.{k}' is {mine[k]}, but after the pipeline's {fetches} batches "
                         f"('pipeline.runner.iteration') this iterator has {k}={expected[k]}"
                         for k in mine if mine[k] != expected[k])


def _parsed_iterator_data(data: dict[str, Any] | str | bytes) -> dict[str, Any]:
    if isinstance(data, (str, bytes, bytearray)):
        try:
            data = json.loads(data)
        except (ValueError, RecursionError):
            raise CheckpointError(ITERATOR_DATA_NOT_JSON_MSG) from None
    if not isinstance(data, dict):
        raise CheckpointError(f"Iterator checkpoint data must be a dict: got {type(data).__name__}")
    return data


def _rotate_right(values: tuple[int, ...]) -> tuple[int, ...]:
    """new[i] = old[i - 1 mod len]."""
    return values[-1:] + values[:-1]


# =============================================================================================
# Layer 2: the iterator that drives pipelines.


class IteratorAPI(Protocol):
    """What ``pipeline.iterator_api()`` returns: the calls an iterator makes on one pipeline."""

    def schedule_run(self) -> None:
        """Schedule work: the first call after construction or ``reset`` prefetches
        ``prefetch_queue_depth`` batches, later calls one."""

    def share_and_schedule(self) -> PipelineBatch:
        """The next batch (``outputs``: one TensorList-like per pipeline output, ``len()`` = batch
        size; ``replaced_rows``; ``prepared``), and one more run scheduled (DALI's share_outputs, release_outputs, schedule_run, in one step: the
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
        data = self._counters.to_dict()
        if self._origin[0]:
            data["_origin"] = {"iteration": self._origin[0], "shard_ids": list(self._origin[1])}
        if self._next_counters is not None:
            layout = self._counters.layout
            data["_elastic"] = {"layout": [layout.epoch_size, layout.epoch_size_padded, layout.num_shards],
                                "next": self._next_counters.to_dict()}
        return data

    def _restore_counters(self) -> None:
        restored = [api.is_restored_from_checkpoint for api in self._apis]
        if not any(restored):
            return
        apis = [api for api, r in zip(self._apis, restored) if r]
        all_data = [api.restored_iterator_data for api in apis]
        iterations = [api.restored_iteration for api in apis]
        if any(k != iterations[0] for k in iterations):
            raise CheckpointError(f"the pipelines were restored from checkpoints taken at different iterations "
                                  f"(field 'pipeline.runner.iteration': {iterations}); pass the list that one "
                                  f"iterator's checkpoints() returned, in its order")
        self._fetches = iterations[0]
        if not all(restored):
            warnings.warn(PARTLY_RESTORED_MSG, RuntimeWarning, stacklevel=user_stacklevel())
        resumed = [api.reader_resume(self._reader_name) for api in self._apis] if self._reader_name else []
        if any(resumed) and not (isinstance(all_data[0], dict) and "_elastic" in all_data[0]):
            # Restored on another layout: the counters start the residual epoch (a checkpoint taken
            # within that residual epoch carries them as "_elastic" and is checked below).
            self._start_elastic_epoch(resumed)
            return
        if not all_data[0]:
            warnings.warn(NO_ITERATOR_DATA_MSG, RuntimeWarning, stacklevel=user_stacklevel())
            return
        fresh = self._counters
        for data in reversed(all_data):  # each is checked; the first one is used
            self._counters, self._next_counters, self._origin = self._checked_counters(fresh, data)
        if any(data != all_data[0] for data in all_data):  # e.g. one before, one after a reset()
            warnings.warn(DIFFERENT_ITERATOR_DATA_MSG, RuntimeWarning, stacklevel=user_stacklevel())

    def _checked_counters(self, fresh: EpochCounters, data: Any):
        """(counters, next counters, origin) from one pipeline's iterator data, each field checked
        for its type and range, and the counters against the pipeline's iteration: a checkpoint
        holds only counters that this iterator reaches after that many batches."""
        data = _parsed_iterator_data(data)
        origin, next_counters, start = (0, fresh.shard_ids), None, fresh
        if "_origin" in data:
            if not fresh.reader_mode:
                raise CheckpointError("checkpoint field 'iterator._origin' is only written by iterators with "
                                      "reader_name")
            o = check_dict(data["_origin"], "iterator._origin", ("iteration", "shard_ids"))
            origin = (check_int(o["iteration"], "iterator._origin.iteration", 0, self._fetches),
                      check_int_list(o["shard_ids"], "iterator._origin.shard_ids", fresh.num_pipelines, 0,
                                     fresh.layout.num_shards - 1))
        if "_elastic" in data:
            if not fresh.reader_mode:
                raise CheckpointError("checkpoint field 'iterator._elastic' is only written by iterators with "
                                      "reader_name")
            e = check_dict(data["_elastic"], "iterator._elastic", ("layout", "next"))
            size, padded, shards = check_int_list(e["layout"], "iterator._elastic.layout", 3)
            if size < 1 or shards != fresh.layout.num_shards or padded != _ceil_div(size, shards) * shards:
                raise CheckpointError(f"checkpoint field 'iterator._elastic.layout' is {e['layout']}: not the "
                                      f"residual epoch of {fresh.layout.num_shards} padded shards")
            residual = ReaderLayout(size, padded, shards, pad_last_batch=True, stick_to_shard=True)
            next_counters = fresh.restore(e["next"])
            if next_counters.to_dict() != EpochCounters.for_reader(
                    fresh.policy, fresh.layout, next_counters.shard_ids, fresh.batch_size).to_dict():
                raise CheckpointError("checkpoint field 'iterator._elastic.next' does not hold the counters of a "
                                      "fresh epoch")
            start = EpochCounters.for_reader(fresh.policy, residual, origin[1], fresh.batch_size)
            fresh = dataclasses.replace(fresh, layout=residual)
        elif origin[0]:
            start = EpochCounters.for_reader(fresh.policy, fresh.layout, origin[1], fresh.batch_size)
        counters = fresh.restore(data)
        problem = counters.consistent_with(start, self._fetches - origin[0])
        if problem:
            raise CheckpointError(f"the iterator data of the checkpoint does not match its pipeline state: {problem} "
                                  "(edited, or saved by an iterator with other arguments)")
        return counters, next_counters, origin

    def _start_elastic_epoch(self, resumed: list) -> None:
        """Counters for the residual epoch after a re-shard, then for the layout's normal epochs.

        The readers first read what the checkpointed run left of its epoch, split evenly over the
        new shards (``jaxdali.ops.sampling.ResumePrefix``), then continue with the next epoch.
        """
        if any(info is None for info in resumed) or any(info != resumed[0] for info in resumed):
            raise ValueError(f"pipelines were restored from checkpoints of different epochs or layouts: {resumed}")
        counters = self._counters
        layout = counters.layout
        if not layout.pad_last_batch:
            raise ValueError("resuming on another shard layout needs readers with pad_last_batch=True")
        r, s = resumed[0]["residual"], layout.num_shards
        residual = ReaderLayout(r, _ceil_div(r, s) * s, s, pad_last_batch=True, stick_to_shard=True)
        self._counters = EpochCounters.for_reader(counters.policy, residual, counters.shard_ids, counters.batch_size)
        self._origin = (self._fetches, counters.shard_ids)
        shift = 0 if layout.stick_to_shard else resumed[0]["next_epoch"]
        next_ids = [(k + shift) % s for k in counters.shard_ids]
        self._next_counters = EpochCounters.for_reader(counters.policy, layout, next_ids, counters.batch_size)
