"""Exact resume from checkpoints: pipelines and JAX iterators (spec §5, cases H1–H9; issue 5)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

pytest.importorskip("jax")

from jaxdali import Pipeline, fn, pipeline_def  # noqa: E402
from jaxdali.ops import sampling  # noqa: E402
from jaxdali.core.checkpoint import CheckpointError  # noqa: E402
from jaxdali.plugin.jax import DALIGenericIterator, LastBatchPolicy, data_iterator  # noqa: E402


@pipeline_def(num_threads=2, device_id=None, seed=5)
def reader_pipe(files, shard_id=0, num_shards=1, pad=False, shuffle=False, stick=False):
    data, label = fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards, pad_last_batch=pad,
                                  random_shuffle=shuffle, stick_to_shard=stick, name="Reader")
    return data, fn.random.coin_flip(probability=0.5), fn.random.uniform(range=[0, 1])


def build(files, depth, policy, pad, shuffle, checkpoints=None, num_shards=3):
    pipes = [reader_pipe(files, shard_id=k, num_shards=num_shards, pad=pad, shuffle=shuffle, batch_size=2,
                         prefetch_queue_depth=depth, enable_checkpointing=True,
                         checkpoint=checkpoints[k] if checkpoints else None)
             for k in range(num_shards)]
    return DALIGenericIterator(pipes, ["data", "coin", "u"], reader_name="Reader", last_batch_policy=policy)


def observe(it, steps: int) -> list:
    """`steps` calls to next(); StopIteration is recorded as None and followed by reset()."""
    out = []
    for _ in range(steps):
        try:
            batch = next(it)
        except StopIteration:
            out.append(None)
            it.reset()
            continue
        out.append(tuple(np.asarray(batch[k]).ravel().tolist() for k in ("data", "coin", "u")))
    return out


@pytest.mark.parametrize("policy", [LastBatchPolicy.FILL, LastBatchPolicy.DROP])
@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("depth", [1, 4])
def test_h3_restore_continues_identically(index_files, policy, pad, shuffle, depth):
    files = index_files(10)
    for warmup in (0, 1, 2, 3, 5):
        original = build(files, depth, policy, pad, shuffle)
        observe(original, warmup)
        cps = original.checkpoints()
        assert len(cps) == 3 and all(isinstance(c, bytes) for c in cps)
        expected = observe(original, 12)
        restored = build(files, depth, policy, pad, shuffle, checkpoints=cps)
        assert observe(restored, 12) == expected, (warmup, policy, pad, shuffle, depth)
        assert None in expected  # the window crosses at least one epoch end


def test_h2_iterator_data_is_json_with_dali_keys(index_files):
    it = build(index_files(10), 2, LastBatchPolicy.FILL, False, False)
    doc = json.loads(it.checkpoints()[0])
    assert doc["iterator"] == {"_counter": 0, "_counter_per_gpu": [0, 0, 0], "_shard_sizes_per_gpu": [3, 3, 4],
                               "_shards_id": [0, 1, 2], "_size": 4}
    next(it), next(it)
    assert json.loads(it.checkpoints()[0])["iterator"]["_counter"] == 4
    assert max(len(c) for c in it.checkpoints()) < 4096


def test_h1_checkpointing_disabled_and_mixed(index_files):
    files = index_files(10)
    it = DALIGenericIterator(reader_pipe(files, batch_size=2), ["data"], reader_name="Reader")
    with pytest.raises(ValueError, match="Cannot access checkpoints with checkpointing disabled"):
        it.checkpoints()
    pipes = [reader_pipe(files, batch_size=2, enable_checkpointing=flag) for flag in (True, False)]
    with pytest.raises(ValueError, match="All wrapped pipelines must have the same value for `enable_checkpointing`."):
        DALIGenericIterator(pipes, ["data"], reader_name="Reader")
    with pytest.raises(RuntimeError, match="enable_checkpointing=True"):
        reader_pipe(files, batch_size=2).checkpoint()


def _single(files, cp=None):
    pipe = reader_pipe(files, batch_size=5, enable_checkpointing=True, checkpoint=cp, prefetch_queue_depth=2)
    return DALIGenericIterator(pipe, ["data"], reader_name="Reader")


def test_h4_checkpoint_at_epoch_end_before_and_after_reset(index_files):
    files = index_files(10)
    it = _single(files)
    assert [np.asarray(b["data"]).ravel().tolist() for b in it] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    before_reset = it.checkpoints()
    with pytest.raises(StopIteration):
        next(_single(files, before_reset[0]))
    it.reset()
    after_reset = it.checkpoints()
    assert np.asarray(next(_single(files, after_reset[0]))["data"]).ravel().tolist() == [0, 1, 2, 3, 4]


def test_h7_restore_from_a_restored_iterator(index_files):
    files = index_files(10)
    first = build(files, 2, LastBatchPolicy.FILL, False, True)
    observe(first, 3)
    second = build(files, 2, LastBatchPolicy.FILL, False, True, checkpoints=first.checkpoints())
    expected = observe(first, 9)
    observe(second, 2)
    third = build(files, 2, LastBatchPolicy.FILL, False, True, checkpoints=second.checkpoints())
    assert observe(third, 7) == expected[2:]


def test_h8_partly_restored_warns(index_files):
    files = index_files(10)
    it = build(files, 2, LastBatchPolicy.FILL, True, False, num_shards=2)
    next(it)
    cps = it.checkpoints()
    pipes = [reader_pipe(files, shard_id=0, num_shards=2, pad=True, batch_size=2, enable_checkpointing=True,
                         checkpoint=cps[0]),
             reader_pipe(files, shard_id=1, num_shards=2, pad=True, batch_size=2, enable_checkpointing=True)]
    with pytest.warns(RuntimeWarning, match="Some, but not all of the pipelines used were restored from checkpoint"):
        DALIGenericIterator(pipes, ["data"], reader_name="Reader")


@pytest.mark.parametrize("kind", ["index", "batch_info", "sample_info"])
@pytest.mark.parametrize("warmup", [0, 4, 11])
def test_h9_external_source_callables_resume(kind, warmup):
    def by_index(i):
        if i >= 4:
            raise StopIteration
        return [np.array([i * 10 + j], np.int32) for j in range(3)]

    def by_batch_info(info):
        if info.iteration >= 4:
            raise StopIteration
        return [np.array([info.epoch_idx * 100 + info.iteration * 10 + j], np.int32) for j in range(3)]

    def by_sample_info(info):
        if info.iteration >= 4:
            raise StopIteration
        return np.array([info.epoch_idx * 100 + info.idx_in_epoch], np.int32)

    source, extra = {"index": (by_index, {}), "batch_info": (by_batch_info, {"batch_info": True}),
                     "sample_info": (by_sample_info, {"batch": False})}[kind]

    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1, enable_checkpointing=True)
    def p():
        return fn.external_source(source=source, **extra), fn.random.normal()

    def run(it, steps):
        out = []
        for _ in range(steps):
            try:
                b = next(it)
                out.append((np.asarray(b["x"]).ravel().tolist(), np.asarray(b["n"]).tolist()))
            except StopIteration:
                out.append(None)
        return out

    original = DALIGenericIterator(p(), ["x", "n"], auto_reset=True)
    run(original, warmup)
    cps = original.checkpoints()
    expected = run(original, 10)
    restored = DALIGenericIterator(p(checkpoint=cps[0]), ["x", "n"], auto_reset=True)
    assert run(restored, 10) == expected


@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
def test_parallel_external_source_resumes():
    """A SampleInfo source run by worker processes (parallel=True) resumes like a serial one."""
    def source(info):
        if info.iteration >= 5:
            raise StopIteration
        return np.array([info.epoch_idx * 1000 + info.idx_in_epoch], np.int32)

    @pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=1, enable_checkpointing=True, py_num_workers=2)
    def p():
        return fn.external_source(source=source, parallel=True, batch=False), fn.random.normal()

    def run(pipe, steps):
        out = []
        for _ in range(steps):
            try:
                out.append(_values(pipe.run()))
            except StopIteration:
                out.append(None)
                pipe.reset()
        return out

    original = p()
    run(original, 3)
    restored = p(checkpoint=original.checkpoint())
    try:
        expected = run(original, 8)
        assert None in expected and run(restored, 8) == expected
    finally:
        original.close()
        restored.close()


def test_iterable_external_source_warns_that_it_restarts():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_checkpointing=True)
    def p():
        return fn.external_source(source=[[np.zeros(1, np.int32)] * 2] * 3)

    pipe = p()
    pipe.run()
    cp = pipe.checkpoint()
    with pytest.warns(RuntimeWarning, match="restarts from its beginning"):
        p(checkpoint=cp).build()


def test_h6_decorator_checkpoints_argument(index_files):
    files = index_files(40)

    @data_iterator(output_map=["data"], reader_name="Reader")
    def loader(files):
        data, _ = fn.readers.file(files=files, random_shuffle=True, name="Reader")
        return data

    it = loader(files=files, batch_size=8, enable_checkpointing=True, device_id=None, seed=3)
    for _ in range(3):
        next(it)
    cps = it.checkpoints()
    rest = [np.asarray(b["data"]).ravel().tolist() for b in it]
    again = loader(files=files, batch_size=8, enable_checkpointing=True, device_id=None, seed=3, checkpoints=cps)
    assert [np.asarray(b["data"]).ravel().tolist() for b in again] == rest


# -- pipeline-level checkpoints, validation and safety -------------------------------------------------

@pipeline_def(batch_size=4, num_threads=2, device_id=None, enable_checkpointing=True)
def aug_pipe(files, shuffle=True):
    data, label = fn.readers.file(files=files, random_shuffle=shuffle, name="Reader")
    return data, label, fn.random.uniform(shape=[2])


def _values(out):
    return [o.as_array().tolist() if o.is_dense_tensor() else [s.tolist() for s in o.samples()] for o in out]


def test_pipeline_checkpoint_restores_exact_continuation_and_file(index_files, tmp_path):
    files = index_files(10)
    pipe = aug_pipe(files, seed=None, prefetch_queue_depth=3)  # a random seed is saved in the checkpoint
    for _ in range(4):
        pipe.run()
    path = tmp_path / "cp.json"
    cp = pipe.checkpoint(str(path))
    assert path.read_bytes() == cp
    expected = [_values(pipe.run()) for _ in range(6)]
    restored = aug_pipe(files, checkpoint=cp)
    assert restored.is_restored_from_checkpoint
    assert not aug_pipe(files).is_restored_from_checkpoint
    assert [_values(restored.run()) for _ in range(6)] == expected


def test_restore_into_a_different_pipeline_names_the_difference(index_files):
    files = index_files(10)
    cp = aug_pipe(files, seed=1).checkpoint()
    with pytest.raises(CheckpointError, match=r"taken with .*batch_size=4.* this reader has .*batch_size=5.*"
                                              r"needs pad_last_batch=True and a global sample order"):
        aug_pipe(files, seed=1, batch_size=5, checkpoint=cp).build()

    @pipeline_def(num_threads=1, device_id=None, enable_checkpointing=True)
    def no_reader():
        return fn.random.coin_flip()

    with pytest.raises(CheckpointError, match=r"batch size: in checkpoint 4, in pipeline 5"):
        no_reader(batch_size=5, checkpoint=no_reader(batch_size=4).checkpoint()).build()
    with pytest.raises(CheckpointError, match=r"operator 'Reader' \(fn.readers.file\): argument 'random_shuffle' differs"):
        aug_pipe(files, shuffle=False, seed=1, checkpoint=cp).build()

    @pipeline_def(batch_size=4, num_threads=1, device_id=None, enable_checkpointing=True)
    def other():
        return fn.random.coin_flip()

    with pytest.raises(CheckpointError, match="is in the checkpoint but not in the pipeline"):
        other(checkpoint=cp).build()


@pytest.mark.parametrize("mangle,match", [
    (lambda b: b[: len(b) // 2], "not a valid JSON string"),
    (lambda b: b"\xff\xfe" + b, "not UTF-8"),
    (lambda b: b'{"hello": 1}', "not a jaxdali pipeline checkpoint"),
    (lambda b: b.replace(b'"version":2', b'"version":99'), "format version 99 is not supported"),
    (lambda b: b"\x80\x04\x95pickle", "not"),
])
def test_corrupted_checkpoints_are_rejected_clearly(index_files, mangle, match):
    files = index_files(10)
    cp = aug_pipe(files, seed=1).checkpoint()
    with pytest.raises(CheckpointError, match=match):
        aug_pipe(files, seed=1, checkpoint=mangle(cp)).build()


def test_restore_far_into_an_epoch_replays_nothing(tmp_path):
    """O(1) restore: a checkpoint a million batches on (4,000 epochs) gives, at once, the batch that
    the reader's layout puts at that position (a replay would not finish within the test's time)."""
    files = [str(tmp_path / f"{i}.bin") for i in range(1000)]
    for i, f in enumerate(files):
        open(f, "wb").write(bytes([i % 256]))
    pipe = aug_pipe(files, seed=2)
    cp = json.loads(pipe.checkpoint())
    cp["pipeline"]["runner"]["ops"]["Reader"]["position"] = 4_000_000
    cp["pipeline"]["runner"]["iteration"] = 1_000_000
    restored = aug_pipe(files, checkpoint=json.dumps(cp).encode())
    data, labels, _ = restored.run()
    expected = sampling.stream_indices(sampling.ShardSpec(**cp["pipeline"]["runner"]["ops"]["Reader"]["layout"]),
                                       4_000_000, 4)
    assert labels.as_array().ravel().tolist() == expected.tolist()
    assert [s.tolist() for s in data.samples()] == [[i % 256] for i in expected]
    again = json.loads(restored.checkpoint())["pipeline"]["runner"]
    assert again["ops"]["Reader"]["position"] == 4_000_004 and again["iteration"] == 1_000_001


def test_pipeline_constructor_takes_a_checkpoint():
    def make(checkpoint=None):
        pipe = Pipeline(batch_size=3, num_threads=1, device_id=None, seed=4, enable_checkpointing=True,
                        checkpoint=checkpoint)
        with pipe:
            pipe.set_outputs(fn.random.uniform(range=[0, 1]), fn.random.coin_flip())
        return pipe

    original = make()
    original.run(), original.run()
    checkpoint = original.checkpoint()
    expected = [_values(original.run()) for _ in range(3)]
    restored = make(checkpoint)
    assert restored.is_restored_from_checkpoint
    assert [_values(restored.run()) for _ in range(3)] == expected


def test_restored_at_epoch_end_with_auto_reset_first_raises_then_continues(index_files):
    files = index_files(10)
    it = _single(files)
    list(it)
    cp = it.checkpoints()
    restored = DALIGenericIterator(reader_pipe(files, batch_size=5, enable_checkpointing=True, checkpoint=cp[0]),
                                   ["data"], reader_name="Reader", auto_reset=True)
    with pytest.raises(StopIteration):
        next(restored)
    assert np.asarray(next(restored)["data"]).ravel().tolist() == [0, 1, 2, 3, 4]
