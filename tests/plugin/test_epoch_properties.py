"""Property-based tests of the iterators' epoch, shard, padding and mask arithmetic (issue 15).

``Reference`` is a small model written here from the text of spec §2 (DALI 2.4's readers and
iterator, plus jaxdali's documented differences): S simulated readers that walk their shards, and
the iterator's counters as plain mutable integers. Hypothesis compares it, over thousands of random
configurations (policy, padding, stick_to_shard, shards, pipelines, dataset and batch sizes,
reader_name or size=, early stops, several epochs), with ``_DaliBaseIterator`` driving fake
pipelines that read through ``jaxdali.ops.sampling``; a smaller sample runs real pipelines over
files, and a few fixed configurations check the reference against real DALI.
"""

from __future__ import annotations

import collections
import json
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

from jaxdali.ops.sampling import ShardSpec, shard_bounds, stream_indices  # noqa: E402
from jaxdali.pipeline.batch import PipelineBatch  # noqa: E402
from jaxdali.plugin.driver import _DaliBaseIterator  # noqa: E402
from jaxdali.plugin.epoch_counter import EpochCounters, LastBatchPolicy, ReaderLayout  # noqa: E402

FILL, DROP, PARTIAL = LastBatchPolicy.FILL, LastBatchPolicy.DROP, LastBatchPolicy.PARTIAL
STOP = "stop"


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# =============================================================================================
# The reference model.


class Reference:
    """Readers and iterator as spec §2 describes them, one pipeline per entry of ``shard_ids``.

    ``dali=True`` keeps DALI's DROP + padding desync (§2.11-1) instead of jaxdali's fix.
    """

    def __init__(self, n, s, bs, shard_ids, policy, pad, stick, size=None, dali=False):
        self.n, self.s, self.bs, self.policy, self.pad, self.stick, self.dali = n, s, bs, policy, pad, stick, dali
        self.sizes = [(k + 1) * n // s - k * n // s for k in range(s)]
        self.offsets = [k * n // s for k in range(s)]
        self.starts = list(shard_ids)  # each reader's first shard
        self.pos = 0  # every reader's stream position (they move in lock step)
        self.np = len(shard_ids)
        self.reader_mode = size is None
        self.counter = 0
        if not self.reader_mode:
            self.size = size
        elif policy is DROP:
            self.size = n // s
        elif pad:
            self.size = ceil_div(n, s)
        else:
            self.size = ceil_div(ceil_div(n, s), bs) * bs
        self.read_ahead, self.shard_sizes, self.ids = [0] * s, list(self.sizes), list(shard_ids)
        self.epoch_start = 0

    # -- readers --
    def sample(self, start: int, p: int) -> int:
        if self.pad:
            length = ceil_div(ceil_div(self.n, self.s), self.bs) * self.bs
            epoch, offset = divmod(p, length)
            shard = start if self.stick else (start + epoch) % self.s
            return self.offsets[shard] + min(offset, self.sizes[shard] - 1)
        if self.stick:
            return self.offsets[start] + p % self.sizes[start]
        q, shard = p % self.n, start
        while q >= self.sizes[shard]:
            q -= self.sizes[shard]
            shard = (shard + 1) % self.s
        return self.offsets[shard] + q

    def fetch(self) -> list[list[int]]:
        batch = [[self.sample(k, self.pos + i) for i in range(self.bs)] for k in self.starts]
        self.pos += self.bs
        self.counter += self.step
        return batch

    # -- iterator --
    @property
    def step(self) -> int:
        return self.bs if self.reader_mode else self.np * self.bs

    def length(self) -> int:
        per = self.step
        return self.size // per if self.policy is DROP else ceil_div(self.size, per)

    def drops(self, counter: int) -> bool:
        if self.policy is not DROP:
            return False
        if self.reader_mode:
            return any(r + counter > ss for r, ss in zip(self.read_ahead, self.shard_sizes))
        return counter > self.size

    def next(self):
        """(batch, mask) or STOP; PARTIAL batches come trimmed, masks are for reader mode."""
        if self.counter >= self.size:
            return STOP
        batch = self.fetch()
        if self.drops(self.counter):
            return STOP
        mask = None
        if self.reader_mode:
            handed = self.counter - self.epoch_start
            mask = [handed - self.bs + i < self.sizes[k] for k in self.ids for i in range(self.bs)]
        if self.policy is PARTIAL:
            if self.reader_mode:
                left = [self.bs - (self.counter - self.sizes[k]) for k in self.ids]
                batch = [b[:max(0, min(self.bs, x))] for b, x in zip(batch, left)]
            elif self.counter > self.size:
                need = self.np * self.bs - (self.counter - self.size)
                kept = ceil_div(need, self.bs)
                batch = batch[:kept]
                batch[-1] = batch[-1][:need % self.bs or self.bs]
        return batch, mask

    def reset(self) -> bool:
        """False when ignored (mid-epoch)."""
        if self.policy is DROP and self.counter < self.size and self.drops(self.counter + self.step):
            self.fetch()
        if self.policy is DROP and self.pad and self.reader_mode and not self.dali and self.counter >= self.size:
            while self.counter < ceil_div(ceil_div(self.n, self.s), self.bs) * self.bs:
                self.fetch()
        if self.counter < self.size:
            return False
        fill_no_pad = self.policy is FILL and not self.pad
        if not self.reader_mode:
            self.counter = self.counter % self.size if fill_no_pad else 0
            return True
        if fill_no_pad:
            self.counter -= min(self.read_ahead)
            self.read_ahead = [r + self.counter - ss for r, ss in zip(self.read_ahead, self.shard_sizes)]
            self.counter = min(self.read_ahead)
        else:
            self.counter = 0
        if not self.stick:
            self.ids = [(k + 1) % self.s for k in self.ids]
        if fill_no_pad:
            if not self.stick:
                self.shard_sizes = self.shard_sizes[-1:] + self.shard_sizes[:-1]
            self.size = ceil_div(max(ss - r for ss, r in zip(self.shard_sizes, self.read_ahead)), self.bs) * self.bs
            if self.size == 0:
                self.read_ahead, self.counter = [0] * self.s, 0
                self.shard_sizes = self.shard_sizes[-1:] + self.shard_sizes[:-1]
                self.size = ceil_div(max(self.shard_sizes), self.bs) * self.bs
        self.epoch_start = self.counter
        return True


# =============================================================================================
# The implementation under test: _DaliBaseIterator over fake pipelines reading through sampling.


class StreamPipeline:
    """A pipeline whose only output is its reader's stream (``sampling.stream_indices``)."""

    def __init__(self, spec: ShardSpec, checkpoint: bytes | None = None):
        self.spec, self.max_batch_size = spec, spec.batch_size
        # Unshuffled streams repeat: with padding after S (or, sticking, 1) padded reader epochs,
        # without after N (or the shard's size) samples. One period, read once, serves every batch.
        if spec.pad_last_batch:
            period = spec.padded_epoch_length * (1 if spec.stick_to_shard else spec.num_shards)
        else:
            begin, end = shard_bounds(spec.num_samples, spec.num_shards, spec.shard_id)
            period = end - begin if spec.stick_to_shard else spec.num_samples
        self.stream = stream_indices(spec, 0, period * spec.batch_size).tolist()
        self.enable_checkpointing = True
        self.consumed = 0
        self.is_restored_from_checkpoint = checkpoint is not None
        self.restored_iterator_data = None
        if checkpoint is not None:
            doc = json.loads(checkpoint)
            self.consumed, self.restored_iterator_data = doc["consumed"], doc["iterator"]
        self.restored_iteration = self.consumed

    def build(self):
        pass

    def iterator_api(self):
        return self

    def reader_meta(self, name):
        s = self.spec
        return dict(epoch_size=s.num_samples, number_of_shards=s.num_shards, shard_id=s.shard_id,
                    epoch_size_padded=ceil_div(s.num_samples, s.num_shards) * s.num_shards if s.pad_last_batch
                    else s.num_samples, pad_last_batch=s.pad_last_batch, stick_to_shard=s.stick_to_shard)

    def reader_resume(self, name):
        return None

    def schedule_run(self):
        pass

    def share_and_schedule(self):
        start = self.consumed * self.spec.batch_size % len(self.stream)
        self.consumed += 1
        return PipelineBatch((self.stream[start:start + self.spec.batch_size],))

    def reset(self):
        pass

    def empty(self):
        return False

    def checkpoint(self, iterator_data):
        return json.dumps({"consumed": self.consumed, "iterator": iterator_data}).encode()


class ListIterator(_DaliBaseIterator):
    def __next__(self):
        return self._next_batch()

    def _assemble_batch(self, batches, rows):
        batch = [list(b.outputs[0]) for b in batches]
        if rows is not None:
            batch = [b[:r] for b, r in zip(batch, rows)][:len(rows)]
        return batch


CONFIG = st.fixed_dictionaries({
    "n": st.integers(1, 40),
    "s": st.integers(1, 5),
    "bs": st.integers(1, 6),
    "policy": st.sampled_from([FILL, DROP, PARTIAL]),
    "pad": st.booleans(),
    "stick": st.booleans(),
    "subset": st.sampled_from(["all", "first", "last"]),  # pipelines: every shard, or one (multi-process)
    "size_mode": st.booleans(),
    "epochs": st.integers(1, 5),
    "early": st.lists(st.booleans(), min_size=5, max_size=5),  # stop after len() batches, then reset
    "auto_reset": st.just(False),
    "prepare": st.just(False),
})


def layout_of(cfg):
    n, s = cfg["n"], min(cfg["s"], cfg["n"])
    ids = {"all": list(range(s)), "first": [0], "last": [s - 1]}[cfg["subset"]]
    return n, s, ids


def make_pair(cfg, checkpoints=None):
    n, s, ids = layout_of(cfg)
    bs, policy, pad, stick = cfg["bs"], cfg["policy"], cfg["pad"], cfg["stick"]
    pipes = [StreamPipeline(ShardSpec(n, s, k, stick, pad, bs), None if checkpoints is None else checkpoints[j])
             for j, k in enumerate(ids)]
    size = n if cfg["size_mode"] else None
    kwargs = dict(size=size, last_batch_padded=pad) if size else dict(reader_name="Reader")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # size= recommends reader_name
        it = ListIterator(pipes, last_batch_policy=policy, prepare_first_batch=cfg["prepare"],
                          auto_reset=cfg["auto_reset"], **kwargs)
    it._mask_warned = True  # FILL without padding warns that the mask is not exact: known here
    return it, Reference(n, s, bs, ids, policy, pad, stick, size)


def observe(it, steps):
    """What next() returns, step by step: a batch (with its mask in reader mode) or STOP."""
    out = []
    for _ in range(steps):
        try:
            batch = next(it)
        except StopIteration:
            out.append(STOP)
            continue
        mask = it._nonpadding_mask().tolist() if it._reader_name and it._counters.policy is not PARTIAL else None
        out.append((batch, mask))
    return out


def run_epochs(it, ref, cfg):
    """Both side by side for cfg["epochs"] epochs; returns the reference's epochs (lists of batches)."""
    epochs = []
    for e in range(cfg["epochs"]):
        assert len(it) == ref.length(), e
        batches, guard = [], 4 * ref.length() + 4
        if cfg["early"][e] and ref.length() > 0:
            for _ in range(ref.length()):
                expected = ref.next()
                if expected == STOP:
                    break
                got = observe(it, 1)[0]
                assert got[0] == expected[0], (e, "early")
                batches.append(expected)
        else:
            while guard:
                guard -= 1
                expected = ref.next()
                got = observe(it, 1)[0]
                if expected == STOP:
                    assert got == STOP, (e, got)
                    break
                assert got != STOP, (e, expected)
                assert got[0] == expected[0], (e, got, expected)
                if expected[1] is not None and ref.policy is not PARTIAL:
                    assert got[1] == expected[1], (e, got, expected)
                batches.append(expected)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a reset mid-epoch (DROP stopped early, FILL...) warns
            it.reset()
        ref.reset()
        assert it._counters.counter == ref.counter and it.size == ref.size, e
        epochs.append(batches)
    return epochs


@settings(max_examples=1000, deadline=None, derandomize=True)
@given(CONFIG)
def test_iterator_matches_the_reference_model(cfg):
    it, ref = make_pair(cfg)
    run_epochs(it, ref, cfg)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(CONFIG, st.integers(0, 30), st.booleans(), st.booleans())
def test_a_checkpoint_anywhere_restores_the_same_continuation(cfg, warmup, auto_reset, prepare):
    cfg = dict(cfg, auto_reset=auto_reset, prepare=prepare)
    n, s, _ = layout_of(cfg)
    hypothesis.assume(not (prepare and cfg["policy"] is DROP and n // s < cfg["bs"]))  # E14 in the constructor
    it, _ = make_pair(cfg)
    steps = observe(it, warmup)
    if steps and steps[-1] == STOP:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            it.reset()
    cps = it.checkpoints()
    restored, _ = make_pair(cfg, cps)  # never refused: the counters are reachable from the iteration
    for _ in range(3):
        a, b = observe(it, 8), observe(restored, 8)
        assert a == b
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            it.reset(), restored.reset()


@settings(max_examples=300, deadline=None, derandomize=True)
@given(CONFIG, st.integers(0, 30), st.sampled_from(["_counter", "_size", "_counter_per_gpu", "_shards_id"]),
       st.integers(-7, 7).filter(bool))
def test_an_edited_counter_is_refused_unless_reachable(cfg, warmup, key, delta):
    from jaxdali.core.checkpoint import CheckpointError

    it, _ = make_pair(cfg)
    observe(it, warmup)
    doc = json.loads(it.checkpoints()[0])
    data = doc["iterator"]
    if key not in data:
        return
    value = data[key]
    data[key] = [value[0] + delta] + value[1:] if isinstance(value, list) else value + delta
    edited = json.dumps(doc).encode()
    fresh, _ = make_pair(cfg)
    reachable = fresh._counters.reachable_after(doc["consumed"])
    legit = reachable is not None and any(c.to_dict() == data for c in reachable)
    if legit:
        make_pair(cfg, [edited] * len(it._apis))
    else:
        with pytest.raises(CheckpointError, match=f"iterator.{key}|iterator._counter|iterator._size"):
            make_pair(cfg, [edited] * len(it._apis))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(CONFIG, st.integers(0, 200))
def test_reachable_after_equals_a_step_by_step_replay(cfg, fetches):
    it, _ = make_pair(cfg)
    fresh = it._counters
    if fresh.size < 0:
        return
    # Step by step: next() until the epoch ends, then reset(); the states after each fetch.
    states, c, done = {0: [fresh]}, fresh, 0
    while done < fetches:
        if c.epoch_ended:
            pass
        else:
            dropped = c.drops_next_batch()
            c = c.advance()
            done += 1
            states[done] = [c]
            if not dropped and not c.epoch_ended:
                continue
        # the epoch ended (by count, or by a dropped batch): reset(), which may fetch and discard
        # batches first (the states in between are not observable)
        discard = c.batches_to_discard_on_reset()
        for _ in range(discard):
            c = c.advance()
        done += discard
        c = c.next_epoch()
        if discard:
            states[done] = [c]
        else:
            states[done].append(c)
    expected = {json.dumps(x.to_dict()) for x in states.get(fetches, [])}
    got = {json.dumps(x.to_dict()) for x in fresh.reachable_after(fetches)}
    assert got == expected


# =============================================================================================
# Properties of the data itself (mask exactness), model-free.


@settings(max_examples=500, deadline=None, derandomize=True)
@given(CONFIG)
def test_the_mask_counts_every_sample_of_an_epoch_once(cfg):
    cfg = dict(cfg, size_mode=False, subset="all", early=[False] * 5,
               policy=cfg["policy"] if cfg["policy"] is not PARTIAL else FILL)
    it, ref = make_pair(cfg)
    n, s, _ = layout_of(cfg)
    for batches in run_epochs(it, ref, cfg):
        counted = collections.Counter(x for batch, mask in batches
                                      for x, real in zip((v for b in batch for v in b), mask) if real)
        held = {v for batch, _ in batches for b in batch for v in b}
        if cfg["pad"] or cfg["policy"] is DROP or s == 1 or cfg["stick"]:
            # each sample the epoch holds is counted once
            assert set(counted.values()) <= {1} and set(counted) == held
        if it._counters.mask_is_exact and cfg["policy"] is FILL:
            assert counted == collections.Counter(range(n))  # ... and the epoch holds them all
        if cfg["policy"] is DROP:
            assert sum(counted.values()) == s * (n // s // cfg["bs"]) * cfg["bs"]


def test_partial_with_padding_returns_every_sample_once_per_epoch():
    for n in range(1, 30):
        for s in range(1, min(n, 4) + 1):
            for bs in range(1, 5):
                cfg = dict(n=n, s=s, bs=bs, policy=PARTIAL, pad=True, stick=False, subset="all", size_mode=False,
                           epochs=3, early=[False] * 5, auto_reset=False, prepare=False)
                it, ref = make_pair(cfg)
                for batches in run_epochs(it, ref, cfg):
                    got = sorted(v for batch, _ in batches for b in batch for v in b)
                    assert got == list(range(n)), (n, s, bs)


# =============================================================================================
# A sample of real pipelines, and the reference against real DALI.


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("files")
    paths = []
    for i in range(24):
        path = folder / f"{i:03d}.bin"
        path.write_bytes(bytes([i]))
        paths.append(str(path))
    return paths


def real_iterator(files, n, s, ids, bs, policy, pad, stick, module):
    """A JAX iterator of `module` (jaxdali or DALI) over `n` files; each batch as per-pipeline lists."""
    fn, pipeline_def = module.fn, module.pipeline_def

    @pipeline_def(batch_size=bs, num_threads=1, device_id=None, seed=1, prefetch_queue_depth=1)
    def pipe(shard_id):
        _, label = fn.readers.file(files=files[:n], shard_id=shard_id, num_shards=s, pad_last_batch=pad,
                                   stick_to_shard=stick, name="Reader")
        return label

    return module.DALIGenericIterator([pipe(k) for k in ids], ["label"], reader_name="Reader",
                                      last_batch_policy=module.LastBatchPolicy(policy.value))


def compare_real(it, ref, epochs):
    for e in range(epochs):
        for _ in range(4 * ref.length() + 4):
            expected = ref.next()
            try:
                batch = next(it)
            except StopIteration:
                assert expected == STOP, (e, expected)
                break
            got = np.asarray(batch["label"]).reshape(len(ref.starts), ref.bs).tolist()
            assert expected != STOP and got == expected[0], (e, got, expected)
        it.reset()
        ref.reset()


class _Jaxdali:
    from jaxdali import fn, pipeline_def
    from jaxdali.plugin.jax import DALIGenericIterator, LastBatchPolicy


@settings(max_examples=10, deadline=None, derandomize=True)
@given(st.integers(1, 24), st.integers(1, 3), st.integers(1, 4), st.sampled_from([FILL, DROP]), st.booleans(),
       st.booleans())
def test_real_pipelines_match_the_reference(files, n, s, bs, policy, pad, stick):
    s = min(s, n)
    hypothesis.assume(not (policy is DROP and n // s < bs))  # no data: E14, tested elsewhere
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = real_iterator(files, n, s, list(range(s)), bs, policy, pad, stick, _Jaxdali)
        compare_real(it, Reference(n, s, bs, list(range(s)), policy, pad, stick), 3)


@pytest.mark.parametrize("n, s, bs, policy, pad, stick", [
    (10, 3, 2, FILL, False, False),  # spec worked example A
    (10, 3, 2, FILL, False, True),
    (10, 3, 2, DROP, False, False),
    (10, 3, 3, DROP, True, False),  # DALI's DROP + padding desync (§2.11-1)
    (7, 1, 2, FILL, False, False),
    (17, 2, 3, FILL, True, False),
])
def test_the_reference_matches_real_dali(files, n, s, bs, policy, pad, stick):
    dali = pytest.importorskip("nvidia.dali")
    jax_plugin = pytest.importorskip("nvidia.dali.plugin.jax")

    class Dali:
        fn, pipeline_def = dali.fn, dali.pipeline_def
        DALIGenericIterator = jax_plugin.DALIGenericIterator
        LastBatchPolicy = jax_plugin.LastBatchPolicy if hasattr(jax_plugin, "LastBatchPolicy") else \
            __import__("nvidia.dali.plugin.base_iterator", fromlist=["LastBatchPolicy"]).LastBatchPolicy

    it = real_iterator(files, n, s, list(range(s)), bs, policy, pad, stick, Dali)
    compare_real(it, Reference(n, s, bs, list(range(s)), policy, pad, stick, dali=True), 4)
