"""The iterator's part of a checkpoint: the data it writes, the checks when reading it back, and
elastic resume (restoring on another shard layout).

An iterator's state is its ``EpochCounters`` plus two facts that let a checkpoint be checked:
its *origin* ``(iteration, shard ids)``, the pipeline iteration at which the counters' path began
and the shard ids of the fresh counters it began with, and, during the residual epoch of an elastic
resume, the counters of the epoch that follows it. ``iterator_data`` writes them into the
iterator data of each pipeline checkpoint; ``restore`` reads them back from restored pipelines and
checks them against the pipelines' iteration (``EpochCounters.consistent_with``).

Elastic resume: when the readers were restored on another number of shards, they first read what
the checkpointed run left of its epoch, split evenly over the new shards
(``jaxdali.ops.sampling.ResumePrefix``), then continue with the next epoch. The iterator counts that
residual epoch with its own ``ReaderLayout.residual`` and switches to the readers' layout at the
next ``reset()``.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Sequence

from jaxdali._caller import user_stacklevel
from jaxdali.core.checkpoint import CheckpointError, check_dict, check_int, check_int_list
from jaxdali.plugin.epoch_counter import EpochCounters, ReaderLayout, parsed_iterator_data
from jaxdali.plugin.messages import DIFFERENT_ITERATOR_DATA_MSG, NO_ITERATOR_DATA_MSG, PARTLY_RESTORED_MSG
from jaxdali.plugin.protocols import IteratorAPI

__all__ = ["Origin", "RestoredState", "iterator_data", "restore"]

# (pipeline iteration where the counters' path began, shard ids of the fresh counters it began with)
Origin = tuple[int, tuple[int, ...]]


@dataclasses.dataclass(frozen=True)
class RestoredState:
    """What an iterator takes over from restored pipelines.

    Attributes:
      fetches: batches each pipeline had consumed when its checkpoint was taken.
      counters: the counters to continue with.
      next_counters: the counters of the epoch after the current one when the current one is the
        residual epoch of an elastic resume; None otherwise.
      origin: where the counters' path began.
    """

    fetches: int
    counters: EpochCounters
    next_counters: EpochCounters | None
    origin: Origin


def iterator_data(counters: EpochCounters, origin: Origin, next_counters: EpochCounters | None) -> dict[str, Any]:
    """The iterator data a checkpoint embeds: DALI's counter keys, plus ``_origin`` once the path
    no longer begins at iteration 0 and ``_elastic`` during a residual epoch.

    >>> from jaxdali.plugin.epoch_counter import LastBatchPolicy
    >>> counters = EpochCounters.for_size(LastBatchPolicy.FILL, 8, batch_size=2, num_pipelines=1,
    ...                                   last_batch_padded=False).advance()
    >>> iterator_data(counters, (0, ()), None)
    {'_counter': 2, '_size': 8}
    >>> iterator_data(counters, (3, (1,)), None)["_origin"]
    {'iteration': 3, 'shard_ids': [1]}
    """
    data = counters.to_dict()
    if origin[0]:
        data["_origin"] = {"iteration": origin[0], "shard_ids": list(origin[1])}
    if next_counters is not None:
        layout = counters.layout
        data["_elastic"] = {"layout": [layout.epoch_size, layout.epoch_size_padded, layout.num_shards],
                            "next": next_counters.to_dict()}
    return data


def restore(apis: Sequence[IteratorAPI], reader_name: str | None, fresh: EpochCounters) -> RestoredState | None:
    """The state an iterator with counters ``fresh`` continues from; None when no pipeline was
    restored from a checkpoint.

    Warns (DALI's texts) when only some pipelines were restored, when the checkpoint holds no
    iterator data, or when the pipelines' iterator data differ; the first restored pipeline's data
    is used.

    Raises:
      CheckpointError: the pipelines were restored at different iterations, or the iterator data is
        malformed or does not match the pipeline's iteration.
      ValueError: an elastic resume from checkpoints of different epochs or layouts, or with readers
        that do not pad.
    """
    restored = [api.is_restored_from_checkpoint for api in apis]
    if not any(restored):
        return None
    restored_apis = [api for api, r in zip(apis, restored) if r]
    all_data = [api.restored_iterator_data for api in restored_apis]
    iterations = [api.restored_iteration for api in restored_apis]
    if any(k != iterations[0] for k in iterations):
        raise CheckpointError(f"the pipelines were restored from checkpoints taken at different iterations "
                              f"(field 'pipeline.runner.iteration': {iterations}); pass the list that one "
                              f"iterator's checkpoints() returned, in its order")
    fetches = iterations[0]
    if not all(restored):
        warnings.warn(PARTLY_RESTORED_MSG, RuntimeWarning, stacklevel=user_stacklevel())
    resumed = [api.reader_resume(reader_name) for api in apis] if reader_name else []
    if any(resumed) and not (isinstance(all_data[0], dict) and "_elastic" in all_data[0]):
        # Restored on another layout: the counters start the residual epoch (a checkpoint taken
        # within that residual epoch carries them as "_elastic" and is checked below).
        return _residual_epoch(fresh, resumed, fetches)
    if not all_data[0]:
        warnings.warn(NO_ITERATOR_DATA_MSG, RuntimeWarning, stacklevel=user_stacklevel())
        return RestoredState(fetches, fresh, None, (0, fresh.shard_ids))
    for data in reversed(all_data):  # each is checked; the first one is used
        state = _checked_state(fresh, data, fetches)
    if any(data != all_data[0] for data in all_data):  # e.g. one before, one after a reset()
        warnings.warn(DIFFERENT_ITERATOR_DATA_MSG, RuntimeWarning, stacklevel=user_stacklevel())
    return state


def _checked_state(fresh: EpochCounters, data: Any, fetches: int) -> RestoredState:
    """The state in one pipeline's iterator data, each field checked for its type and range, and the
    counters against the pipeline's iteration: a checkpoint holds only counters that this iterator
    reaches after that many batches."""
    data = parsed_iterator_data(data)
    origin, next_counters, start = (0, fresh.shard_ids), None, fresh
    if "_origin" in data:
        if not fresh.reader_mode:
            raise CheckpointError("checkpoint field 'iterator._origin' is only written by iterators with "
                                  "reader_name")
        o = check_dict(data["_origin"], "iterator._origin", ("iteration", "shard_ids"))
        origin = (check_int(o["iteration"], "iterator._origin.iteration", 0, fetches),
                  check_int_list(o["shard_ids"], "iterator._origin.shard_ids", fresh.num_pipelines, 0,
                                 fresh.layout.num_shards - 1))
    if "_elastic" in data:
        if not fresh.reader_mode:
            raise CheckpointError("checkpoint field 'iterator._elastic' is only written by iterators with "
                                  "reader_name")
        e = check_dict(data["_elastic"], "iterator._elastic", ("layout", "next"))
        size, padded, shards = check_int_list(e["layout"], "iterator._elastic.layout", 3)
        residual = ReaderLayout.residual(size, shards) if size >= 1 else None
        if residual is None or shards != fresh.layout.num_shards or padded != residual.epoch_size_padded:
            raise CheckpointError(f"checkpoint field 'iterator._elastic.layout' is {e['layout']}: not the "
                                  f"residual epoch of {fresh.layout.num_shards} padded shards")
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
    problem = counters.consistent_with(start, fetches - origin[0])
    if problem:
        raise CheckpointError(f"the iterator data of the checkpoint does not match its pipeline state: {problem} "
                              "(edited, or saved by an iterator with other arguments)")
    return RestoredState(fetches, counters, next_counters, origin)


def _residual_epoch(counters: EpochCounters, resumed: list, fetches: int) -> RestoredState:
    """Counters for the residual epoch after a re-shard, then for the layout's normal epochs."""
    if any(info is None for info in resumed) or any(info != resumed[0] for info in resumed):
        raise ValueError(f"pipelines were restored from checkpoints of different epochs or layouts: {resumed}")
    layout = counters.layout
    if not layout.pad_last_batch:
        raise ValueError("resuming on another shard layout needs readers with pad_last_batch=True")
    s = layout.num_shards
    residual = ReaderLayout.residual(resumed[0]["residual"], s)
    shift = 0 if layout.stick_to_shard else resumed[0]["next_epoch"]
    next_ids = [(k + shift) % s for k in counters.shard_ids]
    return RestoredState(
        fetches=fetches,
        counters=EpochCounters.for_reader(counters.policy, residual, counters.shard_ids, counters.batch_size),
        next_counters=EpochCounters.for_reader(counters.policy, layout, next_ids, counters.batch_size),
        origin=(fetches, counters.shard_ids),
    )
