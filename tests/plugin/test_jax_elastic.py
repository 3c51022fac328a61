"""Elastic resume: a checkpoint from 8 devices restores on 4 (and back) with each remaining sample once."""

from __future__ import annotations

import collections
import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from jaxdali import fn  # noqa: E402
from jaxdali.plugin.jax import data_iterator  # noqa: E402

pytestmark = pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 simulated devices")
N = 50
GLOBAL_BATCH = 16


def make_loader(files, num_devices: int, shuffle_after_epoch: bool):
    mesh = Mesh(jax.devices()[:num_devices], ("batch",))

    @data_iterator(output_map=["label"], reader_name="Reader", sharding=NamedSharding(mesh, P("batch")))
    def loader(shard_id, num_shards):
        _, label = fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards, pad_last_batch=True,
                                   shuffle_after_epoch=shuffle_after_epoch, name="Reader")
        return label

    return loader


def epoch_samples(it, steps=None) -> collections.Counter:
    """Real (non-padding) labels of the batches until the epoch ends (or `steps` batches)."""
    seen = collections.Counter()
    for i, batch in enumerate(it):
        seen.update(np.asarray(batch["label"]).ravel()[np.asarray(it.is_nonpadding)].tolist())
        if steps is not None and i + 1 == steps:
            break
    return seen


@pytest.mark.parametrize("shuffle_after_epoch", [False, True])
@pytest.mark.parametrize("old,new", [(8, 4), (4, 8), (8, 2)])
def test_remaining_samples_each_once_then_whole_epochs(index_files, old, new, shuffle_after_epoch):
    files = index_files(N)
    first = make_loader(files, old, shuffle_after_epoch)(batch_size=GLOBAL_BATCH, enable_checkpointing=True)
    consumed = epoch_samples(first, steps=2)
    cps = first.checkpoints()
    assert len(cps) == old
    resumed = make_loader(files, new, shuffle_after_epoch)(batch_size=GLOBAL_BATCH, enable_checkpointing=True,
                                                           checkpoints=cps)
    rest = epoch_samples(resumed)
    assert sum(consumed.values()) == len(consumed) and sum(rest.values()) == len(rest)  # each once
    assert set(consumed) | set(rest) == set(range(N)) and not set(consumed) & set(rest)
    for _ in range(2):  # following epochs are whole epochs on the new layout
        full = epoch_samples(resumed)
        assert full == collections.Counter(range(N))
        assert len(resumed) == -(-(-(-N // new)) // (GLOBAL_BATCH // new))


def test_checkpoint_inside_the_resumed_epoch_restores_on_the_same_layout(index_files):
    files = index_files(N)
    first = make_loader(files, 8, False)(batch_size=GLOBAL_BATCH, enable_checkpointing=True)
    epoch_samples(first, steps=1)
    resumed = make_loader(files, 4, False)(batch_size=GLOBAL_BATCH, enable_checkpointing=True,
                                           checkpoints=first.checkpoints())
    epoch_samples(resumed, steps=1)
    cps = resumed.checkpoints()
    expected = [np.asarray(b["label"]).ravel().tolist() for b in _take(resumed, 8)]
    again = make_loader(files, 4, False)(batch_size=GLOBAL_BATCH, enable_checkpointing=True, checkpoints=cps)
    assert [np.asarray(b["label"]).ravel().tolist() for b in _take(again, 8)] == expected
    with pytest.raises(RuntimeError, match=r"number of checkpoints provided \(4\) should match"):
        make_loader(files, 8, False)(batch_size=GLOBAL_BATCH, enable_checkpointing=True, checkpoints=cps)


def _take(it, n):
    out = []
    while len(out) < n:
        try:
            out.append(next(it))
        except StopIteration:
            it.reset()
    return out


def test_shuffled_readers_keep_dalis_device_count_check(index_files):
    files = index_files(N)
    mesh = Mesh(jax.devices(), ("batch",))

    @data_iterator(output_map=["label"], reader_name="Reader", sharding=NamedSharding(mesh, P("batch")))
    def loader(shard_id, num_shards):
        return fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards, pad_last_batch=True,
                               random_shuffle=True, name="Reader")[1]

    it = loader(batch_size=GLOBAL_BATCH, enable_checkpointing=True)
    next(it)
    with pytest.raises(RuntimeError, match=r"number of checkpoints provided \(8\) should match the number of "
                                           r"devices to use \(4\)") as info:
        four = Mesh(jax.devices()[:4], ("batch",))
        data_iterator(loader.__wrapped__, output_map=["label"], reader_name="Reader",
                      sharding=NamedSharding(four, P("batch")))(batch_size=GLOBAL_BATCH, enable_checkpointing=True,
                                                                checkpoints=it.checkpoints())
    assert "global sample order" in str(info.value.__cause__)


def _sharded(num_devices: int, graph, **iterator_args):
    mesh = Mesh(jax.devices()[:num_devices], ("batch",))
    return data_iterator(graph, output_map=["x"], sharding=NamedSharding(mesh, P("batch")), **iterator_args)


@pytest.mark.filterwarnings("ignore:Please set `reader_name`")
def test_external_sources_are_not_elastic(index_files):
    """An external source's state is an iteration index of its layout: another device count is E27,
    alone (same per-device batch, so nothing else differs) or next to a reader that could re-shard."""
    files = index_files(N)

    def source_only(shard_id, num_shards):
        return fn.external_source(source=lambda info: np.array([info.idx_in_epoch * num_shards + shard_id]),
                                  batch=False)

    def reader_and_source(shard_id, num_shards):
        _, label = fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards, pad_last_batch=True,
                                   name="Reader")
        return label + fn.external_source(source=lambda i: [np.array([i], np.int32)] * (GLOBAL_BATCH // num_shards),
                                          name="Extra")

    for graph, args, batch, cause in [
            (source_only, {"size": 4 * GLOBAL_BATCH}, GLOBAL_BATCH // 2, "no reader that resumes on another shard"),
            (reader_and_source, {"reader_name": "Reader"}, GLOBAL_BATCH, r"'Extra' \(fn.external_source\) cannot")]:
        it = _sharded(8, graph, **args)(batch_size=GLOBAL_BATCH, enable_checkpointing=True)
        next(it)
        with pytest.raises(RuntimeError, match=r"number of checkpoints provided \(8\) should match the number of "
                                               r"devices to use \(4\)") as info:
            _sharded(4, graph, **args)(batch_size=batch, enable_checkpointing=True, checkpoints=it.checkpoints())
        assert re.search(cause, str(info.value.__cause__))


@pytest.mark.parametrize("steps", [0, 2, 6])  # in the resumed epoch, at its end, in the epochs after it
def test_checkpoints_during_and_after_the_resumed_epoch_pass_validation(index_files, steps):
    files = index_files(N)
    first = make_loader(files, 8, False)(batch_size=GLOBAL_BATCH, enable_checkpointing=True)
    epoch_samples(first, steps=1)
    resumed = make_loader(files, 4, False)(batch_size=GLOBAL_BATCH, enable_checkpointing=True,
                                           checkpoints=first.checkpoints())
    _take(resumed, steps)
    cps = resumed.checkpoints()
    expected = _steps(resumed, 12)
    again = make_loader(files, 4, False)(batch_size=GLOBAL_BATCH, enable_checkpointing=True, checkpoints=cps)
    assert _steps(again, 12) == expected


def _steps(it, n):
    """Labels and masks of `n` calls to next(), None where the epoch ended (then reset)."""
    out = []
    for _ in range(n):
        try:
            batch = next(it)
        except StopIteration:
            out.append(None)
            it.reset()
            continue
        out.append((np.asarray(batch["label"]).ravel().tolist(), np.asarray(it.is_nonpadding).tolist()))
    return out
