"""The padding mask counts every sample of an epoch exactly once, epoch after epoch (issue 15,
defect 8), and the plain epoch loop prints nothing (defect 6, the iterator's part)."""

from __future__ import annotations

import collections
import logging
import warnings

import numpy as np
import pytest

pytest.importorskip("jax")

from jaxdali import fn, pipeline_def  # noqa: E402
from jaxdali.plugin.jax import DALIGenericIterator, LastBatchPolicy  # noqa: E402


@pipeline_def(num_threads=1, device_id=None, prefetch_queue_depth=1)
def labelled(files, shard_id=0, num_shards=1, pad=False, stick=False, shuffle=False):
    _, label = fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards, pad_last_batch=pad,
                               stick_to_shard=stick, random_shuffle=shuffle, name="Reader")
    return label


def make(files, bs, num_shards=1, policy=LastBatchPolicy.FILL, **kwargs):
    pipes = [labelled(files, shard_id=k, num_shards=num_shards, batch_size=bs, seed=3, **kwargs)
             for k in range(num_shards)]
    return DALIGenericIterator(pipes, ["label"], reader_name="Reader", last_batch_policy=policy)


def epochs(it, count: int) -> list[tuple[collections.Counter, set]]:
    """Per epoch (a plain `for` loop each): how often the mask counts each sample, and which
    samples the epoch holds at all."""
    out = []
    for _ in range(count):
        counted, held = collections.Counter(), set()
        for batch in it:
            labels = np.asarray(batch["label"]).reshape(-1).tolist()
            counted.update(x for x, real in zip(labels, it.is_nonpadding.tolist()) if real)
            held.update(labels)
        out.append((counted, held))
    return out


def test_the_mask_counts_every_file_every_epoch(index_files):
    # 397 files, batch 16 (as the 1597 files, batch 32): each epoch reads 3 more samples
    # ahead into the next; DALI's mask counted 397, 394, 391, ... real rows. The first five epochs
    # all hold every sample.
    it = make(index_files(397), 16)
    with pytest.warns(RuntimeWarning, match="cannot count every sample exactly once"):
        seen = epochs(it, 4)
    for counted, held in seen:
        assert set(counted.values()) == {1} and set(counted) == held == set(range(397))


@pytest.mark.parametrize("n, bs, shards, stick", [(7, 2, 1, False), (11, 3, 1, False), (29, 4, 3, True)])
def test_without_padding_every_sample_an_epoch_holds_is_counted_once(index_files, n, bs, shards, stick):
    # Epochs of FILL without padding can lack a sample that the previous epoch read ahead (DALI's
    # data, unchanged); the mask counts each sample an epoch holds exactly once.
    it = make(index_files(n), bs, shards, stick=stick)
    with pytest.warns(RuntimeWarning):
        for counted, held in epochs(it, 6):
            assert set(counted.values()) == {1} and set(counted) == held


@pytest.mark.parametrize("policy", [LastBatchPolicy.FILL, LastBatchPolicy.DROP])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("n, bs, shards", [(103, 8, 3), (10, 3, 3), (17, 2, 2)])
def test_with_padding_every_epoch_counts_every_sample_once(index_files, policy, shuffle, n, bs, shards):
    it = make(index_files(n), bs, shards, policy, pad=True, shuffle=shuffle)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # exact: no warning
        seen = epochs(it, 4)
    for counted, held in seen:
        assert set(counted.values()) == {1}
        if policy is LastBatchPolicy.FILL:
            assert set(counted) == held == set(range(n))
        else:  # DROP leaves out each shard's tail; what it returns is real and distinct
            assert set(counted) == held and len(held) == shards * (n // shards // bs) * bs


def test_the_plain_epoch_loop_prints_and_warns_nothing(index_files, capfd, caplog):
    # `for b in it: ...` then `it.reset()`: DALI logs "Ignoring..." on every later epoch whose
    # length does not divide by the batch (the reset after StopIteration is legitimate).
    it = make(index_files(7), 2)
    with warnings.catch_warnings(), caplog.at_level(logging.DEBUG):
        warnings.simplefilter("error")
        lengths = []
        for _ in range(4):
            lengths.append(sum(1 for _ in it))
            it.reset()
    assert lengths == [4, 3, 4, 3]
    assert not caplog.records
    out, err = capfd.readouterr()
    assert out == "" and err == ""
