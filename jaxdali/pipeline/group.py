"""The pipelines of one iterator (one per device, one definition) computed as one pipeline's batches.

An iterator over N devices builds N pipelines of b samples from one definition. Run apart, each pays
per batch what one pipeline of N x b samples pays once: planning, argument handling, operator
calls and thread hand-overs, N times over for the same images. A ``PipelineGroup`` runs them in
*rounds* on one pipeline's producer threads. A round begins one batch of each pipeline: its
sources (readers, random draws: all of its state) run exactly as they would alone. Then, when
every operator after the sources is ``row_wise`` (output row i a function of row i alone), those
operators run once over the round's N x b samples with the first pipeline's operators, and each
pipeline gets its own rows back. Random numbers stay each pipeline's own (``GroupRunContext``), so
every batch equals what its pipeline computes alone (``tests/pipeline/test_group.py``). The host
operators that run in the device stage are recorded per pipeline afterwards (the JAX iterator's
``DeviceGroup`` then runs them as one program).

Each pipeline keeps its own queue, credits, epochs and checkpoints: its prefetcher is a
``GroupMember``, which the ``Pipeline`` drives as it drives its own ``Prefetcher``. A round takes one
credit of every member that can run; the consumer's thread moves finished rounds to the members'
queues. Graphs that cannot be merged keep ``HostSlots`` (``pipeline.share_host_threads``).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from jaxdali.ops import rng
from jaxdali.ops.operator import RunContext
from jaxdali.pipeline.device_stage import DeviceValue
from jaxdali.pipeline.executor import BatchQueue, Cancelled, Prefetcher, Produced, QueueStats
from jaxdali.pipeline.plan import HOST_OUTPUTS
from jaxdali.pipeline.runner import GraphRunner, _Job
from jaxdali.tensors import TensorListCPU

__all__ = ["GroupPart", "GroupMember", "PipelineGroup", "GroupRunContext", "form_group"]


@dataclasses.dataclass(frozen=True)
class GroupPart:
    """What a pipeline brings to a group: its runner, its ``finish(job, done)`` (the runner's
    ``finish_iteration`` plus the pipeline's output checks), its name and its prefetch producers."""

    runner: GraphRunner
    finish: Callable[..., tuple[Any, Any]]
    name: str
    producers: int


@dataclasses.dataclass
class GroupRunContext(RunContext):
    """The context of one round's merged operators: the batch is the pipelines' batches one after the
    other (``parts``: (pipeline, iteration, batch size) each), and each part draws the random keys
    its own pipeline would (``seeds``: an operator's seed in the first pipeline -> its seed in each)."""

    parts: tuple[tuple[int, int, int], ...] = ()
    seeds: Mapping[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)

    def sample_keys(self, seed: int) -> np.ndarray:
        per_pipeline = self.seeds[seed]
        return np.concatenate([rng.sample_keys(per_pipeline[p], iteration, n) for p, iteration, n in self.parts])


def form_group(parts: Sequence[GroupPart]) -> list["GroupMember"] | None:
    """One ``GroupMember`` per part when the pipelines are the same graph and some operators after
    the sources can be computed together (``row_wise`` host operators fed by the sources or by such
    operators); None otherwise."""
    runners = [p.runner for p in parts]
    lead = runners[0]
    n, ns = len(lead.plan.steps), lead.plan.num_sources
    if any(len(r.plan.steps) != n or r.plan.num_sources != ns for r in runners):
        return None
    positions = [_positions(r) for r in runners]
    shared: set[int] = set()
    for k in range(ns, n):
        node, _ = lead.plan.steps[k]
        if not all(_same_node(node, positions[0], r.plan.steps[k][0], pos) for r, pos in zip(runners[1:], positions[1:])):
            return None
        fed = all(positions[0][id(i)][0] < ns or positions[0][id(i)][0] in shared
                  for i in list(node.inputs) + list(node.arg_inputs.values()))
        # Host operators ("mixed" decoders decode on the host where they are row_wise).
        on_host = id(node) in lead.plan.on_host or node.device == "mixed"
        if fed and node.batch_node is None and on_host and all(r.plan.steps[k][1].row_wise for r in runners):
            shared.add(k)
    if not shared:
        return None
    if any([positions[0][id(o)] for o in lead._outputs] != [pos[id(o)] for o in r._outputs]
           for r, pos in zip(runners[1:], positions[1:])):
        return None
    seeds: dict[int, tuple[int, ...]] = {}
    for k in shared:
        mine = tuple(r.plan.steps[k][1].seed for r in runners)
        if seeds.setdefault(mine[0], mine) != mine:
            return None  # two operators share a seed in one pipeline but not in another
    return PipelineGroup(parts, frozenset(shared), seeds).members


def _positions(runner: GraphRunner) -> dict[int, tuple[int, int]]:
    """``id`` of every DataNode an operator of ``runner`` produces -> (step index, output index)."""
    return {id(out): (k, j) for k, (node, _) in enumerate(runner.plan.steps) for j, out in enumerate(node.outputs)}


def _same_node(a, a_pos: dict, b, b_pos: dict) -> bool:
    if a.schema.name != b.schema.name or len(a.outputs) != len(b.outputs):
        return False
    if [a_pos.get(id(i)) for i in a.inputs] != [b_pos.get(id(i)) for i in b.inputs]:
        return False
    if {k: a_pos.get(id(v)) for k, v in a.arg_inputs.items()} != {k: b_pos.get(id(v)) for k, v in b.arg_inputs.items()}:
        return False
    return _same_value(dict(a.args), dict(b.args))


def _same_value(x, y) -> bool:
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same_value(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return type(x) is type(y) and len(x) == len(y) and all(_same_value(a, b) for a, b in zip(x, y))
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.dtype == y.dtype \
            and np.array_equal(x, y)
    try:
        return type(x) is type(y) and bool(x == y)
    except (TypeError, ValueError):
        return False


def _split(value, sizes: list[int]) -> list:
    """A merged batch cut back into the pipelines' batches (views)."""
    if isinstance(value, TensorListCPU):
        return value.split(sizes)
    if isinstance(value, DeviceValue) and value.host is not None and value.ref is None and value.array is None:
        return [DeviceValue(host=part) for part in value.host.split(sizes)]
    raise RuntimeError(f"a merged batch of {type(value).__name__} cannot be split")  # computed pipeline by pipeline


class _KeepingValues(dict):
    """A merged job's values: releases (``pop``) of the ``keep`` keys are ignored."""

    def __init__(self, values: dict, keep: frozenset[int]):
        super().__init__(values)
        self._keep = keep

    def pop(self, key, *default):
        return self.get(key, *default) if key in self._keep else super().pop(key, *default)


#: A round result for a pipeline that did not take part after all (it ended or failed meanwhile).
_SKIPPED = object()


class PipelineGroup:
    """Runs the rounds of a group of pipelines (see the module docstring) on one ``Prefetcher``."""

    def __init__(self, parts: Sequence[GroupPart], shared: frozenset[int], seeds: dict[int, tuple[int, ...]]):
        self._parts = list(parts)
        self._runners = [p.runner for p in parts]
        self._seeds = seeds
        lead = self._runners[0]
        lead_ids = [id(out) for node, _ in lead.plan.steps for out in node.outputs]
        # Per pipeline: its DataNode ids <-> the first pipeline's (the merged operators' keys).
        self._to_lead = [{id(out): lead_ids[i] for i, out in enumerate(o for node, _ in r.plan.steps for o in node.outputs)}
                         for r in self._runners]
        self._from_lead = [{v: k for k, v in m.items()} for m in self._to_lead]
        self._finish_steps = range(lead.plan.num_sources, len(lead.plan.steps))
        self._shared = shared  # the steps computed once per round (unless a member records them on the device)
        self._output_keys = frozenset(id(o) for o in lead._outputs)
        #: Rounds whose shared steps raised, so that each pipeline computed its batch alone.
        self.fallbacks = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._rounds: collections.deque[tuple[int, ...]] = collections.deque()  # scheduled, not begun
        self._unpulled = 0  # rounds scheduled and not yet moved to the members' queues
        self._pulling = False
        producers = parts[0].producers
        for r in self._runners:
            r.overlap(producers)
        self.members = [GroupMember(self, i, p.name) for i, p in enumerate(parts)]
        self._round_hook: Callable[[list], list] | None = None
        self._producer = Prefetcher(lambda: self._finish_round(self._begin_round()),
                                    f"group-{parts[0].name}", self._begin_round, self._finish_round, producers,
                                    cancel=self._cancel, on_stop=self._close_runners)

    def set_round_hook(self, hook: Callable[[list], list] | None) -> None:
        """``hook(batches)``, called on the producer thread with the ``PipelineBatch`` of every pipeline
        when a round holds all of them, returns the batches to queue instead (the JAX iterator runs
        the group's device program there, ahead of ``next()``). When it raises, the batches are
        queued as they were (the consumer then meets the error where it would have)."""
        self._round_hook = hook

    # -- producer side: one round -----------------------------------------------------------------------
    def _begin_round(self):
        with self._lock:
            members = self._rounds.popleft()
        entries, results = [], {}
        for m in members:
            member = self.members[m]
            if member._halted or member._closed:
                results[m] = _SKIPPED
                continue
            try:
                entries.append((m, self._runners[m].begin_iteration()))
            except StopIteration:
                results[m] = self._halt(m, Produced(end=True))
            except BaseException as e:  # noqa: BLE001 - handed to that pipeline's consumer
                results[m] = self._halt(m, Produced(error=e))
        return entries, results

    def _finish_round(self, begun) -> tuple[dict, None]:
        entries, results = begun
        if entries:
            try:
                outcomes = self._finish_together(entries)
            except Cancelled:
                raise
            except BaseException:  # noqa: BLE001 - each pipeline computes its batch alone, raising its own error
                self.fallbacks += 1
                outcomes = [self._finish_alone(m, job) for m, job in entries]
            for (m, _), produced in zip(entries, outcomes):
                results[m] = self._halt(m, produced) if produced.error is not None else produced
            if self._round_hook is not None and len(entries) == len(self.members) \
                    and all(p.error is None for p in outcomes):
                try:
                    batches = self._round_hook([p.outputs for p in outcomes])
                except Cancelled:
                    raise
                except Exception:  # noqa: BLE001 - left to the consumer, which meets it again
                    batches = None
                if batches is not None:
                    for (m, _), produced, batch in zip(entries, outcomes, batches):
                        produced.outputs = batch
        return results, None

    def _finish_alone(self, m: int, job: _Job, done: frozenset[int] = frozenset()) -> Produced:
        try:
            outputs, state = self._parts[m].finish(job, done)
            return Produced(outputs=outputs, state=state)
        except Cancelled:
            raise
        except BaseException as e:  # noqa: BLE001 - handed to that pipeline's consumer
            return Produced(error=e)

    def _finish_together(self, entries: list[tuple[int, _Job]]) -> list[Produced]:
        """The round's batches: the shared operators once over all rows, then each pipeline's rest."""
        done = self._merged_steps(entries)
        merged = self._merge(entries) if done and len(entries) > 1 else None
        if merged is None:
            return [self._finish_alone(m, job) for m, job in entries]
        lead = self._runners[0]
        # What the steps left to each pipeline read stays, though a merged step after them in the
        # run order would release it.
        merged.values = _KeepingValues(merged.values, self._read_by(frozenset(self._finish_steps) - done))
        for k in self._finish_steps:
            if k in done:
                lead._step(k, merged)
        if merged.ctx.replaced:
            raise RuntimeError("a row_wise operator replaced rows")  # computed again, pipeline by pipeline
        sizes = [job.ctx.batch_size for _, job in entries]
        # Only what the rest reads goes back (the merged run stops before the steps that would release
        # the others, e.g. a decoder's samples that only the shared resize reads).
        wanted = self._read_by(frozenset(self._finish_steps) - done) | self._output_keys
        pieces = {key: _split(value, sizes) for key, value in merged.values.items() if key in wanted}
        for i, (m, job) in enumerate(entries):
            back = self._from_lead[m]
            job.values.clear()
            job.values.update({back[key]: parts[i] for key, parts in pieces.items()})
        return [self._finish_alone(m, job, done) for m, job in entries]

    def _read_by(self, steps: frozenset[int]) -> frozenset[int]:
        """The first pipeline's value keys that ``steps`` read."""
        nodes = [self._runners[0].plan.steps[k][0] for k in steps]
        return frozenset(id(i) for n in nodes
                         for i in list(n.inputs) + list(n.arg_inputs.values()) + [n.batch_node] if i is not None)

    def _merged_steps(self, entries) -> frozenset[int]:
        """The steps computed once for the round: those after the sources that no pipeline of the round
        records into its device stage (empty when the pipelines' device stages differ)."""
        offloaded = {frozenset(k for k in self._shared if id(self._runners[m].plan.steps[k][0]) in job.mode.offloaded)
                     for m, job in entries}
        if len(offloaded) != 1:
            return frozenset()
        return self._shared - offloaded.pop()

    def _merge(self, entries) -> _Job | None:
        """One job holding the round's source outputs, pipeline after pipeline (None: not mergeable)."""
        columns: dict[int, list] = {}
        for m, job in entries:
            lead_key = self._to_lead[m]
            for key, value in job.values.items():
                if not isinstance(value, TensorListCPU) or value.replaced_rows:
                    return None
                columns.setdefault(lead_key[key], []).append(value)
        if any(len(parts) != len(entries) or len({p.layout() for p in parts}) != 1 for parts in columns.values()):
            return None
        first = entries[0][1].ctx
        sizes = [job.ctx.batch_size for _, job in entries]
        ctx = GroupRunContext(iteration=first.iteration, epoch=first.epoch, iteration_in_epoch=first.iteration_in_epoch,
                              batch_size=sum(sizes), max_batch_size=sum(sizes),
                              parallel_for=self._runners[0]._parallel_for,
                              parts=tuple((m, job.ctx.iteration, job.ctx.batch_size) for m, job in entries),
                              seeds=self._seeds)
        merged = _Job(ctx, HOST_OUTPUTS)
        merged.values = {key: TensorListCPU.concat(parts) for key, parts in columns.items()}
        return merged

    def _halt(self, m: int, produced: Produced) -> Produced:
        """An end or error of pipeline ``m``: no further batch of it begins until ``resume``."""
        with self._lock:
            self.members[m]._halted = True
            self.members[m]._credits = 0
        return produced

    def _cancel(self) -> None:
        for r in self._runners:
            r.cancel()

    def _close_runners(self) -> None:
        for r in self._runners:
            r.close()

    # -- consumer side (called with the lock held) ------------------------------------------------------
    def _form_rounds(self, force: "GroupMember | None" = None) -> None:
        """Schedules a round for every credit all running members have; with ``force``, also one of the
        members that have a credit, when ``force`` has one and waits for it."""
        running = [m for m in self.members if not (m._halted or m._closed)]
        while running and all(m._credits for m in running):
            self._schedule_round(running)
        if force is not None and force._credits and not force._inflight:
            self._schedule_round([m for m in running if m._credits])

    def _schedule_round(self, members: list["GroupMember"]) -> None:
        for m in members:
            m._credits -= 1
            m._inflight += 1
        self._rounds.append(tuple(m.index for m in members))
        self._unpulled += 1
        self._producer.schedule(1)

    def _pull(self) -> None:
        """Moves the next finished round to its members' queues, waiting for it (or for the thread that
        is already waiting for it)."""
        if self._pulling:
            self._cond.wait()
            return
        self._pulling = True
        self._lock.release()
        try:
            item = self._producer.get()
        finally:
            self._lock.acquire()
            self._pulling = False
            self._cond.notify_all()
        self._unpulled -= 1
        if item.error is not None:  # the round itself failed (cancelled): every member of it gets the error
            raise item.error
        for m, produced in item.outputs.items():
            member = self.members[m]
            member._inflight -= 1
            if produced is not _SKIPPED and not member._closed:
                member._queue.append(produced)

    def _member_closed(self, join: bool, timeout: float) -> None:
        with self._lock:
            if not all(m._closed for m in self.members):
                return
        self._producer.close(timeout=timeout, join=join)


class GroupMember(BatchQueue):
    """A pipeline's prefetcher inside a ``PipelineGroup``: the consumer side of ``Prefetcher`` (same
    methods and meaning), fed by the group's rounds."""

    def __init__(self, group: PipelineGroup, index: int, name: str):
        super().__init__()
        self._group = group
        self._lock = group._lock
        self.index = index
        self._name = name
        self._credits = 0  # batches asked for and not yet in a round
        self._inflight = 0  # rounds with a batch of this pipeline not yet moved to the queue

    @property
    def producers(self) -> int:
        return self._group._producer.producers

    @property
    def group(self) -> PipelineGroup:
        return self._group

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"pipeline {self._name!r} is closed")

    def _coming(self) -> bool:
        return bool(self._credits or self._inflight)

    def _wait_for_entry(self) -> None:
        self._group._form_rounds(force=self)
        self._group._pull()

    def _add_credit(self) -> None:
        self._credits += 1
        self._group._form_rounds()

    def _credits_changed(self) -> None:
        self._group._form_rounds()

    def _in_progress(self) -> int:
        return self._credits + self._inflight

    def schedule(self, runs: int) -> None:
        with self._lock:
            self._check_open()
            if self._halted:
                return
            self._credits += runs
            self._group._form_rounds()

    def statistics(self) -> QueueStats:
        with self._lock:
            idle = self._group._producer.statistics().producer_idle_seconds
            return dataclasses.replace(self._stats, queued=len(self._queue), producer_idle_seconds=idle)

    def wait_idle(self) -> None:
        """Waits until every batch asked for is computed (or the pipeline halted, or was closed)."""
        group = self._group
        with group._lock:
            while not self._closed and (self._inflight or (self._credits and not self._halted)):
                group._form_rounds(force=self)
                group._pull()

    def discard(self) -> None:
        group = self._group
        with group._lock:
            self._credits = 0
            while self._inflight and not self._closed:
                group._pull()
            self._queue.clear()

    def wakeup(self) -> None:
        self._group._producer.wakeup()

    def share_slots(self, slots) -> None:
        """Nothing to share: the group's producers are one pipeline's."""

    def close(self, timeout: float = 30.0, join: bool = True) -> None:
        """Stops this pipeline's part; the group's threads stop (and every pipeline's operators close)
        once all its pipelines are closed."""
        with self._lock:
            self._closed = True
            self._credits = 0
            self._queue.clear()
            self._group._cond.notify_all()
        self._group._member_closed(join, timeout)

    def wait_stopped(self, deadline: float) -> None:
        if all(m._closed for m in self._group.members):
            self._group._producer.wait_stopped(deadline)
