"""``LastBatchPolicy`` and the iterator's epoch arithmetic as a pure value: ``EpochCounters``.

``EpochCounters`` is a frozen dataclass holding an iterator's counters, with pure methods for every
decision ``next()`` and ``reset()`` make (epoch end, advance, DROP, the counter update of
``reset()``, PARTIAL trimming, the padding mask), a plain-dict form with DALI 2.4's key names for
checkpoints, and the set of states an iterator can reach after a number of batches (to check a
checkpoint). It touches no pipeline and no thread, so it is tested on its own;
``jaxdali.plugin.driver`` applies it to real pipelines.

The behaviour is DALI 2.4's (``spec/dali_jax_plugin.md`` §2), with the deliberate differences listed
in the note of ``EpochCounters.batches_to_discard_on_reset``.

Vocabulary: ``bs`` is the per-pipeline batch size, ``NP`` the number of pipelines an iterator
wraps, ``N`` the reader's ``epoch_size``, ``S`` its ``num_shards``. In *reader mode*
(``reader_name`` given) ``counter`` and ``size`` count samples per pipeline; in *size mode* they count
samples summed over all pipelines, and ``size=-1`` means "until a source raises StopIteration".

>>> layout = ReaderLayout(epoch_size=7, epoch_size_padded=7, num_shards=1, pad_last_batch=False,
...                       stick_to_shard=False)
>>> c = EpochCounters.for_reader(LastBatchPolicy.DROP, layout, shard_ids=[0], batch_size=2)
>>> c.num_batches, c.size
(3, 7)
>>> for _ in range(3):
...     c = c.advance()
>>> c.counter, c.drops_next_batch(), c.epoch_over
(6, True, False)
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
from typing import Any, Sequence

import numpy as np

from jaxdali.ops.sampling import shard_sizes as _shard_sizes
from jaxdali.core.checkpoint import MAX_COUNT, CheckpointError, check_int, check_int_list
from jaxdali.plugin.messages import ITERATOR_DATA_NOT_JSON_MSG

__all__ = ["LastBatchPolicy", "ReaderLayout", "EpochCounters", "parsed_iterator_data"]


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

    @classmethod
    def residual(cls, epoch_size: int, num_shards: int) -> "ReaderLayout":
        """The layout of the residual epoch that elastic resume reads: ``epoch_size`` samples split
        over ``num_shards`` padded shards that stick to their shard."""
        return cls(epoch_size, _ceil_div(epoch_size, num_shards) * num_shards, num_shards,
                   pad_last_batch=True, stick_to_shard=True)

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
        data = parsed_iterator_data(data)
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


def parsed_iterator_data(data: dict[str, Any] | str | bytes) -> dict[str, Any]:
    """``data`` as a dict, parsed from JSON when it is text.

    Raises:
      CheckpointError: not valid JSON (E24 text), or not a dict.
    """
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
