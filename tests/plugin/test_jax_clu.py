"""Peekable iterator (spec §6, cases I1–I7)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

pytest.importorskip("clu")
from clu.data.dataset_iterator import ArraySpec, PeekableDatasetIterator  # noqa: E402

from jaxdali import fn, pipeline_def  # noqa: E402
from jaxdali.plugin.jax import DALIGenericIterator, data_iterator  # noqa: E402
from jaxdali.plugin.jax.clu import DALIGenericPeekableIterator, peekable_data_iterator  # noqa: E402


@pipeline_def(num_threads=1, device_id=None, prefetch_queue_depth=1)
def files_pipe(files, pad=False, shard_id=0, num_shards=1):
    data, label = fn.readers.file(files=files, pad_last_batch=pad, shard_id=shard_id, num_shards=num_shards,
                                  name="Reader")
    return data, label


def flat(batch, key="data"):
    return np.asarray(batch[key]).ravel().tolist()


def test_i1_element_spec_and_peek_then_next(index_files):
    it = DALIGenericPeekableIterator(files_pipe(index_files(16), batch_size=3), ["data"], reader_name="Reader")
    assert isinstance(it, PeekableDatasetIterator)
    assert it.element_spec == {"data": ArraySpec(dtype=np.dtype(np.uint8), shape=(3, 1))}
    for _ in range(5):
        peeked = it.peek()
        np.testing.assert_array_equal(peeked["data"], next(it)["data"])


def test_i3_peek_next_sequence_with_mask(index_files):
    it = DALIGenericPeekableIterator(files_pipe(index_files(7), batch_size=2), ["data"], reader_name="Reader")
    assert flat(it.peek()) == [0, 1]
    assert flat(it.peek()) == [0, 1]
    assert flat(next(it)) == [0, 1]
    assert flat(next(it)) == [2, 3]
    assert flat(it.peek_async().result()) == [4, 5]
    assert flat(next(it)) == [4, 5]
    assert flat(next(it)) == [6, 0]
    with pytest.warns(RuntimeWarning, match="cannot count every sample exactly once"):  # FILL without padding
        assert it.is_nonpadding.tolist() == [True, False]
    with pytest.raises(StopIteration):
        it.peek()
    it.reset()
    assert flat(next(it)) == [1, 2]
    assert it.is_nonpadding.tolist() == [True, True]
    it.close()


@pytest.mark.filterwarnings("ignore:Please set `reader_name`")
def test_i4_shape_change_is_an_error():
    shapes = iter([(1, 5), (1, 3)] * 10)

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def p():
        return fn.external_source(source=lambda: [np.zeros(next(shapes), np.float32)])

    it = DALIGenericPeekableIterator(p(), ["x"], size=100)
    next(it)
    with pytest.raises(ValueError, match="The shape or type of the output changed between iterations. This is not "
                                         "supported by JAX  peekable iterator."):
        next(it)


def test_i5_checkpoints_refused_while_peeked(index_files):
    it = DALIGenericPeekableIterator(files_pipe(index_files(7), batch_size=2, enable_checkpointing=True), ["data"],
                                     reader_name="Reader")
    it.peek()
    with pytest.raises(RuntimeError, match="Checkpointing is not supported for peekable iterators with peeked data"):
        it.checkpoints()
    next(it)
    assert len(it.checkpoints()) == 1
    fresh = DALIGenericPeekableIterator(files_pipe(index_files(7), batch_size=2, enable_checkpointing=True), ["data"],
                                        reader_name="Reader")
    _ = fresh.element_spec
    with pytest.raises(RuntimeError, match="peeked data"):
        fresh.checkpoints()


def test_i6_padding_masks_two_shards(index_files):
    files = index_files(7)
    pipes = [files_pipe(files, batch_size=2, pad=True, shard_id=k, num_shards=2) for k in range(2)]
    it = DALIGenericPeekableIterator(pipes, ["data"], reader_name="Reader")
    next(it)
    batch = next(it)
    assert np.asarray(batch["data"]).reshape(2, 2).tolist() == [[2, 2], [5, 6]]
    assert it.is_nonpadding.tolist() == [True, False, True, True]


def test_i7_g6_same_arguments_and_decorators():
    sig = lambda f: list(inspect.signature(f).parameters)  # noqa: E731
    assert sig(DALIGenericIterator.__init__) == ["self", "pipelines", "output_map", "size", "reader_name",
                                                 "auto_reset", "last_batch_padded", "last_batch_policy",
                                                 "prepare_first_batch", "sharding", "pmap_compatible"]
    assert sig(DALIGenericPeekableIterator.__init__) == sig(DALIGenericIterator.__init__)
    assert sig(peekable_data_iterator) == sig(data_iterator)


def test_peekable_decorator_builds_peekable_iterators(index_files):
    files = index_files(6)

    @peekable_data_iterator(output_map=["data"], reader_name="Reader")
    def loader(files):
        return fn.readers.file(files=files, name="Reader")[0]

    it = loader(files=files, batch_size=3, device_id=None)
    assert isinstance(it, DALIGenericPeekableIterator)
    assert flat(it.peek()) == flat(next(it)) == [0, 1, 2]


def test_variable_shapes_from_a_per_sample_array_source_are_refused_on_the_second_batch():
    # DALI's own test: num_outputs=1 with one (1, k) array per sample, k changing per sample.
    def numpy_tensors(info):
        return np.full((1, (5, 3, 2, 4)[info.idx_in_epoch % 4]), info.idx_in_epoch, np.int32)

    @pipeline_def(batch_size=1, num_threads=1, device_id=0)
    def variable():
        return fn.external_source(source=numpy_tensors, num_outputs=1, batch=False)[0].gpu()

    it = DALIGenericPeekableIterator([variable()], ["data"], size=100)
    assert it.next()["data"].shape == (1, 5)
    with pytest.raises(ValueError, match="The shape or type of the output changed between iterations"):
        it.next()
    it.close()
