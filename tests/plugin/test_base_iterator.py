"""Tests for the iterator machinery: LastBatchPolicy and EpochCounters (``jaxdali.plugin.epoch_counter``)
and _DaliBaseIterator (``jaxdali.plugin.driver``).

Every behaviour case runs through a small driver of the pure ``EpochCounters`` state machine
written here from spec §2.4-2.5 (``CountersDriver``) and through ``_DaliBaseIterator`` over fake
pipelines (``ListIterator``); both simulate readers with ``sampling.stream_indices``. The reader
cases run a third time end to end (driver "jax"): real one-byte files, jaxdali's file reader and
the JAX ``DALIGenericIterator``, so the tables also hold for the real reader and prefetching.
Expected sequences come from spec §2.9-2.10 and §8, which were observed on DALI 2.4; where a
sequence was not in the spec it was generated with DALI 2.4 and pasted here (marked "DALI 2.4").
Sample values are 0-based dataset indices.
"""

import collections
import json
import logging
import warnings

import numpy
import pytest

from jaxdali import fn, pipeline_def
from jaxdali.ops.sampling import ShardSpec, stream_indices
from jaxdali.pipeline.batch import PipelineBatch
from jaxdali.plugin import messages
from jaxdali.plugin.driver import _DaliBaseIterator
from jaxdali.plugin.epoch_counter import EpochCounters, LastBatchPolicy, ReaderLayout
from jaxdali.plugin.jax import DALIGenericIterator
from jaxdali.core.checkpoint import CheckpointError

FILL, DROP, PARTIAL = LastBatchPolicy.FILL, LastBatchPolicy.DROP, LastBatchPolicy.PARTIAL

# =============================================================================================
# Simulation: sources, fake pipelines, and the two drivers.


class ReaderSource:
    """A simulated file reader: emits batches of ``bs`` dataset indices from a ShardSpec."""

    def __init__(self, n, num_shards, shard_id, stick, pad, bs):
        self.spec = ShardSpec(n, num_shards, shard_id, stick, pad, bs)
        self.bs = bs

    def meta(self):
        s = self.spec
        n_pad = -(-s.num_samples // s.num_shards) * s.num_shards if s.pad_last_batch else s.num_samples
        return dict(epoch_size=s.num_samples, epoch_size_padded=n_pad, number_of_shards=s.num_shards,
                    shard_id=s.shard_id, pad_last_batch=s.pad_last_batch, stick_to_shard=s.stick_to_shard)

    def batch(self, index, epoch, index_in_epoch):
        """Batch number ``index`` of the stream (readers ignore pipeline epochs)."""
        return stream_indices(self.spec, index * self.bs, self.bs).tolist()


class CounterSource:
    """The spec's "counter source": sample value = index in the epoch + offset; ends an epoch after
    ``stop_after`` batches if given (then the next epoch restarts at 0)."""

    def __init__(self, offset, bs, stop_after=None, batch_sizes=None):
        self.offset, self.bs, self.stop_after, self.batch_sizes = offset, bs, stop_after, batch_sizes

    def batch(self, index, epoch, index_in_epoch):
        if self.stop_after is not None and index_in_epoch >= self.stop_after:
            raise StopIteration
        size = self.batch_sizes[index_in_epoch % len(self.batch_sizes)] if self.batch_sizes else self.bs
        start = index_in_epoch * self.bs
        return [start + i + self.offset for i in range(size)]


class FakePipeline:
    """Implements the pipeline side of the iterator protocol over a source, with a real prefetch
    queue: batches are made when scheduled, a source's StopIteration is seen when the queue runs dry.
    Checkpoints are JSON: the number of batches consumed, the epoch, and the iterator data."""

    def __init__(self, source, depth=2, enable_checkpointing=False, checkpoint=None, reader="Reader"):
        self.source, self.depth, self.reader = source, depth, reader
        self.max_batch_size = source.bs
        self.enable_checkpointing = enable_checkpointing
        self.built = self.locked = False
        self.queue = collections.deque()
        self.produced = self.consumed = 0  # batches over the whole life (reader streams)
        self.epoch = self.produced_in_epoch = self.consumed_in_epoch = 0
        self.first = True  # the next schedule_run prefetches `depth` batches
        self.source_ended = False
        self.current = None
        self.schedule_calls = 0
        self.restored_iterator_data = None
        self.is_restored_from_checkpoint = checkpoint is not None
        self.restored_iteration = 0
        if checkpoint is not None:
            state = json.loads(checkpoint)
            self.produced = self.consumed = state["consumed"]
            self.epoch = state["epoch"]
            self.produced_in_epoch = self.consumed_in_epoch = state["consumed_in_epoch"]
            self.restored_iterator_data = state["iterator_data"]
            self.restored_iteration = state["consumed"]

    # pipeline side
    def build(self):
        self.built = True

    def reader_resume(self, name):
        return None  # fake readers never resume on another shard layout

    def reader_meta(self, name):
        if name != self.reader or not isinstance(self.source, ReaderSource):
            raise RuntimeError(f'Assert on "meta" failed: Operator {name}  not found or does not expose valid metadata.')
        return self.source.meta()

    def iterator_api(self):
        assert self.built
        self.locked = True
        return self

    # IteratorAPI side
    def schedule_run(self):
        self.schedule_calls += 1
        for _ in range(self.depth if self.first else 1):
            self.first = False
            if self.source_ended:
                return
            try:
                batch = self.source.batch(self.produced, self.epoch, self.produced_in_epoch)
            except StopIteration:
                self.source_ended = True
                return
            self.queue.append(batch)
            self.produced += 1
            self.produced_in_epoch += 1

    def share_outputs(self):
        if not self.queue:
            if self.source_ended:
                raise StopIteration
            raise AssertionError("share_outputs without a scheduled run")
        assert self.current is None, "previous outputs not released"
        self.current = self.queue.popleft()
        self.consumed += 1
        self.consumed_in_epoch += 1
        return (list(self.current),)

    def release_outputs(self):
        self.current = None

    def share_and_schedule(self):
        outputs = self.share_outputs()
        self.release_outputs()
        self.schedule_run()
        return PipelineBatch(outputs)

    def reset(self):
        if self.source_ended:
            self.source_ended = False
            self.first = True
            self.epoch += 1
            self.produced_in_epoch = self.consumed_in_epoch = 0

    def empty(self):
        return not self.queue

    def checkpoint(self, iterator_data):
        return json.dumps(dict(consumed=self.consumed, epoch=self.epoch,
                               consumed_in_epoch=self.consumed_in_epoch,
                               iterator_data=iterator_data)).encode()


class ListIterator(_DaliBaseIterator):
    """The smallest framework iterator: a batch is a list of per-pipeline lists of values."""

    def __next__(self):
        return self._next_batch()

    def _assemble_batch(self, batches, rows):
        batch = [list(b.outputs[0]) for b in batches]
        if rows is not None:
            batch = [b[:r] for b, r in zip(batch, rows)]
        return batch


def reader_sources(n, num_shards, bs, stick=False, pad=False, shards=None):
    shards = range(num_shards) if shards is None else shards
    return [ReaderSource(n, num_shards, k, stick, pad, bs) for k in shards]


def make_iterator(sources, depth=2, checkpointing=False, checkpoints=None, **kwargs):
    pipes = [
        FakePipeline(src, depth, checkpointing, None if checkpoints is None else checkpoints[i])
        for i, src in enumerate(sources)
    ]
    return ListIterator(pipes, **kwargs)


class CountersDriver:
    """Drives the pure EpochCounters exactly as spec §2.4 (next) and §2.5 (reset) describe,
    over plain sources (no pipelines, no prefetch)."""

    def __init__(self, sources, policy=FILL, reader=True, size=-1, padded=False, auto_reset=False,
                 prepare_first_batch=True):
        self.sources = sources
        self.positions = [0] * len(sources)
        self.in_epoch = [0] * len(sources)
        self.ended = [False] * len(sources)
        self.auto_reset = auto_reset
        bs = sources[0].bs
        if reader:
            layout, ids = ReaderLayout.from_meta([s.meta() for s in sources])
            self.c = EpochCounters.for_reader(policy, layout, ids, bs)
        else:
            self.c = EpochCounters.for_size(policy, size, bs, len(sources), padded)
        self.first = None
        if prepare_first_batch:
            try:
                self.first = self.next()
            except StopIteration:
                raise RuntimeError(messages.NO_DATA_MSG) from None

    def _fetch(self):
        out = []
        for j, src in enumerate(self.sources):
            try:
                out.append(src.batch(self.positions[j], 0, self.in_epoch[j]))
            except StopIteration:
                self.ended[j] = True
                if self.c.size < 0 and self.auto_reset:
                    self.reset()
                raise
            self.positions[j] += 1
            self.in_epoch[j] += 1
        return out

    def _end(self):
        if self.auto_reset:
            self.reset()
        raise StopIteration

    def next(self):
        if self.first is not None:
            batch, self.first = self.first, None
            return batch
        if self.c.epoch_ended:  # step 3
            self._end()
        outputs = self._fetch()  # step 4
        dropped = self.c.drops_next_batch()  # step 8, judged before counting
        self.c = self.c.advance()  # step 7
        if dropped:
            self._end()
        rows = self.c.partial_rows()  # PyTorch PARTIAL trimming (§2.6)
        return outputs if rows is None else [b[:r] for b, r in zip(outputs, rows)]

    __next__ = next

    def __iter__(self):
        return self

    def reset(self):
        for _ in range(self.c.batches_to_discard_on_reset()):
            self._fetch()
            self.c = self.c.advance()
        if not self.c.epoch_over:
            return
        self.c = self.c.next_epoch()
        for j, ended in enumerate(self.ended):
            if ended:
                self.ended[j], self.in_epoch[j] = False, 0

    @property
    def size(self):
        return self.c.size

    def __len__(self):
        return self.c.num_batches


def run_epochs(it, num_epochs, stop="stopiteration"):
    """Per epoch: (size at its start, len() at its start, batches). An epoch ends at StopIteration
    (stop="stopiteration") or after len() batches (stop="len"); reset() follows unless auto_reset."""
    epochs = []
    for _ in range(num_epochs):
        size, length, batches = it.size, len(it), []
        if stop == "len":
            batches = [next(it) for _ in range(length)]
        else:
            while True:
                try:
                    batches.append(next(it))
                except StopIteration:
                    break
                assert len(batches) < 1000
        epochs.append((size, length, batches))
        auto_reset = it._auto_reset if isinstance(it, _DaliBaseIterator) else it.auto_reset
        if not auto_reset:
            it.reset()
    return epochs


def build_both(kind, **case):
    """The same case as (CountersDriver, ListIterator)."""
    if kind == "reader":
        make = lambda: reader_sources(case["n"], case["s"], case["bs"], case.get("stick", False),
                                      case.get("pad", False), case.get("shards"))
        policy = case.get("policy", FILL)
        driver = CountersDriver(make(), policy=policy, reader=True, auto_reset=case.get("auto_reset", False))
        it = make_iterator(make(), reader_name="Reader", last_batch_policy=policy,
                           auto_reset=case.get("auto_reset", False))
        return driver, it
    make = lambda: [CounterSource(100 * j, case["bs"], case.get("stop_after")) for j in range(case.get("np", 1))]
    policy = case.get("policy", FILL)
    padded = case.get("padded", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # W2: size without reader
        driver = CountersDriver(make(), policy=policy, reader=False, size=case["size"], padded=padded,
                                auto_reset=case.get("auto_reset", False))
        it = make_iterator(make(), size=case["size"], last_batch_policy=policy, last_batch_padded=padded,
                           auto_reset=case.get("auto_reset", False))
    return driver, it


class JaxListIterator(DALIGenericIterator):
    """The JAX iterator with its batches in ``ListIterator``'s form: per pipeline, a list of values."""

    def __next__(self):
        data = numpy.asarray(super().__next__()["data"])
        return data.reshape(len(self._pipes), self.batch_size).tolist()


def real_reader_iterator(files, n, s, bs, stick=False, pad=False, shards=None, policy=FILL, auto_reset=False):
    """A reader case end to end: ``n`` real files, one CPU pipeline per shard in ``shards``, each with
    jaxdali's file reader, wrapped in the JAX iterator."""

    @pipeline_def(batch_size=bs, num_threads=1, device_id=None)
    def reader(shard_id):
        data, _ = fn.readers.file(files=files(n), shard_id=shard_id, num_shards=s, pad_last_batch=pad,
                                  stick_to_shard=stick, name="Reader")
        return data

    pipes = [reader(k) for k in (range(s) if shards is None else shards)]
    return JaxListIterator(pipes, ["data"], reader_name="Reader", last_batch_policy=policy, auto_reset=auto_reset)


def real_counter_iterator(size, bs, np=1, stop_after=None, policy=FILL, padded=False, auto_reset=False):
    """A size-mode case end to end: ``np`` CPU pipelines whose per-sample ``external_source`` is the
    counter source (offset 100 * pipeline), wrapped in the JAX iterator."""

    @pipeline_def(batch_size=bs, num_threads=1, device_id=None)
    def counter(offset):
        def sample(info):
            if stop_after is not None and info.iteration >= stop_after:
                raise StopIteration
            return numpy.array([info.idx_in_epoch + offset], numpy.int32)

        return fn.external_source(source=sample, batch=False)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # W2: size without reader
        return JaxListIterator([counter(100 * j) for j in range(np)], ["data"], size=size, last_batch_policy=policy,
                               last_batch_padded=padded, auto_reset=auto_reset)


SIMULATED = ["counters", "iterator"]
DRIVERS = SIMULATED + ["jax"]


def run_case(driver_kind, kind, num_epochs, stop="stopiteration", files=None, **case):
    """Runs a case through one driver; ``files`` (the ``index_files`` fixture) is needed by "jax"."""
    if driver_kind == "jax":
        it = real_reader_iterator(files, **case) if kind == "reader" else real_counter_iterator(**case)
        return run_epochs(it, num_epochs, stop)
    driver, it = build_both(kind, **case)
    return run_epochs(driver if driver_kind == "counters" else it, num_epochs, stop)


def flat(batch):
    """[pipe0 values, pipe1 values, ...] -> a single list when there is one pipeline."""
    return batch[0] if len(batch) == 1 else batch


def normalize(epochs):
    """(size, len, batches) per epoch with single-pipeline batches flattened."""
    return [(size, length, [flat(b) for b in batches]) for size, length, batches in epochs]


# =============================================================================================
# Reader mode: spec table 2.9, worked examples A-C of 2.10, cases B, E, J1, J5.
# Each row: (id, case, [(size, len, batches) per epoch]). One pipeline: a batch is a flat list;
# several pipelines: [pipe0 values, pipe1 values, ...].

P7_FILL_PAD = [[0, 1], [2, 3], [4, 5], [6, 6]]
P7_DROP = [[0, 1], [2, 3], [4, 5]]
P7_PARTIAL_PAD = [[0, 1], [2, 3], [4, 5], [6]]
A_FILL_PAD = [[[0, 1], [3, 4], [6, 7]], [[2, 2], [5, 5], [8, 9]]]
A_DROP = [[[0, 1], [3, 4], [6, 7]]]

READER_CASES = [
    # --- table 2.9 / B1-B4 / J1: files 7, bs 2, one shard ---
    ("B1-fill-pad", dict(n=7, s=1, bs=2, pad=True, policy=FILL),
     [(7, 4, P7_FILL_PAD)] * 3),
    # B2: the [6,0] batch reads into the next epoch, which is then one batch shorter (size 6).
    ("B2-fill-nopad", dict(n=7, s=1, bs=2, policy=FILL),
     [(8, 4, [[0, 1], [2, 3], [4, 5], [6, 0]]), (6, 3, [[1, 2], [3, 4], [5, 6]]),
      (8, 4, [[0, 1], [2, 3], [4, 5], [6, 0]])]),
    # B3: the 4th next() fetches [6,6] and drops it.
    ("B3-drop-pad", dict(n=7, s=1, bs=2, pad=True, policy=DROP), [(7, 3, P7_DROP)] * 3),
    # B4: the dropped [6,0] / [0,1] shift the next epochs.
    ("B4-drop-nopad", dict(n=7, s=1, bs=2, policy=DROP),
     [(7, 3, P7_DROP), (7, 3, [[1, 2], [3, 4], [5, 6]]), (7, 3, [[2, 3], [4, 5], [6, 0]])]),
    ("J1-partial-pad", dict(n=7, s=1, bs=2, pad=True, policy=PARTIAL), [(7, 4, P7_PARTIAL_PAD)] * 3),
    ("partial-nopad", dict(n=7, s=1, bs=2, policy=PARTIAL),
     [(8, 4, [[0, 1], [2, 3], [4, 5], [6]]), (8, 4, [[1, 2], [3, 4], [5, 6], [0]]),
      (8, 4, [[2, 3], [4, 5], [6, 0], [1]])]),
    # B5: 3, 2, 2, 3 batches.
    ("B5-fill-nopad-bs3", dict(n=7, s=1, bs=3, policy=FILL),
     [(9, 3, [[0, 1, 2], [3, 4, 5], [6, 0, 1]]), (6, 2, [[2, 3, 4], [5, 6, 0]]),
      (6, 2, [[1, 2, 3], [4, 5, 6]]), (9, 3, [[0, 1, 2], [3, 4, 5], [6, 0, 1]])]),
    # --- worked example A / E1-E5: files 10, S=3, bs 2, three pipelines ---
    ("E1-fill-pad", dict(n=10, s=3, bs=2, pad=True, policy=FILL),
     [(4, 2, A_FILL_PAD),
      (4, 2, [[[3, 4], [6, 7], [0, 1]], [[5, 5], [8, 9], [2, 2]]]),  # shards rotate +1
      (4, 2, [[[6, 7], [0, 1], [3, 4]], [[8, 9], [2, 2], [5, 5]]]),
      (4, 2, A_FILL_PAD)]),
    # E2: len 2,2,1,2 and size 4,4,2,4: the pipelines read ahead into the next epoch.
    ("E2-fill-nopad", dict(n=10, s=3, bs=2, policy=FILL),
     [(4, 2, [[[0, 1], [3, 4], [6, 7]], [[2, 3], [5, 6], [8, 9]]]),
      (4, 2, [[[4, 5], [7, 8], [0, 1]], [[6, 7], [9, 0], [2, 3]]]),
      (2, 1, [[[8, 9], [1, 2], [4, 5]]]),
      (4, 2, [[[0, 1], [3, 4], [6, 7]], [[2, 3], [5, 6], [8, 9]]])]),
    ("E3-fill-nopad-stick", dict(n=10, s=3, bs=2, stick=True, policy=FILL),
     [(4, 2, [[[0, 1], [3, 4], [6, 7]], [[2, 0], [5, 3], [8, 9]]]),
      (4, 2, [[[1, 2], [4, 5], [6, 7]], [[0, 1], [3, 4], [8, 9]]]),
      (4, 2, [[[2, 0], [5, 3], [6, 7]], [[1, 2], [4, 5], [8, 9]]]),
      (4, 2, [[[0, 1], [3, 4], [6, 7]], [[2, 0], [5, 3], [8, 9]]])]),
    ("E4-drop-pad", dict(n=10, s=3, bs=2, pad=True, policy=DROP),
     [(3, 1, A_DROP), (3, 1, [[[3, 4], [6, 7], [0, 1]]]), (3, 1, [[[6, 7], [0, 1], [3, 4]]]),
      (3, 1, A_DROP)]),
    ("E5-drop-nopad", dict(n=10, s=3, bs=2, policy=DROP),
     [(3, 1, A_DROP), (3, 1, [[[4, 5], [7, 8], [0, 1]]]), (3, 1, [[[8, 9], [1, 2], [4, 5]]]),
      (3, 1, [[[2, 3], [5, 6], [8, 9]]])]),
    ("A-partial-pad", dict(n=10, s=3, bs=2, pad=True, policy=PARTIAL),
     [(4, 2, [[[0, 1], [3, 4], [6, 7]], [[2], [5], [8, 9]]]),
      (4, 2, [[[3, 4], [6, 7], [0, 1]], [[5], [8, 9], [2]]]),
      (4, 2, [[[6, 7], [0, 1], [3, 4]], [[8, 9], [2], [5]]])]),
    # --- worked example C / E10: one pipeline on shard 0 of 3; the counters model all 3 shards ---
    ("E10-one-pipe-fill-nopad", dict(n=10, s=3, bs=2, shards=[0], policy=FILL),
     [(4, 2, [[0, 1], [2, 3]]), (4, 2, [[4, 5], [6, 7]]), (2, 1, [[8, 9]]), (4, 2, [[0, 1], [2, 3]])]),
    ("C-one-pipe-fill-pad", dict(n=10, s=3, bs=2, shards=[0], pad=True, policy=FILL),
     [(4, 2, [[0, 1], [2, 2]]), (4, 2, [[3, 4], [5, 5]]), (4, 2, [[6, 7], [8, 9]]),
      (4, 2, [[0, 1], [2, 2]])]),
    # --- E8: files 9, S=2, bs 3 ---
    ("E8-fill-nopad", dict(n=9, s=2, bs=3, policy=FILL),
     [(6, 2, [[[0, 1, 2], [4, 5, 6]], [[3, 4, 5], [7, 8, 0]]]), (3, 1, [[[6, 7, 8], [1, 2, 3]]]),
      (6, 2, [[[0, 1, 2], [4, 5, 6]], [[3, 4, 5], [7, 8, 0]]]), (3, 1, [[[6, 7, 8], [1, 2, 3]]])]),
    ("E8-fill-pad", dict(n=9, s=2, bs=3, pad=True, policy=FILL),
     [(5, 2, [[[0, 1, 2], [4, 5, 6]], [[3, 3, 3], [7, 8, 8]]]),
      (5, 2, [[[4, 5, 6], [0, 1, 2]], [[7, 8, 8], [3, 3, 3]]]),
      (5, 2, [[[0, 1, 2], [4, 5, 6]], [[3, 3, 3], [7, 8, 8]]])]),
    ("E8-drop-nopad", dict(n=9, s=2, bs=3, policy=DROP),
     [(4, 1, [[[0, 1, 2], [4, 5, 6]]]), (4, 1, [[[6, 7, 8], [1, 2, 3]]]),
      (4, 1, [[[3, 4, 5], [7, 8, 0]]]), (4, 1, [[[0, 1, 2], [4, 5, 6]]])]),
    # --- E11 with our fix of §2.11-1: DALI 2.4 returns pure padding [2,2,2│5,5,5│9,9,9] as epoch
    # 2 here; we drain the reader's padding batch so every epoch starts on the next shard's data.
    ("E11-drop-pad-fixed", dict(n=10, s=3, bs=3, pad=True, policy=DROP),
     [(3, 1, [[[0, 1, 2], [3, 4, 5], [6, 7, 8]]]), (3, 1, [[[3, 4, 5], [6, 7, 8], [0, 1, 2]]]),
      (3, 1, [[[6, 7, 8], [0, 1, 2], [3, 4, 5]]]), (3, 1, [[[0, 1, 2], [3, 4, 5], [6, 7, 8]]])]),
    # --- J5: PARTIAL can cut a pipeline's batch to 0 rows (its last batch is all padding) ---
    ("J5-partial-pad-empty-rows", dict(n=10, s=3, bs=3, pad=True, policy=PARTIAL),
     [(4, 2, [[[0, 1, 2], [3, 4, 5], [6, 7, 8]], [[], [], [9]]]),
      (4, 2, [[[3, 4, 5], [6, 7, 8], [0, 1, 2]], [[], [9], []]]),
      (4, 2, [[[6, 7, 8], [0, 1, 2], [3, 4, 5]], [[9], [], []]])]),
    # --- auto_reset: the same epochs without calling reset() (B7 style) ---
    ("B2-auto-reset", dict(n=7, s=1, bs=2, policy=FILL, auto_reset=True),
     [(8, 4, [[0, 1], [2, 3], [4, 5], [6, 0]]), (6, 3, [[1, 2], [3, 4], [5, 6]]),
      (8, 4, [[0, 1], [2, 3], [4, 5], [6, 0]])]),
    ("E11-auto-reset", dict(n=10, s=3, bs=3, pad=True, policy=DROP, auto_reset=True),
     [(3, 1, [[[0, 1, 2], [3, 4, 5], [6, 7, 8]]]), (3, 1, [[[3, 4, 5], [6, 7, 8], [0, 1, 2]]]),
      (3, 1, [[[6, 7, 8], [0, 1, 2], [3, 4, 5]]])]),
]


def with_drivers(cases):
    """Each (name, case, expected) row once per driver; the JAX driver leaves out PARTIAL (PyTorch only)."""
    return [pytest.param(driver, *row, id=f"{row[0]}-{driver}") for row in cases for driver in DRIVERS
            if not (driver == "jax" and row[1].get("policy") is PARTIAL)]


@pytest.mark.parametrize("driver, name, case, expected", with_drivers(READER_CASES))
def test_reader_mode_epochs(driver, name, case, expected, index_files):
    got = normalize(run_case(driver, "reader", len(expected), files=index_files, **case))
    assert [g[:2] for g in got] == [e[:2] for e in expected], "(size, len) per epoch"
    assert got == expected


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize(
    "case, batches_per_epoch",
    [
        (dict(n=47, s=2, bs=3, policy=FILL), [8, 8, 8, 8]),  # E6: size 24
        (dict(n=47, s=2, bs=3, policy=DROP), [7, 7, 7, 7]),  # E6: size 23
        (dict(n=47, s=2, bs=2, policy=FILL), [12, 12, 12, 11]),  # E7
        (dict(n=47, s=2, bs=2, pad=True, policy=DROP), [11, 11, 11]),  # example B, bs 2
        (dict(n=11, s=4, bs=2, policy=FILL), [2, 1, 2, 1, 1, 2]),  # E9
    ],
)
def test_reader_mode_batches_per_epoch_follow_len(driver, case, batches_per_epoch, index_files):
    got = run_case(driver, "reader", len(batches_per_epoch), files=index_files, **case)
    assert [len(batches) for _, _, batches in got] == batches_per_epoch
    assert [length for _, length, _ in got] == batches_per_epoch


def example_b_epoch(policy, pad, epoch):
    """Worked example B (N=47, S=2 with shards 0..22 and 23..46, bs 3, two pipelines), epoch ``epoch``
    (0-based), written from the reader's behaviour (spec §2.1). Without padding each pipeline reads the
    dataset cyclically from its shard's start, 24 samples per epoch: FILL returns 8 batches, DROP 7
    (it fetches and drops the 8th). With padding, pipeline j reads shard (j + epoch) mod 2 each epoch,
    shard 0 padded with a second 22."""
    shards = [list(range(23)) + [22], list(range(23, 47))]
    if pad:
        streams = [shards[(j + epoch) % 2] for j in range(2)]
    else:
        streams = [[(start + 24 * epoch + i) % 47 for i in range(24)] for start in (0, 23)]
    steps = 7 if policy is DROP else 8
    return [[stream[3 * b:3 * b + 3] for stream in streams] for b in range(steps)]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("policy, pad", [(FILL, False), (DROP, False), (FILL, True)])
def test_worked_example_b_four_epochs(driver, policy, pad, index_files):
    # Spec: FILL no pad size 24, ends [21,22,23│44,45,46], epoch 2 starts [24,25,26│0,1,2]; DROP no pad
    # size 23, epoch 1 = [0..20│23..43]; FILL pad ends [21,22,22│44,45,46], then the shards swap.
    epochs = run_case(driver, "reader", 4, files=index_files, n=47, s=2, bs=3, pad=pad, policy=policy)
    expected = [example_b_epoch(policy, pad, e) for e in range(4)]
    assert [batches for _, _, batches in epochs] == expected
    assert [length for _, length, _ in epochs] == [len(e) for e in expected]
    assert epochs[0][0] == (23 if policy is DROP else 24)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("n, s, bs", [(7, 1, 2), (10, 3, 2), (10, 3, 3), (9, 2, 3), (11, 4, 2)])
def test_drop_reset_after_len_batches_equals_running_into_stopiteration(driver, pad, n, s, bs, index_files):
    # D7: a user stopping after len() batches and calling reset() sees the same next epochs.
    case = dict(n=n, s=s, bs=bs, pad=pad, policy=DROP)
    assert run_case(driver, "reader", 2 * s + 2, "len", files=index_files, **case) == run_case(
        driver, "reader", 2 * s + 2, files=index_files, **case)


@pytest.mark.parametrize("driver", SIMULATED)
def test_reader_epoch_properties_over_small_layouts(driver):
    """E13-style matrix: len() is the number of steps; with padding shards never overlap; PARTIAL
    returns exactly the shard; DROP at most the shard; FILL+pad the whole shard plus padding; FILL
    without padding and with rotation never repeats a sample inside an epoch; DROP+pad epochs are
    the first len() batches of each reader epoch (our §2.11-1 fix)."""
    for n, s, bs, stick, pad, policy in _grid():
        case = dict(n=n, s=s, bs=bs, stick=stick, pad=pad, policy=policy)
        try:
            epochs = run_case(driver, "reader", 3 * s, **case)
        except RuntimeError as error:  # E14: DROP with bs > N // S
            assert policy is DROP and bs > n // s and messages.NO_DATA_MSG in str(error)
            continue
        sizes = [int(x) for x in ReaderLayout(n, n, s, pad, stick).initial_shard_sizes]
        padded_epoch = -(-(-(-n // s)) // bs) * bs
        for e, (_, length, batches) in enumerate(epochs):
            assert len(batches) == length, (case, e)
            for j in range(s):
                shard = j if stick else (j + e) % s
                values = [v for b in batches for v in b[j]]
                shard_range = set(range(sum(sizes[:shard]), sum(sizes[:shard + 1])))
                if policy is PARTIAL and pad:
                    assert sorted(values) == sorted(shard_range), (case, e, j)
                if policy is DROP:
                    assert len(values) <= sizes[shard], (case, e, j)
                if policy is DROP and pad:
                    reader = ReaderSource(n, s, j, stick, True, bs)
                    expected = [reader.batch(e * padded_epoch // bs + b, 0, 0) for b in range(length)]
                    assert [b[j] for b in batches] == expected, (case, e, j)
                if policy is FILL and pad:
                    assert len(values) == padded_epoch and set(values) == shard_range, (case, e, j)
                if policy is FILL and not pad and not stick and len(values) <= n:
                    assert len(set(values)) == len(values), (case, e, j)
            if pad and policy is not DROP:  # shards never overlap in an epoch
                seen = [set(v for b in batches for v in b[j]) for j in range(s)]
                assert sum(map(len, seen)) == len(set().union(*seen)) == n, (case, e)


def _grid():
    for n in (1, 2, 3, 5, 7, 10, 12):
        for s in range(1, min(n, 4) + 1):
            for bs in (1, 2, 3, 5):
                for stick in (False, True):
                    for pad in (False, True):
                        for policy in LastBatchPolicy:
                            yield n, s, bs, stick, pad, policy


# =============================================================================================
# Size mode: cases C1-C5, C9, C11, J3, J4.

SIZE_CASES = [
    # C1/C11: FILL, not padded: len() always 4 although the real epochs are 4, 3, 4, 3 batches.
    ("C1-fill", dict(size=7, bs=2, policy=FILL),
     [(7, 4, [[0, 1], [2, 3], [4, 5], [6, 7]]), (7, 4, [[8, 9], [10, 11], [12, 13]]),
      (7, 4, [[14, 15], [16, 17], [18, 19], [20, 21]])]),
    # C2: last_batch_padded only changes the counting: 4 batches every epoch.
    ("C2-fill-padded", dict(size=7, bs=2, policy=FILL, padded=True),
     [(7, 4, [[0, 1], [2, 3], [4, 5], [6, 7]]), (7, 4, [[8, 9], [10, 11], [12, 13], [14, 15]]),
      (7, 4, [[16, 17], [18, 19], [20, 21], [22, 23]])]),
    # C3: DROP fetches [6,7] and drops it; epoch 2 starts at [8,9].
    ("C3-drop", dict(size=7, bs=2, policy=DROP),
     [(7, 3, [[0, 1], [2, 3], [4, 5]]), (7, 3, [[8, 9], [10, 11], [12, 13]]),
      (7, 3, [[16, 17], [18, 19], [20, 21]])]),
    ("C3-drop-padded", dict(size=7, bs=2, policy=DROP, padded=True),
     [(7, 3, [[0, 1], [2, 3], [4, 5]]), (7, 3, [[8, 9], [10, 11], [12, 13]]),
      (7, 3, [[16, 17], [18, 19], [20, 21]])]),
    # C4: two sources (offsets 0, 100), size 10 summed: 3, 2, 3 batches; len() 3.
    ("C4-two-pipes-fill", dict(size=10, bs=2, np=2, policy=FILL),
     [(10, 3, [[[0, 1], [100, 101]], [[2, 3], [102, 103]], [[4, 5], [104, 105]]]),
      (10, 3, [[[6, 7], [106, 107]], [[8, 9], [108, 109]]]),
      (10, 3, [[[10, 11], [110, 111]], [[12, 13], [112, 113]], [[14, 15], [114, 115]]])]),
    ("C5-two-pipes-drop", dict(size=10, bs=2, np=2, policy=DROP),
     [(10, 2, [[[0, 1], [100, 101]], [[2, 3], [102, 103]]]),
      (10, 2, [[[6, 7], [106, 107]], [[8, 9], [108, 109]]]),
      (10, 2, [[[12, 13], [112, 113]], [[14, 15], [114, 115]]])]),
    ("C9-drop-divisible", dict(size=8, bs=2, policy=DROP),
     [(8, 4, [[0, 1], [2, 3], [4, 5], [6, 7]]), (8, 4, [[8, 9], [10, 11], [12, 13], [14, 15]]),
      (8, 4, [[16, 17], [18, 19], [20, 21], [22, 23]])]),
    # J3: PARTIAL keeps only the pipelines needed to reach `size`, the last one cut.
    ("J3-partial-size5", dict(size=5, bs=2, np=2, policy=PARTIAL),
     # (a step that keeps one pipeline shows as a flat list, like single-pipeline steps)
     [(5, 2, [[[0, 1], [100, 101]], [2]]), (5, 2, [[[4, 5], [104, 105]], [6]]),
      (5, 2, [[[8, 9], [108, 109]], [10]])]),
    ("J3-partial-size7", dict(size=7, bs=2, np=2, policy=PARTIAL),
     [(7, 2, [[[0, 1], [100, 101]], [[2, 3], [102]]]), (7, 2, [[[4, 5], [104, 105]], [[6, 7], [106]]]),
      (7, 2, [[[8, 9], [108, 109]], [[10, 11], [110]]])]),
    ("J4-partial-one-pipe", dict(size=5, bs=2, policy=PARTIAL),
     [(5, 3, [[0, 1], [2, 3], [4]]), (5, 3, [[6, 7], [8, 9], [10]]), (5, 3, [[12, 13], [14, 15], [16]])]),
    # C6 and auto-reset: a source that ends every 3 batches, size -1.
    ("C6-unbounded", dict(size=-1, bs=2, stop_after=3),
     [(-1, 0, [[0, 1], [2, 3], [4, 5]])] * 3),
    ("C6-unbounded-auto-reset", dict(size=-1, bs=2, stop_after=3, auto_reset=True),
     [(-1, 0, [[0, 1], [2, 3], [4, 5]])] * 3),
    ("D5-auto-reset", dict(size=6, bs=2, auto_reset="yes"),
     [(6, 3, [[0, 1], [2, 3], [4, 5]]), (6, 3, [[6, 7], [8, 9], [10, 11]]),
      (6, 3, [[12, 13], [14, 15], [16, 17]])]),
]


@pytest.mark.parametrize("driver, name, case, expected", with_drivers(SIZE_CASES))
def test_size_mode_epochs(driver, name, case, expected):
    if driver == "counters" and case.get("auto_reset") == "yes":
        case = dict(case, auto_reset=True)
    got = normalize(run_case(driver, "size", len(expected), **case))
    assert got == expected


@pytest.mark.parametrize(
    "size, num_pipes, bs, policy, expected_len",
    [
        (7, 1, 2, FILL, 4), (7, 1, 2, DROP, 3),  # C9
        (10, 2, 2, FILL, 3), (10, 2, 2, DROP, 2),
        (8, 1, 2, DROP, 4),
        (-1, 1, 2, FILL, 0),  # quirk 3: size -1 -> len 0
        (-1, 1, 1, FILL, 0),  # DALI raises ValueError from len() here (ceil(-1/1) = -1); we say 0
    ],
)
def test_size_mode_len(size, num_pipes, bs, policy, expected_len):
    counters = EpochCounters.for_size(policy, size, bs, num_pipes, False)
    assert counters.num_batches == expected_len
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = make_iterator([CounterSource(0, bs) for _ in range(num_pipes)], size=size,
                           last_batch_policy=policy, prepare_first_batch=False)
    assert len(it) == expected_len and it.size == size


# =============================================================================================
# EpochCounters on its own.

LAYOUT_10_3 = ReaderLayout(10, 10, 3, False, False)


def test_counters_dict_uses_dali_keys():
    c = EpochCounters.for_reader(FILL, LAYOUT_10_3, [0, 1, 2], 2)
    assert c.to_dict() == {"_counter": 0, "_counter_per_gpu": [0, 0, 0],
                           "_shard_sizes_per_gpu": [3, 3, 4], "_shards_id": [0, 1, 2], "_size": 4}
    # spec §5's example: after 2 next() on N=10, S=3, bs=2
    assert c.advance().advance().to_dict()["_counter"] == 4
    assert list(c.to_dict()) == ["_counter", "_counter_per_gpu", "_shard_sizes_per_gpu", "_shards_id", "_size"]
    size_mode = EpochCounters.for_size(FILL, 7, 2, 1, False)
    assert size_mode.advance().to_dict() == {"_counter": 2, "_size": 7}
    json.dumps(c.to_dict())  # JSON-able


def test_counters_restore_round_trips_through_dict_and_json():
    c = EpochCounters.for_reader(FILL, LAYOUT_10_3, [0, 1, 2], 2)
    later = c.advance().advance().next_epoch().advance()
    assert later.read_ahead != (0, 0, 0)  # FILL without padding read ahead
    assert c.restore(later.to_dict()) == later
    assert c.restore(json.dumps(later.to_dict())) == later
    assert c.restore(json.dumps(later.to_dict()).encode()) == later


@pytest.mark.parametrize(
    "data, message",
    [
        ("{not json", "Iterator checkpoint data is not a valid JSON string. "),
        ({"_counter": 1, "_size": 4}, r"Iterator checkpoint data lacks \['_counter_per_gpu'"),
        ({"_counter": 1, "_counter_per_gpu": [0, 0], "_shard_sizes_per_gpu": [3, 3, 4],
          "_shards_id": [0, 1, 2], "_size": 4},
         "_counter_per_gpu has 2 entries in the checkpoint, 3 in this iterator"),
        ({"_counter": 1, "_counter_per_gpu": [0, 0, 0], "_shard_sizes_per_gpu": [3, 3, 4],
          "_shards_id": [0], "_size": 4},
         "_shards_id has 1 entries in the checkpoint, 3 in this iterator"),
    ],
)
def test_counters_restore_rejects_bad_data(data, message):
    with pytest.raises(ValueError, match=message):
        EpochCounters.for_reader(FILL, LAYOUT_10_3, [0, 1, 2], 2).restore(data)


def test_next_epoch_requires_the_epoch_to_be_over():
    c = EpochCounters.for_reader(FILL, LAYOUT_10_3, [0, 1, 2], 2).advance()
    assert not c.epoch_over
    with pytest.raises(ValueError, match="the epoch is not over: counter=2 < size=4"):
        c.next_epoch()


def test_fill_without_padding_rotates_shard_sizes_right():
    # Example A, FILL without padding: sizes [3,3,4] -> [4,3,3] -> [3,4,3]; size 4, 4, 2.
    c = EpochCounters.for_reader(FILL, LAYOUT_10_3, [0, 1, 2], 2)
    c = c.advance().advance()
    assert (c.counter, c.size) == (4, 4)
    c = c.next_epoch()
    assert c.shard_sizes == (4, 3, 3) and c.shard_ids == (1, 2, 0)
    assert c.read_ahead == (1, 1, 0) and c.counter == 0 and c.size == 4
    c = c.advance().advance().next_epoch()
    assert c.shard_sizes == (3, 4, 3) and c.read_ahead == (1, 2, 1) and c.size == 2


def test_padding_and_drop_reset_the_counter_to_zero():
    layout = ReaderLayout(10, 12, 3, True, False)
    for policy in (FILL, DROP, PARTIAL):
        c = EpochCounters.for_reader(policy, layout, [0, 1, 2], 2)
        while not c.epoch_over:
            c = c.advance()
        nxt = c.next_epoch()
        assert nxt.counter == 0 and nxt.shard_sizes == (3, 3, 4) and nxt.shard_ids == (1, 2, 0)


@pytest.mark.parametrize(
    "layout, policy, bs, steps, expected",
    [
        # DALI's pre-drain: stopped after len() = 3 batches of [1..7], the 4th would be dropped.
        (ReaderLayout(7, 7, 1, False, False), DROP, 2, 3, 1),
        # ... and nothing to drain once StopIteration was raised by the drop.
        (ReaderLayout(7, 7, 1, False, False), DROP, 2, 4, 0),
        # Our fix: N=10, S=3, bs=3, pad: the epoch ends by count after 1 batch; the reader's
        # padding batch [2,2,2│5,5,5│9,9,9] must be drained.
        (ReaderLayout(10, 12, 3, True, False), DROP, 3, 1, 1),
        # Mid-epoch: nothing (reset() will be ignored).
        (ReaderLayout(7, 7, 1, False, False), DROP, 2, 1, 0),
        # Not DROP: never.
        (ReaderLayout(7, 7, 1, True, False), FILL, 2, 3, 0),
        # Pre-drain and padding drain together: N=13, S=1, bs=2, pad -> size 13, reader epoch 14.
        (ReaderLayout(13, 13, 1, True, False), DROP, 2, 6, 1),
        # N=10, S=3, bs=1, pad: size 3, reader epoch 4: after 3 batches one padding batch remains.
        (ReaderLayout(10, 12, 3, True, False), DROP, 1, 3, 1),
    ],
)
def test_batches_to_discard_on_reset(layout, policy, bs, steps, expected):
    c = EpochCounters.for_reader(policy, layout, list(range(layout.num_shards)), bs)
    for _ in range(steps):
        c = c.advance()
    assert c.batches_to_discard_on_reset() == expected


def test_partial_rows():
    c = EpochCounters.for_reader(PARTIAL, ReaderLayout(10, 12, 3, True, False), [0, 1, 2], 3)
    assert c.advance().partial_rows() is None
    assert c.advance().advance().partial_rows() == (0, 0, 1)  # J5
    assert EpochCounters.for_reader(FILL, LAYOUT_10_3, [0, 1, 2], 3).advance().advance().partial_rows() is None
    s = EpochCounters.for_size(PARTIAL, 7, 2, 2, False)
    assert s.advance().partial_rows() is None
    assert s.advance().advance().partial_rows() == (2, 1)  # J3, size 7
    assert EpochCounters.for_size(PARTIAL, 5, 2, 2, False).advance().advance().partial_rows() == (1,)


@pytest.mark.parametrize(
    "layout, shard_ids, bs, masks",
    [
        # I6: files 7, bs 2, pad: T,T / T,T / T,T / T,F for [0,1],[2,3],[4,5],[6,6]
        (ReaderLayout(7, 7, 1, True, False), [0], 2, [[1, 1], [1, 1], [1, 1], [1, 0]]),
        # I6: two shards of 7 (sizes 3 and 4), bs 2, pad: step 2 = [2,2│5,6] -> [T,F,T,T]
        (ReaderLayout(7, 8, 2, True, False), [0, 1], 2, [[1, 1, 1, 1], [1, 0, 1, 1]]),
        # I3: files 7, bs 2, FILL, no pad: the 4th batch [6,0] -> [T,F]
        (ReaderLayout(7, 7, 1, False, False), [0], 2, [[1, 1], [1, 1], [1, 1], [1, 0]]),
    ],
)
def test_nonpadding_mask(layout, shard_ids, bs, masks):
    c = EpochCounters.for_reader(FILL, layout, shard_ids, bs)
    for mask in masks:
        c = c.advance()
        assert c.nonpadding_mask().astype(int).tolist() == mask
        assert c.nonpadding_mask().dtype == bool


def test_nonpadding_mask_after_fill_reset_and_in_size_mode():
    c = EpochCounters.for_reader(FILL, ReaderLayout(7, 7, 1, False, False), [0], 2)
    for _ in range(4):
        c = c.advance()
    c = c.next_epoch().advance()  # I3: after reset, [1,2] -> [T,T]
    assert c.nonpadding_mask().tolist() == [True, True]
    with pytest.raises(AttributeError, match="only available for iterators created with `reader_name`"):
        EpochCounters.for_size(FILL, 7, 2, 1, False).nonpadding_mask()


def test_size_mode_forces_fill_without_padding_when_unbounded():
    c = EpochCounters.for_size(DROP, -1, 2, 1, True)
    assert c.policy is FILL and not c.last_batch_padded


def test_last_batch_policy_values():
    assert [(p.name, p.value) for p in LastBatchPolicy] == [("FILL", 0), ("DROP", 1), ("PARTIAL", 2)]


def test_reader_layout_from_meta():
    metas = [s.meta() for s in reader_sources(10, 3, 2, pad=True, shards=[2, 0])]
    layout, ids = ReaderLayout.from_meta(metas)
    assert layout == ReaderLayout(10, 12, 3, True, False) and ids == (2, 0)
    assert layout.initial_shard_sizes == (3, 3, 4)


# =============================================================================================
# _DaliBaseIterator: construction errors and warnings (spec §7).


def _counter_pipes(num, bs=2, **kwargs):
    return [FakePipeline(CounterSource(100 * j, bs), **kwargs) for j in range(num)]


@pytest.mark.parametrize(
    "make, kwargs, error, message",
    [
        (lambda: None, {}, AssertionError, "Number of provided pipelines has to be at least 1"),  # E1
        (lambda: [], {}, AssertionError, "Number of provided pipelines has to be at least 1"),
        (lambda: _counter_pipes(1), dict(last_batch_policy="FILL"), ValueError,  # E4
         "Wrong type for `last_batch_policy`. Expected <enum 'LastBatchPolicy'>, got <class 'str'>"),
        (lambda: [FakePipeline(CounterSource(0, 2)), FakePipeline(CounterSource(0, 3))], {},
         AssertionError, "All pipelines should have the same batch size set"),  # E6
        (lambda: _counter_pipes(1), dict(auto_reset=1), ValueError,
         "Unsupported value for `auto_reset` 1"),  # E7
        (lambda: _counter_pipes(1), dict(auto_reset="maybe"), ValueError,
         "Unsupported value for `auto_reset` maybe"),
        (lambda: _counter_pipes(1), dict(size=0), AssertionError, "Size cannot be 0"),  # E8
        (lambda: _counter_pipes(2), dict(size=-1), AssertionError,
         "Negative size is supported only for a single pipeline"),  # E9
        (lambda: [FakePipeline(s) for s in reader_sources(7, 1, 2)], dict(reader_name="Reader", size=7),
         AssertionError, "When reader_name is provided, size should not be set"),  # E10
        (lambda: [FakePipeline(s) for s in reader_sources(7, 1, 2)],
         dict(reader_name="Reader", last_batch_padded=True), AssertionError,
         "When reader_name is provided, last_batch_padded should not be set"),  # E11
        (lambda: [FakePipeline(s) for s in reader_sources(7, 1, 2)], dict(reader_name="Other"),
         RuntimeError, "Operator Other  not found or does not expose valid metadata"),  # E12
        (lambda: [FakePipeline(ReaderSource(7, 1, 0, False, False, 2)),
                  FakePipeline(ReaderSource(8, 1, 0, False, False, 2))], dict(reader_name="Reader"),
         AssertionError, "Reader Operator should have the same size value in all the pipelines."),  # E13
        (lambda: [FakePipeline(ReaderSource(8, 1, 0, False, False, 2)),
                  FakePipeline(ReaderSource(8, 2, 0, False, False, 2))], dict(reader_name="Reader"),
         AssertionError, "Reader Operator should have the same `num_shards` argument set in all the pipelines."),
        (lambda: [FakePipeline(ReaderSource(8, 2, 0, False, True, 2)),
                  FakePipeline(ReaderSource(8, 2, 1, False, False, 2))], dict(reader_name="Reader"),
         AssertionError, "Reader Operator should have the same `pad_last_batch` argument set in all the pipelines."),
        (lambda: [FakePipeline(ReaderSource(8, 2, 0, True, False, 2)),
                  FakePipeline(ReaderSource(8, 2, 1, False, False, 2))], dict(reader_name="Reader"),
         AssertionError, "Reader Operator should have the same `stick_to_shard` argument set in all the pipelines."),
        # E14 / B6: DROP with bs > N // S
        (lambda: [FakePipeline(s) for s in reader_sources(7, 1, 8)],
         dict(reader_name="Reader", last_batch_policy=DROP), RuntimeError,
         "It seems that there is no data in the pipeline. This may happen if `last_batch_policy` is set "
         "to PARTIAL and the requested batch size is greater than the shard size."),
        (lambda: [FakePipeline(CounterSource(0, 2), enable_checkpointing=True),
                  FakePipeline(CounterSource(0, 2))], dict(size=8), ValueError,
         "All wrapped pipelines must have the same value for `enable_checkpointing`."),  # E15
    ],
)
def test_constructor_errors_keep_dali_types_and_texts(make, kwargs, error, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error) as info:
            ListIterator(make(), **kwargs)
    assert message in str(info.value)


def test_fill_when_batch_larger_than_dataset_has_one_batch():
    it = make_iterator(reader_sources(7, 1, 8), reader_name="Reader")  # B6, FILL
    assert len(it) == 1 and next(it) == [[0, 1, 2, 3, 4, 5, 6, 0]]


def test_variable_batch_size_needs_unbounded_size():
    # C7: variable batch sizes pass through with size=-1, are rejected (E16) with a size.
    it = ListIterator([FakePipeline(CounterSource(0, 3, batch_sizes=[3, 1, 2]))])
    assert [len(next(it)[0]) for _ in range(3)] == [3, 1, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(AssertionError, match="Variable batch size is not supported by the iterator "
                           "when reader_name is provided or iterator size is set explicitly"):
            it = ListIterator([FakePipeline(CounterSource(0, 3, batch_sizes=[3, 1]))], size=5)
            next(it)  # the batch prepared by the constructor had 3 samples
            next(it)


@pytest.mark.parametrize(
    "value, expected",
    [(False, False), (None, False), ("no", False), (True, True), ("yes", True),
     # Divergence from DALI 2.4, which rejects these (quirk 4) although its docs mention "True".
     ("True", True), ("False", False)],
)
def test_auto_reset_values(value, expected):
    it = ListIterator(_counter_pipes(1), auto_reset=value)
    assert it._auto_reset is expected


def test_size_without_reader_warns():
    with pytest.warns(Warning, match="Please set `reader_name` and don't set last_batch_padded and size "
                      "manually whenever possible."):
        ListIterator(_counter_pipes(1), size=4)


def test_fill_last_batch_is_deprecated_and_false_means_partial():
    # W3 (with DALI's run of spaces) and J4: size 5, bs 2 -> [0,1],[2,3],[4]
    with pytest.warns(Warning) as record:
        it = ListIterator(_counter_pipes(1), size=5, fill_last_batch=False)
    texts = [str(r.message) for r in record]
    assert messages.FILL_LAST_BATCH_MSG in texts
    assert messages.FILL_LAST_BATCH_MSG.startswith("Please do not use `fill_last_batch` and use `last_batch_policy`  ")
    assert it._counters.policy is PARTIAL
    assert [b[0] for b in it] == [[0, 1], [2, 3], [4]]
    with pytest.warns(Warning):
        assert ListIterator(_counter_pipes(1), size=5, fill_last_batch=True)._counters.policy is FILL


def test_constructor_builds_and_locks_every_pipeline():
    pipes = _counter_pipes(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = ListIterator(pipes, size=8)
    assert all(p.built and p.locked for p in pipes)
    assert it.batch_size == 2 and it._size == 8 and it._counter == 4  # first batch prepared


# =============================================================================================
# _DaliBaseIterator: prepare_first_batch, reset, iter, auto_reset (cases A7-A9, D1-D8).


def test_prepare_first_batch_false_reads_nothing_until_next():
    # A7
    pipe = FakePipeline(CounterSource(0, 2))
    it = ListIterator([pipe], prepare_first_batch=False)
    assert pipe.schedule_calls == 0 and pipe.produced == 0 and it._counter == 0
    assert next(it) == [[0, 1]]


def test_prepare_first_batch_fetches_one_batch_and_schedules_the_next():
    # A8: prefetch depth 1, bs 2: the source made 2 batches, counter == 2
    pipe = FakePipeline(CounterSource(0, 2), depth=1)
    it = ListIterator([pipe])
    assert pipe.produced == 2 and it._counter == 2
    assert next(it) == [[0, 1]] and next(it) == [[2, 3]]


def test_constructor_does_not_call_an_overridden_next():
    # A9
    class Guarded(ListIterator):
        def __next__(self):
            raise AssertionError("__next__ called from the constructor")

    it = Guarded(_counter_pipes(1))
    assert it._first_batch == [[0, 1]]


def test_stop_iteration_repeats_without_reset_and_iter_starts_the_next_epoch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = ListIterator(_counter_pipes(1), size=4)
    assert [next(it), next(it)] == [[[0, 1]], [[2, 3]]]  # D1
    for _ in range(2):
        with pytest.raises(StopIteration):
            next(it)
    assert [b for b in it] == [[[4, 5]], [[6, 7]]]  # D2: a new for loop resets


def test_reset_mid_epoch_is_ignored_with_a_warning():
    # D3: the exact W1 text, including DALI's run of spaces; a warnings.warn (DALI logs it), so
    # that a library prints nothing unless Python's warning filters say so
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = ListIterator(_counter_pipes(1), size=8)
    assert next(it) == [[0, 1]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        it.reset()
    assert [str(w.message) for w in caught] == [
        "DALI iterator does not support resetting while epoch is not finished. " + " " * 29 + "Ignoring..."
    ]
    assert caught[0].category is RuntimeWarning and caught[0].filename == __file__
    assert next(it) == [[2, 3]] and it._counter == 4


def test_for_loop_mid_epoch_continues_the_epoch():
    # D4 (DALI also logs "Ignoring..." here: the loop's implicit reset is ours, not the user's)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = ListIterator(_counter_pipes(1), size=8)
    next(it)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [b[0] for b in it] == [[2, 3], [4, 5], [6, 7]]


def test_iter_on_a_fresh_iterator_keeps_the_prepared_batch():
    it = make_iterator(reader_sources(7, 1, 2), reader_name="Reader")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert next(iter(it)) == [[0, 1]]


@pytest.mark.parametrize("prepare", [True, False])
def test_external_source_epochs_with_auto_reset(prepare):
    # D8: a source ending every 4 batches, auto_reset, 3 runs -> 12 batches matching the source
    pipe = FakePipeline(CounterSource(0, 1, stop_after=4))
    it = ListIterator([pipe], auto_reset=True, prepare_first_batch=prepare)
    got = [b[0][0] for _ in range(3) for b in it]
    assert got == [0, 1, 2, 3] * 3


def test_auto_reset_size_mode_epoch_ending_with_source_rearms_the_pipeline():
    # The source ends exactly when the count does: the pipeline is re-armed by reset().
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = ListIterator([FakePipeline(CounterSource(0, 2, stop_after=3), depth=2)], size=6,
                          auto_reset=True)
    assert [[b[0] for b in it] for _ in range(3)] == [[[0, 1], [2, 3], [4, 5]]] * 3


@pytest.mark.parametrize("auto_reset", ["no", "yes"])
@pytest.mark.parametrize("policy", [FILL, DROP])
def test_b7_two_passes_over_len_of_iter(auto_reset, policy):
    # B7: 11 labels, bs 2, stick + pad; positions >= 11 (FILL) repeat sample 10.
    it = make_iterator(reader_sources(11, 1, 2, stick=True, pad=True), reader_name="Reader",
                       auto_reset=auto_reset, last_batch_policy=policy)
    for _ in range(2):
        values = []
        for _ in range(len(iter(it))):
            values.append(next(it)[0])
        if policy is FILL:
            assert values == [[min(i * 2 + j, 10) for j in range(2)] for i in range(6)]
        else:
            assert values == [[i * 2 + j for j in range(2)] for i in range(5)]


# =============================================================================================
# Checkpoints (spec §5, cases H1-H4).


def _checkpointed(sources, **kwargs):
    return make_iterator(sources, checkpointing=True, **kwargs)


def _iterator_data(checkpoint):
    return json.loads(checkpoint)["iterator_data"]


def test_checkpoints_disabled_raise():
    it = make_iterator(reader_sources(7, 1, 2), reader_name="Reader")
    with pytest.raises(ValueError, match="Cannot access checkpoints with checkpointing disabled"):
        it.checkpoints()


def test_checkpoints_before_and_after_consumption():
    # H2: three pipelines, files 10, S=3, bs 2
    it = _checkpointed(reader_sources(10, 3, 2), reader_name="Reader")
    cps = it.checkpoints()
    assert isinstance(cps, list) and len(cps) == 3 and all(isinstance(c, bytes) for c in cps)
    # taken before the prepared first batch: the very beginning
    assert [json.loads(c)["consumed"] for c in cps] == [0, 0, 0]
    assert _iterator_data(cps[0]) == {"_counter": 0, "_counter_per_gpu": [0, 0, 0],
                                      "_shard_sizes_per_gpu": [3, 3, 4], "_shards_id": [0, 1, 2], "_size": 4}
    next(it), next(it)
    cps = it.checkpoints()
    assert _iterator_data(cps[0])["_counter"] == 4 and json.loads(cps[0])["consumed"] == 2


def _observe(it, steps):
    """Values per step, None for StopIteration (followed by reset)."""
    out = []
    for _ in range(steps):
        try:
            out.append(next(it))
        except StopIteration:
            out.append(None)
            it.reset()
    return out


@pytest.mark.parametrize("policy", [FILL, DROP])
@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("stick", [False, True])
@pytest.mark.parametrize("n, s, bs", [(10, 3, 2), (7, 1, 2), (10, 3, 3)])
def test_restored_iterator_continues_identically(policy, pad, stick, n, s, bs):
    # H3: warm-up 0..5 steps, checkpoint, 12 more steps: identical values and StopIteration points.
    for warmup in range(6):
        it = _checkpointed(reader_sources(n, s, bs, stick, pad), reader_name="Reader", last_batch_policy=policy)
        _observe(it, warmup)
        cps = it.checkpoints()
        expected = _observe(it, 12)
        restored = _checkpointed(reader_sources(n, s, bs, stick, pad), checkpoints=cps,
                                 reader_name="Reader", last_batch_policy=policy)
        assert _observe(restored, 12) == expected, warmup


def test_checkpoint_at_epoch_end_and_after_reset():
    # H4: files 10, bs 5
    it = _checkpointed(reader_sources(10, 1, 5), reader_name="Reader")
    assert next(it) == [[0, 1, 2, 3, 4]] and next(it) == [[5, 6, 7, 8, 9]]
    with pytest.raises(StopIteration):
        next(it)
    at_end = it.checkpoints()
    it.reset()
    after_reset = it.checkpoints()

    restored = _checkpointed(reader_sources(10, 1, 5), checkpoints=at_end, reader_name="Reader")
    with pytest.raises(StopIteration):
        next(restored)
    restored.reset()
    assert next(restored) == [[0, 1, 2, 3, 4]]

    restored = _checkpointed(reader_sources(10, 1, 5), checkpoints=after_reset, reader_name="Reader")
    assert next(restored) == [[0, 1, 2, 3, 4]]


def test_no_data_error_is_suppressed_for_pipelines_restored_past_their_first_iteration():
    # DROP with bs > N//S restored at the end of an epoch: legitimately at epoch end, no E14.
    it = _checkpointed(reader_sources(7, 1, 4), reader_name="Reader", last_batch_policy=DROP)
    assert next(it) == [[0, 1, 2, 3]]
    with pytest.raises(StopIteration):
        next(it)
    cps = it.checkpoints()
    restored = _checkpointed(reader_sources(7, 1, 4), checkpoints=cps, reader_name="Reader",
                             last_batch_policy=DROP)
    with pytest.raises(StopIteration):
        next(restored)
    # A pipeline restored from a checkpoint of nothing consumed gets the error like a fresh one.
    fresh = json.dumps(dict(consumed=0, epoch=0, consumed_in_epoch=0,
                            iterator_data={"_counter": 0, "_counter_per_gpu": [0], "_size": 7,
                                           "_shard_sizes_per_gpu": [7], "_shards_id": [0]})).encode()
    with pytest.raises(RuntimeError, match="It seems that there is no data in the pipeline"):
        _checkpointed([ReaderSource(7, 1, 0, False, False, 8)], checkpoints=[fresh], reader_name="Reader",
                      last_batch_policy=DROP)


def test_restore_warnings():
    it = _checkpointed(reader_sources(10, 2, 2), reader_name="Reader")
    next(it)
    cps = it.checkpoints()
    with pytest.warns(RuntimeWarning, match=messages.PARTLY_RESTORED_MSG):
        pipes = [FakePipeline(s, 2, True, c) for s, c in zip(reader_sources(10, 2, 2), [cps[0], None])]
        ListIterator(pipes, reader_name="Reader")
    # DALI warns and takes the first pipeline's data; here each pipeline's data is checked
    other = json.loads(cps[1])
    other["iterator_data"] = dict(other["iterator_data"], _counter=0)
    pipes = [FakePipeline(s, 2, True, c) for s, c in zip(reader_sources(10, 2, 2), [cps[0], json.dumps(other).encode()])]
    with pytest.raises(CheckpointError, match=r"'iterator._counter' is 0, but after the pipeline's 1 batches"):
        ListIterator(pipes, reader_name="Reader")
    empty = [json.dumps(dict(json.loads(c), iterator_data=None)).encode() for c in cps]
    with pytest.warns(RuntimeWarning, match=messages.NO_ITERATOR_DATA_MSG):
        ListIterator([FakePipeline(s, 2, True, c) for s, c in zip(reader_sources(10, 2, 2), empty)],
                     reader_name="Reader")


def test_nonpadding_mask_of_the_iterator():
    it = make_iterator(reader_sources(7, 2, 2, pad=True), reader_name="Reader")
    next(it)
    next(it)  # [2,2 │ 5,6]
    assert it._nonpadding_mask().tolist() == [True, False, True, True]
