"""Tests for jaxdali.plugin.pytorch: the iterators, feed_ndarray, to_torch_type and to_torch_tensor.

Cases J1-J9 of spec/dali_jax_plugin.md §8 ("files N" = N one-byte files whose content is their
index; "counter source" = per-sample external source returning ``idx_in_epoch + offset``).
"""

import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from jaxdali import TensorCPU, TensorListCPU, TensorListGPU, fn, pipeline_def, types  # noqa: E402
from jaxdali.plugin.pytorch import (  # noqa: E402
    DALIClassificationIterator,
    DALIGenericIterator,
    DALIRaggedIterator,
    LastBatchPolicy,
    feed_ndarray,
    to_torch_type,
)
from jaxdali.plugin.pytorch.torch_utils import to_torch_tensor  # noqa: E402

FILL, DROP, PARTIAL = LastBatchPolicy.FILL, LastBatchPolicy.DROP, LastBatchPolicy.PARTIAL


@pytest.fixture
def pipes():
    """Collects the pipelines a test makes and closes them, so no producer thread outlives it."""
    made = []
    yield made
    for p in made:
        p.close()


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def files_pipe(files, shard_id=0, num_shards=1, pad=True, to_device=False):
    data, label = fn.readers.file(files=files, name="Reader", pad_last_batch=pad, shard_id=shard_id,
                                  num_shards=num_shards)
    return (data.gpu() if to_device else data), label


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def counter_pipe(offset):
    return fn.external_source(lambda info: np.array([info.idx_in_epoch + offset], np.int32), batch=False)


def values(batch, name="data"):
    """The flat sample values of each pipeline's dict."""
    return [d[name].flatten().tolist() for d in batch]


def epoch(it, name="data"):
    return [values(b, name) for b in it]


# -- J1, J2: structure, types and output_map ---------------------------------------------------------


def test_partial_reader_mode_returns_short_last_batch_as_cpu_tensors(index_files, pipes):  # J1
    pipes.append(files_pipe(index_files(7)))
    it = DALIGenericIterator(pipes, ["data", "label"], reader_name="Reader", last_batch_policy=PARTIAL)
    first = next(it)
    assert isinstance(first, list) and len(first) == 1 and list(first[0]) == ["data", "label"]
    assert first[0]["data"].dtype == torch.uint8 and first[0]["data"].shape == (2, 1)
    assert first[0]["label"].dtype == torch.int32 and first[0]["label"].shape == (2, 1)
    assert first[0]["data"].device.type == "cpu"
    assert values(first) == [[0, 1]]
    assert epoch(it) == [[[2, 3]], [[4, 5]], [[6]]]
    it.reset()
    assert epoch(it) == [[[0, 1]], [[2, 3]], [[4, 5]], [[6]]]
    assert len(it) == 4 and it._size == 7


def test_classification_iterator_names_data_and_label(index_files, pipes):  # J2
    pipes.append(files_pipe(index_files(7)))
    it = DALIClassificationIterator(pipes, reader_name="Reader", dynamic_shape=True)
    assert it.output_map == ["data", "label"]
    batch = next(it)
    assert list(batch[0]) == ["data", "label"]
    assert batch[0]["label"].flatten().tolist() == [0, 1]


def test_output_map_shorter_than_outputs_raises_index_error_in_constructor(index_files, pipes):  # J2
    pipes.append(files_pipe(index_files(7)))
    with pytest.raises(IndexError):
        DALIGenericIterator(pipes, ["data"], reader_name="Reader")


def test_output_map_longer_than_outputs_raises_key_error_in_constructor(index_files, pipes):  # J2
    pipes.append(files_pipe(index_files(7)))
    with pytest.raises(KeyError):
        DALIGenericIterator(pipes, ["data", "label", "extra"], reader_name="Reader")


def test_output_map_mismatch_without_prepared_batch_raises_at_first_next(index_files, pipes):
    pipes.append(files_pipe(index_files(7)))
    it = DALIGenericIterator(pipes, ["data"], reader_name="Reader", prepare_first_batch=False)
    with pytest.raises(IndexError):
        next(it)


def test_duplicate_output_names_are_rejected(index_files, pipes):  # E2
    pipes.append(files_pipe(index_files(7)))
    with pytest.raises(AssertionError, match="output_map names should be distinct"):
        DALIGenericIterator(pipes, ["data", "data"], reader_name="Reader")


@pytest.mark.parametrize("make", [
    lambda p, **kw: DALIGenericIterator(p, ["data", "label"], **kw),
    lambda p, **kw: DALIClassificationIterator(p, **kw),
    lambda p, **kw: DALIRaggedIterator(p, ["data", "label"], **kw),
], ids=["generic", "classification", "ragged"])
def test_string_last_batch_policy_raises_value_error(index_files, pipes, make):  # J9 / E4
    pipes.append(files_pipe(index_files(7)))
    with pytest.raises(ValueError, match="Wrong type for `last_batch_policy`"):
        make(pipes, reader_name="Reader", last_batch_policy="FILL")


# -- PARTIAL in every mode ----------------------------------------------------------------------------


@pytest.mark.parametrize("size, expected", [
    (5, [[[0, 1], [100, 101]], [[2]]]),  # the epoch ends inside pipeline 0: one dict only
    (7, [[[0, 1], [100, 101]], [[2, 3], [102]]]),
])
def test_partial_size_mode_trims_and_leaves_out_pipelines(pipes, size, expected):  # J3
    pipes.extend([counter_pipe(0), counter_pipe(100)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # W2: size without reader_name
        it = DALIGenericIterator(pipes, ["data"], size=size, last_batch_policy=PARTIAL)
    assert epoch(it) == expected


def test_fill_last_batch_false_means_partial_and_warns(pipes):  # J4
    pipes.append(counter_pipe(0))
    with pytest.warns(Warning, match="Please do not use `fill_last_batch`"):
        warnings.filterwarnings("ignore", message="Please set `reader_name`")  # W2, not under test
        it = DALIGenericIterator(pipes, ["data"], size=5, fill_last_batch=False)
    assert epoch(it) == [[[0, 1]], [[2, 3]], [[4]]]
    # Through a subclass too, the deprecation names the user's line.
    with pytest.warns(Warning, match="Please do not use `fill_last_batch`") as record:
        warnings.filterwarnings("ignore", message="Please set `reader_name`")
        DALIRaggedIterator(pipes, ["data"], size=5, fill_last_batch=True)
    assert [w.filename for w in record] == [__file__]


def test_partial_multi_shard_returns_zero_row_tensors(index_files, pipes):  # J5
    files = index_files(10)
    pipes.extend(files_pipe(files, shard_id=k, num_shards=3, batch_size=3) for k in range(3))
    it = DALIGenericIterator(pipes, ["data", "label"], reader_name="Reader", last_batch_policy=PARTIAL)
    batches = epoch(it)
    assert batches == [[[0, 1, 2], [3, 4, 5], [6, 7, 8]], [[], [], [9]]]
    it.reset()
    second = next(it)
    assert values(second) == [[3, 4, 5], [6, 7, 8], [0, 1, 2]]


def test_zero_row_tensor_keeps_dtype_and_trailing_shape(index_files, pipes):  # J5
    files = index_files(10)
    pipes.extend(files_pipe(files, shard_id=k, num_shards=3, batch_size=3) for k in range(3))
    it = DALIGenericIterator(pipes, ["data", "label"], reader_name="Reader", last_batch_policy=PARTIAL)
    next(it)
    empty = next(it)[0]
    assert empty["data"].shape == (0, 1) and empty["data"].dtype == torch.uint8
    assert empty["label"].shape == (0, 1) and empty["label"].dtype == torch.int32


@pytest.mark.parametrize("policy, expected", [
    (FILL, [[[0, 1]], [[2, 3]], [[4, 5]], [[6, 6]]]),
    (DROP, [[[0, 1]], [[2, 3]], [[4, 5]]]),
])
def test_fill_and_drop_follow_the_base_iterator(index_files, pipes, policy, expected):
    pipes.append(files_pipe(index_files(7)))
    it = DALIGenericIterator(pipes, ["data", "label"], reader_name="Reader", last_batch_policy=policy,
                             auto_reset=True)
    assert epoch(it) == expected
    assert epoch(it) == expected


@pytest.mark.parametrize("pad", [True, False])
def test_fill_completes_the_last_batch_by_padding_or_wrapping(index_files, pipes, pad):  # J10
    # The spec's case uses a COCO reader (not part of jaxdali); the file reader shows the same rule.
    pipes.append(files_pipe(index_files(10), pad=pad, batch_size=4))
    it = DALIGenericIterator(pipes, ["data", "label"], reader_name="Reader", last_batch_policy=FILL)
    ids = [i for batch in epoch(it, "label") for i in batch[0]]
    assert len(ids) == 12 and sorted(set(ids)) == list(range(10))
    tail = ids[10:]
    if pad:
        assert tail == [9, 9]  # copies of the last sample
    else:
        assert tail == [0, 1]  # the start of the next epoch, not one repeated id


# -- device outputs -----------------------------------------------------------------------------------


def test_device_outputs_become_torch_tensors_on_the_matching_device(index_files, pipes):
    pipes.append(files_pipe(index_files(7), to_device=True, device_id=0))
    it = DALIGenericIterator(pipes, ["data", "label"], reader_name="Reader", last_batch_policy=PARTIAL)
    batches = list(it)
    # On a CPU-only host JAX's device is the CPU, so the tensor is a CPU tensor.
    expected_device = "cuda" if torch.cuda.is_available() and _jax_platform() == "gpu" else "cpu"
    assert batches[0][0]["data"].device.type == expected_device
    assert [d["data"].flatten().tolist() for b in batches for d in b] == [[0, 1], [2, 3], [4, 5], [6]]


def _jax_platform():
    import jax

    return jax.devices()[0].platform


def test_ragged_batch_in_generic_iterator_raises_dense_error(pipes):  # E17
    @pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def ragged():
        return fn.external_source(lambda i: [np.arange(k + 1, dtype=np.int32) for k in range(3)])

    pipes.append(ragged())
    with pytest.raises(RuntimeError, match="IsDenseTensor"):
        DALIGenericIterator(pipes, ["data"])


def test_checkpoint_restores_the_same_sequence(index_files, pipes):
    files = index_files(7)
    pipes.append(files_pipe(files, enable_checkpointing=True))
    it = DALIGenericIterator(pipes, ["data", "label"], reader_name="Reader", last_batch_policy=PARTIAL)
    next(it)
    next(it)
    cps = it.checkpoints()
    rest = epoch(it)
    pipes.append(files_pipe(files, enable_checkpointing=True, checkpoint=cps[0]))
    restored = DALIGenericIterator(pipes[1:], ["data", "label"], reader_name="Reader", last_batch_policy=PARTIAL)
    assert epoch(restored) == rest == [[[4, 5]], [[6]]]


# -- J6: DALIRaggedIterator ---------------------------------------------------------------------------


@pipeline_def(batch_size=3, num_threads=1, device_id=None)
def ragged_pipe():
    samples = [np.arange(k + 1, dtype=np.int32) for k in range(3)]  # [0], [0, 1], [0, 1, 2]
    a = fn.external_source(lambda i: samples)
    b = fn.external_source(lambda i: np.full((3, 2), i, np.float32))
    return a, b


def test_ragged_iterator_sparse_list_gives_one_tensor_per_sample(pipes):  # J6
    pipes.append(ragged_pipe())
    it = DALIRaggedIterator(pipes, ["ragged", "dense"], size=-1,
                            output_types=[DALIRaggedIterator.SPARSE_LIST_TAG, DALIRaggedIterator.DENSE_TAG])
    out = next(it)[0]
    assert isinstance(out["ragged"], list)
    assert [t.tolist() for t in out["ragged"]] == [[0], [0, 1], [0, 1, 2]]
    assert out["dense"].shape == (3, 2) and out["dense"].dtype == torch.float32


def test_ragged_iterator_sparse_coo_gives_sample_position_indices(pipes):  # J6
    pipes.append(ragged_pipe())
    it = DALIRaggedIterator(pipes, ["ragged", "dense"],
                            output_types=[DALIRaggedIterator.SPARSE_COO_TAG, DALIRaggedIterator.DENSE_TAG])
    sparse = next(it)[0]["ragged"]
    assert sparse.is_sparse and sparse.shape == (3, 3)
    assert sparse.to_dense().tolist() == [[0, 0, 0], [0, 1, 0], [0, 1, 2]]
    assert sparse.dtype == torch.int32


def test_ragged_iterator_tags_and_defaults():  # J6
    assert (DALIRaggedIterator.DENSE_TAG, DALIRaggedIterator.SPARSE_LIST_TAG,
            DALIRaggedIterator.SPARSE_COO_TAG) == ("dense", "sparse_list", "sparse_coo")


def test_ragged_iterator_rejects_unknown_tag(pipes):  # J6
    pipes.append(ragged_pipe())
    with pytest.raises(AssertionError, match="Only DENSE_TAG, SPARSE_LIST_TAG and SPARSE_COO_TAG are allowed"):
        DALIRaggedIterator(pipes, ["ragged", "dense"], output_types=["sparse", "dense"])


def test_ragged_iterator_partial_trims_sample_lists(index_files, pipes):
    pipes.append(files_pipe(index_files(7)))
    it = DALIRaggedIterator(pipes, ["data", "label"], reader_name="Reader", last_batch_policy=PARTIAL,
                            output_types=[DALIRaggedIterator.SPARSE_LIST_TAG, DALIRaggedIterator.DENSE_TAG])
    last = list(it)[-1][0]
    assert [t.tolist() for t in last["data"]] == [[6]] and last["label"].flatten().tolist() == [6]


def test_ragged_iterator_partial_gives_empty_lists_and_sparse_tensors(index_files, pipes):  # J5 + J6
    files = index_files(10)
    pipes.extend(files_pipe(files, shard_id=k, num_shards=3, batch_size=3) for k in range(3))
    it = DALIRaggedIterator(pipes, ["data", "label"], reader_name="Reader", last_batch_policy=PARTIAL,
                            output_types=[DALIRaggedIterator.SPARSE_LIST_TAG, DALIRaggedIterator.SPARSE_COO_TAG])
    next(it)
    last = next(it)
    assert [d["data"] for d in last[:2]] == [[], []] and [t.tolist() for t in last[2]["data"]] == [[9]]
    assert last[0]["label"].shape == (0, 0) and last[0]["label"].dtype == torch.int32
    assert last[2]["label"].to_dense().tolist() == [[9]]


# -- J7, J8: feed_ndarray, to_torch_type, to_torch_tensor -----------------------------------------------

ALL_TYPES = [types.FLOAT, types.FLOAT64, types.FLOAT16, types.UINT8, types.INT8, types.BOOL, types.INT16,
             types.INT32, types.INT64]


def test_to_torch_type_maps_the_nine_dali_types():
    assert to_torch_type == {
        types.FLOAT: torch.float32, types.FLOAT64: torch.float64, types.FLOAT16: torch.float16,
        types.UINT8: torch.uint8, types.INT8: torch.int8, types.BOOL: torch.bool, types.INT16: torch.int16,
        types.INT32: torch.int32, types.INT64: torch.int64}


@pytest.mark.parametrize("dali_type", ALL_TYPES, ids=lambda t: t.name)
def test_feed_ndarray_round_trips_every_mapped_type(dali_type):  # J7
    data = (np.arange(6).reshape(3, 2) % 2).astype(types.to_numpy_type(dali_type))
    target = torch.empty((3, 2), dtype=to_torch_type[dali_type])
    assert feed_ndarray(TensorListCPU(data), target) is target
    np.testing.assert_array_equal(target.numpy(), data)


def test_feed_ndarray_accepts_a_single_tensor_and_a_sample_list():  # J7
    target = torch.zeros(2, dtype=torch.int16)
    feed_ndarray(TensorCPU(np.array([3, 4], np.int16)), target)
    assert target.tolist() == [3, 4]
    batch = torch.zeros((2, 2), dtype=torch.int16)
    feed_ndarray(TensorListCPU([np.array([1, 2], np.int16), np.array([5, 6], np.int16)]), batch)
    assert batch.tolist() == [[1, 2], [5, 6]]


def test_feed_ndarray_dtype_mismatch_raises_dalis_assertion():  # J7
    with pytest.raises(AssertionError, match="The element type of DALI Tensor/TensorList doesn't match the "
                                             "element type of the target PyTorch Tensor: torch.uint8 vs torch.float32"):
        feed_ndarray(TensorListCPU(np.zeros((2, 1), np.uint8)), torch.empty((2, 1), dtype=torch.float32))


def test_feed_ndarray_shape_mismatch_raises_dalis_assertion():  # J7
    with pytest.raises(AssertionError, match=r"Shapes do not match: DALI tensor has size \[2, 1\], but PyTorch "
                                             r"Tensor has size \[3, 1\]"):
        feed_ndarray(TensorListCPU(np.zeros((2, 1), np.uint8)), torch.empty((3, 1), dtype=torch.uint8))


def test_feed_ndarray_from_device_batch():  # J7
    import jax.numpy as jnp

    target = torch.empty((2, 3), dtype=torch.float32)
    feed_ndarray(TensorListGPU(jnp.arange(6, dtype=jnp.float32).reshape(2, 3)), target)
    assert target.tolist() == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize("dali_type", ALL_TYPES, ids=lambda t: t.name)
def test_to_torch_tensor_copy_and_view_give_equal_values(dali_type):  # J8
    data = (np.arange(12).reshape(3, 4) % 3).astype(types.to_numpy_type(dali_type))
    copied = to_torch_tensor(TensorListCPU(data), True)
    viewed = to_torch_tensor(TensorListCPU(data), False)
    assert copied.dtype == viewed.dtype == to_torch_type[dali_type]
    assert torch.equal(copied, viewed)
    np.testing.assert_array_equal(viewed.numpy(), data)


def test_to_torch_tensor_view_shares_memory_and_copy_does_not():  # J8
    data = np.arange(4, dtype=np.int32)
    viewed = to_torch_tensor(TensorCPU(data), copy=False)
    copied = to_torch_tensor(TensorCPU(data), copy=True)
    data[0] = 42
    assert viewed[0].item() == 42 and copied[0].item() == 0


def test_to_torch_tensor_from_jax_device_batch_is_zero_copy():  # J8
    import jax.numpy as jnp

    array = jnp.arange(6, dtype=jnp.float32).reshape(3, 2)
    viewed = to_torch_tensor(TensorListGPU(array), copy=False)
    assert viewed.tolist() == [[0, 1], [2, 3], [4, 5]]
    if array.devices().pop().platform == "cpu":
        assert viewed.data_ptr() == array.unsafe_buffer_pointer()
    assert torch.equal(to_torch_tensor(TensorListGPU(array), copy=True), viewed)


# -- import hygiene -----------------------------------------------------------------------------------


def _run_python(code, env):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_importing_jaxdali_and_the_jax_plugin_does_not_import_torch(subprocess_env):
    _run_python("import sys, importlib.util, jaxdali\n"
                "if importlib.util.find_spec('jaxdali.plugin.jax') is not None:\n"
                "    import jaxdali.plugin.jax\n"
                "assert 'torch' not in sys.modules, 'torch was imported'", subprocess_env)


@pytest.mark.slow
def test_importing_the_pytorch_plugin_does_not_initialise_a_jax_device(subprocess_env):
    # A platform that does not exist here: any backend initialisation during import would fail.
    _run_python("import jaxdali.plugin.pytorch, jaxdali.plugin.pytorch.experimental.proxy",
                {**subprocess_env, "JAX_PLATFORMS": "tpu"})


@pytest.mark.parametrize("name", ["DALIGenericIterator", "DALIClassificationIterator", "DALIRaggedIterator"])
def test_constructor_signatures_are_dalis(name):
    """The three constructors forward their shared arguments through one list; each keeps DALI's
    parameter names, order and defaults, so positional calls port unchanged."""
    import inspect

    dali_pytorch = pytest.importorskip("nvidia.dali.plugin.pytorch")

    def described(cls):
        parameters = inspect.signature(cls.__init__).parameters.values()
        return [(p.name, getattr(p.default, "name", p.default)) for p in parameters]

    import jaxdali.plugin.pytorch as ours

    assert described(getattr(ours, name)) == described(getattr(dali_pytorch, name))


def test_classification_iterator_forwards_every_argument_positionally(index_files, pipes):
    """Positional arguments in DALI's order reach the base iterator: size, reader_name, auto_reset,
    fill_last_batch, dynamic_shape, last_batch_padded, last_batch_policy, prepare_first_batch."""
    pipes.append(files_pipe(index_files(5)))
    it = DALIClassificationIterator(pipes[0], -1, "Reader", True, None, False, False, DROP, False)
    assert it._auto_reset is True and it._counters.policy is DROP
    assert not it._ever_scheduled  # prepare_first_batch=False: nothing fetched yet
    assert len(it) == 2  # DROP: 5 samples in batches of 2
    assert [len(b[0]["data"]) for b in it] == [2, 2]
    assert [len(b[0]["data"]) for b in it] == [2, 2]  # auto_reset started the next epoch
