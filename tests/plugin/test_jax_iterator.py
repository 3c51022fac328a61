"""JAX DALIGenericIterator and data_iterator on 8 simulated CPU devices (spec §3, §4, §7, cases A, F, G)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from jaxdali import fn, pipeline_def, types  # noqa: E402
from jaxdali.plugin.jax import DALIGenericIterator, LastBatchPolicy, data_iterator  # noqa: E402

NDEV = len(jax.devices())
needs8 = pytest.mark.skipif(NDEV < 8, reason="needs XLA_FLAGS=--xla_force_host_platform_device_count=8")


@pipeline_def(num_threads=1, prefetch_queue_depth=1)
def files_pipe(files, shard_id=0, num_shards=1, pad=False, stick=False):
    data, label = fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards, pad_last_batch=pad,
                                  stick_to_shard=stick, name="Reader")
    return data, label


def values(batch, key="data"):
    return np.asarray(batch[key]).reshape(-1).tolist()


# -- construction and basic iteration (A) ------------------------------------------------------------------

def test_a1_shapes_types_and_placement(index_files):
    it = DALIGenericIterator(files_pipe(index_files(7), batch_size=2, device_id=None), ["data", "label"],
                             reader_name="Reader")
    assert (len(it), it.size, it.batch_size) == (4, 8, 2)
    batch = next(it)
    assert list(batch) == ["data", "label"]
    assert batch["data"].shape == (2, 1) and batch["data"].dtype == jnp.uint8
    assert batch["label"].shape == (2, 1) and batch["label"].dtype == jnp.int32
    assert batch["data"].devices() == {jax.devices("cpu")[0]}


def test_a2_a3_a4_output_map_lengths(index_files):
    files = index_files(7)
    it = DALIGenericIterator(files_pipe(files, batch_size=2, device_id=None), ["data"], reader_name="Reader")
    assert list(next(it)) == ["data"]
    with pytest.raises(IndexError):
        DALIGenericIterator(files_pipe(files, batch_size=2, device_id=None), ["a", "b", "c"], reader_name="Reader")
    it = DALIGenericIterator(files_pipe(files, batch_size=2, device_id=None), [], reader_name="Reader")
    assert next(it) == {}


def test_a6_64bit_outputs_are_narrowed_without_x64():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        src = fn.external_source(source=lambda: (np.zeros((2, 1), np.int64), np.zeros((2, 1), np.float64),
                                                 np.zeros((2, 1), np.float16), np.zeros((2, 1), bool)),
                                 num_outputs=4)
        return tuple(src)

    batch = next(DALIGenericIterator(p(), ["i", "f", "h", "b"]))
    assert [str(batch[k].dtype) for k in "ifhb"] == ["int32", "float32", "float16", "bool"]


def test_a7_a8_prepare_first_batch_controls_eager_fetch():
    def make():
        calls = []

        def source(info):
            calls.append(info.iteration)
            return np.array([info.idx_in_epoch], np.int32)

        @pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
        def p():
            return fn.external_source(source=source, batch=False)

        return p(), calls

    pipe, calls = make()
    it = DALIGenericIterator(pipe, ["x"], prepare_first_batch=False)
    assert calls == [] and it._counter == 0
    assert values(next(it), "x") == [0, 1]
    pipe, calls = make()
    with pytest.warns(Warning, match="Please set `reader_name`") as record:
        it = DALIGenericIterator(pipe, ["x"], prepare_first_batch=True, size=10)
    assert record[0].filename == __file__
    pipe._prefetcher.wait_idle()
    assert len(calls) == 4 and it._counter == 2  # the first batch and the one scheduled after it
    assert values(next(it), "x") == [0, 1]


def test_iterating_epochs_with_for_loops_reset_automatically(index_files):
    it = DALIGenericIterator(files_pipe(index_files(7), batch_size=2, device_id=None, pad=True), ["data"],
                             reader_name="Reader")
    for _ in range(3):
        assert [values(b) for b in it] == [[0, 1], [2, 3], [4, 5], [6, 6]]


# -- errors (E1–E14, E16, E17, E25–E31; E15, E21: test_jax_checkpoint.py, E22, E23: test_jax_clu.py) ---------

def test_constructor_errors(index_files):
    files = index_files(7)
    mk = lambda **kw: files_pipe(files, batch_size=2, device_id=None, **kw)  # noqa: E731
    with pytest.raises(AssertionError, match="Number of provided pipelines has to be at least 1"):
        DALIGenericIterator(None, ["data"])
    with pytest.raises(AssertionError, match="output_map names should be distinct"):
        DALIGenericIterator(mk(), ["a", "a"])
    with pytest.raises(AssertionError, match="JAX iterator does not support partial last batch policy."):
        DALIGenericIterator(mk(), ["data"], last_batch_policy=LastBatchPolicy.PARTIAL)
    with pytest.raises(ValueError, match="Wrong type for `last_batch_policy`"):
        DALIGenericIterator(mk(), ["data"], last_batch_policy="FILL")
    with pytest.raises(AssertionError, match="`sharding` should be an instance of `jax.sharding.Sharding`"):
        DALIGenericIterator(mk(), ["data"], sharding="batch")
    with pytest.raises(ValueError, match="Unsupported value for `auto_reset`"):
        DALIGenericIterator(mk(), ["data"], auto_reset=1)


@pytest.mark.filterwarnings("ignore:Please set `reader_name`")
def test_errors_of_real_pipelines_keep_dali_types_and_texts(index_files):
    """E6, E8-E14 and E16 with real pipelines (the same checks run over fake pipelines in
    test_base_iterator.py): the exception type and text are DALI's."""
    files = index_files(8)

    def mk(bs=2, files=files, **kw):
        return files_pipe(files, batch_size=bs, device_id=None, **kw)

    def it(pipes, **kw):
        return lambda: DALIGenericIterator(pipes, ["data"], **kw)

    cases = [
        (it([mk(), mk(3)], reader_name="Reader"), AssertionError,
         "All pipelines should have the same batch size set"),  # E6
        (it(mk(), size=0), AssertionError, "Size cannot be 0"),  # E8
        (it([mk(), mk()]), AssertionError, "Negative size is supported only for a single pipeline"),  # E9
        (it(mk(), reader_name="Reader", size=8), AssertionError,
         "When reader_name is provided, size should not be set"),  # E10
        (it(mk(), reader_name="Reader", last_batch_padded=True), AssertionError,
         "When reader_name is provided, last_batch_padded should not be set"),  # E11
        (it(mk(), reader_name="Nope"), RuntimeError,
         'Assert on "meta" failed: Operator Nope  not found or does not expose valid metadata.'),  # E12
        (it([mk(), mk(files=files[:7])], reader_name="Reader"), AssertionError,
         "Reader Operator should have the same size value in all the pipelines."),  # E13
        (it([mk(shard_id=0, num_shards=2), mk(shard_id=1, num_shards=4)], reader_name="Reader"), AssertionError,
         "Reader Operator should have the same `num_shards` argument set in all the pipelines."),
        (it([mk(shard_id=0, num_shards=2, pad=True), mk(shard_id=1, num_shards=2)], reader_name="Reader"),
         AssertionError, "Reader Operator should have the same `pad_last_batch` argument set in all the pipelines."),
        (it([mk(shard_id=0, num_shards=2, stick=True), mk(shard_id=1, num_shards=2)], reader_name="Reader"),
         AssertionError, "Reader Operator should have the same `stick_to_shard` argument set in all the pipelines."),
        (it(mk(9), reader_name="Reader", last_batch_policy=LastBatchPolicy.DROP), RuntimeError,  # E14
         "It seems that there is no data in the pipeline. This may happen if `last_batch_policy` is set to PARTIAL "
         "and the requested batch size is greater than the shard size."),
    ]
    for make, error, message in cases:
        with pytest.raises(error) as info:
            make()
        assert message in str(info.value)

    @pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def variable():
        sizes = iter([3, 1] * 5)
        return fn.external_source(source=lambda: [np.zeros(1, np.uint8)] * next(sizes))

    unbounded = DALIGenericIterator(variable(), ["x"])  # C7: size -1 lets variable batches through
    assert next(unbounded)["x"].shape == (3, 1) and next(unbounded)["x"].shape == (1, 1)
    with pytest.raises(AssertionError, match="Variable batch size is not supported by the iterator when reader_name "
                                             "is provided or iterator size is set explicitly"):  # E16
        sized = DALIGenericIterator(variable(), ["x"], size=6)
        next(sized)  # the batch of 3 prepared by the constructor
        next(sized)


def test_ragged_output_names_the_dense_requirement():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        return fn.external_source(source=lambda: [np.zeros(3, np.uint8), np.zeros(4, np.uint8)])

    with pytest.raises(RuntimeError, match="IsDenseTensor"):
        DALIGenericIterator(p(), ["x"])


def test_decorator_errors(index_files):
    files = index_files(8)
    with pytest.raises(ValueError, match="Only one of `sharding` and `devices` arguments can be provided."):
        data_iterator(output_map=["data"], sharding=object(), devices=jax.devices())
    with pytest.raises(TypeError, match="unexpected keyword argument 'batch_size'"):
        data_iterator(output_map=["data"], batch_size=2)

    def no_shard_params(files):
        return fn.readers.file(files=files, name="Reader")[0]

    it_fn = data_iterator(no_shard_params, output_map=["data"], devices=jax.devices())
    with pytest.raises(AssertionError, match="double-check the `shard_id` argument"):
        it_fn(files=files, batch_size=len(jax.devices()))
    sharded = data_iterator(files_pipe._graph_function, output_map=["data"], reader_name="Reader",
                            devices=jax.devices())
    with pytest.raises(KeyError, match="batch_size"):
        sharded(files=files)
    for name in ("device_id", "shard_id", "num_shards", "checkpoint"):  # E30
        with pytest.raises(TypeError, match=f"files_pipe\\(\\) got multiple values for keyword argument '{name}'"):
            sharded(files=files, batch_size=NDEV, **{name: 0})
    with pytest.raises(ValueError, match="not a valid JSON string"):  # (E27 itself: see test_jax_elastic.py)
        sharded(files=files, batch_size=NDEV, checkpoints=[b"x"])
    single = data_iterator(files_pipe._graph_function, output_map=["data"], reader_name="Reader")
    with pytest.raises(TypeError, match="got multiple values for keyword argument 'checkpoint'"):
        single(files=files, batch_size=2, checkpoint=b"")


def test_g6_decorator_arguments_mirror_the_iterator():
    deco = [p for p in inspect.signature(data_iterator).parameters if p not in ("pipeline_fn", "devices")]
    it = [p for p in inspect.signature(DALIGenericIterator.__init__).parameters if p not in ("self", "pipelines")]
    assert deco == it


def test_decorator_documents_every_argument_with_the_iterators_words():
    deco_doc, it_doc = inspect.getdoc(data_iterator), inspect.getdoc(DALIGenericIterator)
    it_args = it_doc.split("Args:\n", 1)[1].split("\n\n", 1)[0]
    assert it_args.split("output_map:", 1)[1] in deco_doc  # the forwarded arguments, word for word
    for name in inspect.signature(data_iterator).parameters:
        assert f"  {name}: " in deco_doc.split("Args:\n", 1)[1], name


def test_g1_g2_g7_functional_form_defaults_and_name(index_files):
    files = index_files(9)

    def my_loader(files):
        data, label = fn.readers.file(files=files, name="Reader")
        return label

    it = data_iterator(my_loader, output_map=["label"], reader_name="Reader")(files=files, batch_size=3)
    assert isinstance(it, DALIGenericIterator)
    assert it._pipes[0].num_threads == 4 and it._pipes[0].device_id == 0
    assert [values(b, "label") for b in it] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert data_iterator(my_loader, output_map=["label"]).__name__ == "my_loader"


def test_g3_function_parameters_are_forwarded(index_files):
    it = data_iterator(files_pipe._graph_function, output_map=["data"], reader_name="Reader")(
        files=index_files(47), num_shards=2, batch_size=3, device_id=None)
    assert it.size == 24 and values(next(it)) == [0, 1, 2]


@needs8
def test_decorator_mode_2_builds_one_pipeline_per_device(index_files):
    """device_id = local index, shard_id = position in jax.devices() (not in the mesh), num_shards =
    device count, batch = global // devices, num_threads 4 by default. The mesh lists the devices in
    reverse, so the global rows hold the shards in reverse."""
    files = index_files(47)
    sharding = NamedSharding(Mesh(jax.devices()[::-1], ("batch",)), P("batch"))
    loader = data_iterator(files_pipe._graph_function, output_map=["data"], reader_name="Reader", sharding=sharding)
    it = loader(files=files, batch_size=16)
    assert [p.device_id for p in it._pipes] == list(range(8))
    assert [p.reader_meta("Reader")["shard_id"] for p in it._pipes] == list(range(8))
    assert {p.reader_meta("Reader")["number_of_shards"] for p in it._pipes} == {8}
    assert {(p.max_batch_size, p.num_threads) for p in it._pipes} == {(2, 4)}
    starts = [47 * k // 8 for k in range(8)]
    assert values(next(it)) == [starts[k] + i for k in reversed(range(8)) for i in range(2)]
    with pytest.raises(ValueError, match="global batch_size=12 must be a positive multiple of the 8 devices"):
        loader(files=files, batch_size=12)


# -- assembly (F) ------------------------------------------------------------------------------------------

def test_f1_two_cpu_pipelines_stack(index_files):
    files = index_files(7)
    pipes = [files_pipe(files, batch_size=2, device_id=None, shard_id=k, num_shards=2) for k in range(2)]
    # pmap_compatible=False does not remove the device axis of several pipelines (as in DALI)
    batch = next(DALIGenericIterator(pipes, ["data"], reader_name="Reader", pmap_compatible=False))
    assert batch["data"].shape == (2, 2, 1)
    assert np.asarray(batch["data"]).reshape(2, 2).tolist() == [[0, 1], [3, 4]]


def test_f2_f3_single_pipeline_sharding_and_pmap_compatible(index_files):
    files = index_files(7)
    sharding = NamedSharding(Mesh(jax.devices()[:1], ("batch",)), P("batch"))
    batch = next(DALIGenericIterator(files_pipe(files, batch_size=2, device_id=None), ["data"], reader_name="Reader",
                                     sharding=sharding))
    assert batch["data"].shape == (2, 1) and batch["data"].sharding == sharding
    # any jax.sharding.Sharding, not only NamedSharding
    single = jax.sharding.SingleDeviceSharding(jax.devices()[-1])
    batch = next(DALIGenericIterator(files_pipe(files, batch_size=2, device_id=len(jax.devices()) - 1), ["data"],
                                     reader_name="Reader", sharding=single))
    assert batch["data"].sharding == single and values(batch) == [0, 1]
    batch = next(DALIGenericIterator(files_pipe(files, batch_size=2, device_id=None), ["data"], reader_name="Reader",
                                     pmap_compatible=True))
    assert batch["data"].shape == (1, 2, 1)


@needs8
def test_f6_decorator_sharding_rows_follow_devices(index_files):
    files = index_files(47)
    mesh = Mesh(jax.devices(), ("batch",))
    sharding = NamedSharding(mesh, P("batch"))

    @data_iterator(output_map=["data"], reader_name="Reader", sharding=sharding, last_batch_policy=LastBatchPolicy.DROP)
    def loader(files, shard_id, num_shards):
        return fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards, name="Reader")[0]

    it = loader(files=files, batch_size=16)
    assert it.size == 47 // 8 and len(it) == 2
    batches = list(it)
    assert len(batches) == 2
    starts = [int(np.floor(k * 47 / 8)) for k in range(8)]
    for b, batch in enumerate(batches):
        arr = batch["data"]
        assert arr.shape == (16, 1) and arr.sharding == sharding
        expected = [starts[k] + 2 * b + i for k in range(8) for i in range(2)]
        assert np.asarray(arr).ravel().tolist() == expected
        for shard in arr.addressable_shards:
            k = jax.devices().index(shard.device)
            assert np.asarray(shard.data).ravel().tolist() == expected[2 * k: 2 * k + 2]


@needs8
def test_f7_decorator_devices_gives_pmap_stacks(index_files):
    files = index_files(47)

    @data_iterator(output_map=["data"], reader_name="Reader", devices=jax.devices(),
                   last_batch_policy=LastBatchPolicy.DROP)
    def loader(files, shard_id, num_shards):
        return fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards, name="Reader")[0]

    batch = next(loader(files=files, batch_size=16))
    arr = batch["data"]
    assert arr.shape == (8, 2, 1)
    starts = [int(np.floor(k * 47 / 8)) for k in range(8)]
    assert np.asarray(arr)[:, :, 0].tolist() == [[s, s + 1] for s in starts]
    assert [s.device for s in sorted(arr.addressable_shards, key=lambda s: s.index[0].start)] == jax.devices()
    out = jax.pmap(lambda x: x.sum())(arr)
    assert np.asarray(out).tolist() == [2 * s + 1 for s in starts]


@needs8
def test_f8_device_id_places_outputs(index_files):
    it = data_iterator(files_pipe._graph_function, output_map=["data"])(files=index_files(4), batch_size=2,
                                                                        device_id=3)
    assert next(it)["data"].devices() == {jax.local_devices()[3]}


def _gray_jpegs(folder, n):
    """n real 8x12 JPEG files, file i a uniform gray of value 10 * i (decodes exactly)."""
    import cv2

    folder.mkdir()
    paths = [str(folder / f"{i:02d}.jpg") for i in range(n)]
    for i, path in enumerate(paths):
        assert cv2.imwrite(path, np.full((8, 12, 3), 10 * i, np.uint8))
    return paths


@needs8
@pytest.mark.parametrize("mode", ["stacked", "sharded"])
def test_device_id_places_device_and_cpu_outputs_on_that_device(tmp_path, mode):
    """Pipeline k reads shard k of 8 on local device 7 - k. Its device outputs (a "mixed" decoder,
    ``.gpu()``, a ``device="gpu"`` operator) are made on that device and its CPU output is placed there.
    Stacked: element k lives on device 7 - k. Sharded over ``Mesh(jax.devices())``: the row block at
    mesh position p is the batch of the pipeline on device p, i.e. shard 7 - p (spec §3)."""
    from jaxdali.tensors import TensorListCPU, TensorListGPU

    files = _gray_jpegs(tmp_path / "jpegs", 16)

    @pipeline_def(batch_size=2, num_threads=1)
    def p(shard_id):
        jpegs, labels = fn.readers.file(files=files, shard_id=shard_id, num_shards=8, name="Reader")
        images = fn.decoders.image(jpegs, device="mixed")
        return images, labels.gpu(), fn.cast(labels, dtype=types.FLOAT, device="gpu"), labels

    outs = p(3, device_id=5).run()
    assert [type(o) for o in outs] == [TensorListGPU] * 3 + [TensorListCPU]
    assert all(o.jax_array().devices() == {jax.local_devices()[5]} for o in outs[:3])

    names = ["images", "labels_gpu", "cast", "labels"]
    sharding = NamedSharding(Mesh(jax.devices(), ("batch",)), P("batch")) if mode == "sharded" else None
    it = DALIGenericIterator([p(k, device_id=7 - k) for k in range(8)], names, reader_name="Reader",
                             sharding=sharding)
    batch = next(it)
    for name in names:
        arr = batch[name]
        assert arr.shape[:2] == ((8, 2) if mode == "stacked" else (16, 8 if name == "images" else 1)), name
        for shard in arr.addressable_shards:
            if mode == "stacked":
                k = shard.index[0].start
                assert shard.device == jax.local_devices()[7 - k], name
            else:
                position = shard.index[0].start // 2
                assert shard.device == jax.devices()[position], name
                k = 7 - position
            data = np.asarray(shard.data).reshape(2, -1)[:, 0]
            assert data.tolist() == ([20 * k, 20 * k + 10] if name == "images" else [2 * k, 2 * k + 1]), name


@needs8
@pytest.mark.filterwarnings("ignore:Please set `reader_name`")
def test_partly_shared_devices_and_different_shapes_are_rejected():
    @pipeline_def(batch_size=2, num_threads=1)
    def p(n):
        return fn.external_source(source=lambda: np.zeros((2, n), np.float32))

    pipes = [p(1, device_id=0), p(1, device_id=0), p(1, device_id=1)]
    with pytest.raises(AssertionError, match="placed on different devices or all on the same device"):
        DALIGenericIterator(pipes, ["x"], size=60)
    with pytest.raises(AssertionError, match="Shards shapes have to be the same."):
        DALIGenericIterator([p(1, device_id=0), p(2, device_id=1)], ["x"], size=40)


@needs8
@pytest.mark.filterwarnings("ignore:Please set `reader_name`")
def test_per_output_shardings_split_channels_and_replicate_rows():
    """images sharded over (batch, model) on the channel axis, labels over batch only (DALI #5535)."""
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("batch", "model"))
    shardings = {"images": NamedSharding(mesh, P("batch", None, "model")), "labels": NamedSharding(mesh, P("batch"))}

    @data_iterator(output_map=["images", "labels"], sharding=shardings, size=160)
    def loader(shard_id, num_shards):
        def sample(info):
            k = shard_id * 1000 + info.idx_in_epoch
            return np.arange(4, dtype=np.float32).reshape(1, 4) + k, np.array([k], np.int32)

        return tuple(fn.external_source(source=sample, batch=False, num_outputs=2))

    it = loader(batch_size=16, prefetch_queue_depth=1)
    batch = next(it)
    images, labels = batch["images"], batch["labels"]
    assert images.shape == (16, 1, 4) and labels.shape == (16, 1)
    expected_labels = [k * 1000 + i for k in range(8) for i in range(2)]
    assert np.asarray(labels).ravel().tolist() == expected_labels
    np.testing.assert_array_equal(np.asarray(images)[:, 0, :],
                                  np.array(expected_labels, np.float32)[:, None] + np.arange(4))
    for shard in images.addressable_shards:
        assert shard.data.shape == (4, 1, 2)  # 2 pipelines' rows, half of the channels
    total = jax.jit(lambda x: jnp.sum(x))(images)
    assert float(total) == float(np.asarray(images).sum())


# -- padding mask and exact-once evaluation ----------------------------------------------------------

@needs8
def test_evaluation_counts_every_sample_exactly_once_with_padding(index_files):
    """8 devices, 50 samples, FILL + pad_last_batch: static shapes, each sample counted once."""
    files = index_files(50)
    mesh = Mesh(jax.devices(), ("batch",))
    sharding = NamedSharding(mesh, P("batch"))

    @data_iterator(output_map=["data", "label"], reader_name="Reader", sharding=sharding)
    def loader(files, shard_id, num_shards):
        return tuple(fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards, pad_last_batch=True,
                                     name="Reader"))

    @jax.jit
    def eval_step(labels, mask):
        hist = jnp.zeros(50, jnp.int32).at[labels[:, 0]].add(mask.astype(jnp.int32))
        return hist

    it = loader(files=files, batch_size=24)
    for epoch in range(2):
        counts = np.zeros(50, np.int64)
        steps = 0
        for batch in it:
            mask = it.is_nonpadding
            assert isinstance(mask, jax.Array) and mask.shape == (24,)
            assert mask.sharding.shard_shape(mask.shape) == (3,)
            counts += np.asarray(eval_step(batch["label"], mask))
            steps += 1
        assert steps == len(it) == 3  # ceil(ceil(50/8)=7 / 3)
        assert counts.tolist() == [1] * 50, epoch


@needs8
@pytest.mark.parametrize("batch_axes", ["data", ("data", "model")])
def test_is_nonpadding_lives_on_the_outputs_mesh_sharded_like_their_batch_axis(index_files, batch_axes):
    """A shard_map written for the data's batch axis takes the mask unchanged: same mesh, same spec."""
    files = index_files(30)
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))
    sharding = NamedSharding(mesh, P(batch_axes))

    @data_iterator(output_map=["label"], reader_name="Reader", sharding=sharding)
    def loader(files, shard_id, num_shards):
        return fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards, pad_last_batch=True,
                               name="Reader")[1]

    @jax.jit
    def real_rows(labels, mask):
        per_shard = jax.shard_map(lambda lab, m: jnp.sum(m.astype(jnp.int32) * (lab[:, 0] >= 0))[None], mesh=mesh,
                              in_specs=(P(batch_axes), P(batch_axes)), out_specs=P(batch_axes))
        return jnp.sum(per_shard(labels, mask))

    it = loader(files=files, batch_size=16)
    counted = 0
    for batch in it:
        mask = it.is_nonpadding
        assert mask.sharding == NamedSharding(mesh, P(batch_axes))
        assert mask.sharding.mesh is batch["label"].sharding.mesh
        for shard in mask.addressable_shards:  # rows where the outputs have them
            assert shard.index[0] == batch["label"].sharding.devices_indices_map(batch["label"].shape)[shard.device][0]
        counted += int(real_rows(batch["label"], mask))
    assert counted == 30  # 4 shards of the row axis (data) or 8: each real sample once


def test_is_nonpadding_without_sharding_is_numpy(index_files):
    it = DALIGenericIterator(files_pipe(index_files(7), batch_size=2, device_id=None, pad=True), ["data"],
                             reader_name="Reader")
    masks = []
    for _ in it:
        masks.append(it.is_nonpadding.tolist())
    assert masks == [[True, True], [True, True], [True, True], [True, False]]


@needs8
@pytest.mark.filterwarnings("ignore:Please set `reader_name`")
@pytest.mark.parametrize("mode", ["pmap", "sharding"])
def test_f4_f5_hand_built_pipelines_on_two_devices(mode):
    """Pipeline d emits samples filled with idx_in_epoch + 4d, three outputs x, x+.25, x+.5; size 40."""

    @pipeline_def(batch_size=4, num_threads=1)
    def p(d):
        x = fn.external_source(source=lambda info: np.full((1, 5), info.idx_in_epoch + 4 * d, np.float32),
                               batch=False)
        return x, x + 0.25, x + 0.5

    pipes = [p(d, device_id=d) for d in range(2)]
    kwargs = {"sharding": NamedSharding(Mesh(jax.devices()[:2], ("batch",)), P("batch"))} if mode == "sharding" else {}
    it = DALIGenericIterator(pipes, ["x", "y", "z"], size=40, **kwargs)
    steps = 0
    for b, batch in enumerate(it):
        for name, offset in (("x", 0.0), ("y", 0.25), ("z", 0.5)):
            arr = batch[name]
            expected = np.concatenate([np.arange(4 * b, 4 * b + 4) + 4 * d for d in range(2)]) + offset
            if mode == "pmap":
                assert arr.shape == (2, 4, 1, 5)
                assert [s.device for s in sorted(arr.addressable_shards, key=lambda s: s.index[0].start)] == \
                    jax.devices()[:2]
            else:
                assert arr.shape == (8, 1, 5)
            np.testing.assert_array_equal(np.asarray(arr).reshape(8, 5)[:, 0], expected)
        steps += 1
    assert steps == 5


@pytest.mark.slow
def test_importing_jaxdali_does_not_import_jax(subprocess_env):
    code = ("import sys, jaxdali, jaxdali.plugin.jax\n"
            "assert 'jax' not in sys.modules, 'jax imported'\n"
            "assert not [m for m in sys.modules if m.split('.')[0] in ('torch', 'jax_plugins', 'jax_cuda12_plugin', "
            "'nvidia', 'scipy')], 'torch, a JAX GPU plugin, an NVIDIA library or SciPy imported'\n"
            "assert 'libcuda' not in open('/proc/self/maps').read(), 'CUDA driver loaded'\n"
            "from jaxdali import fn, pipeline_def\n"
            "@pipeline_def(batch_size=2, num_threads=1, device_id=None)\n"
            "def p():\n    return fn.random.uniform()\n"
            "p().run()\n"
            "assert 'jax' not in sys.modules, 'a CPU-only pipeline imported jax'\n")
    subprocess.run([sys.executable, "-c", code], check=True, env=subprocess_env)


# -- device-output mode (DESIGN "uint8 leaves the host") ------------------------------------------------------

FLOWERS = __import__("pathlib").Path(__file__).resolve().parents[3] / "shared" / "data" / "flowers"
needs_flowers = pytest.mark.skipif(not FLOWERS.is_dir(), reason=f"shared photos not found at {FLOWERS}")


@pipeline_def(batch_size=8, num_threads=2, seed=3)
def rn50_pipe(train=True):
    jpegs, labels = fn.readers.file(file_root=str(FLOWERS), random_shuffle=True, name="Reader")
    if train == "crop_decoded":  # ragged decoder output read by a cropping normaliser
        images = fn.crop_mirror_normalize(fn.decoders.image(jpegs), crop=(96, 96), dtype=types.FLOAT,
                                          output_layout="CHW", mean=[124, 116, 104], std=[58, 57, 57], name="cmn")
        return images, labels
    if train:
        images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB)
        images = fn.resize(images, resize_x=64, resize_y=64)
        images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=[124, 116, 104],
                                          std=[58, 57, 57], mirror=fn.random.coin_flip(), name="cmn")
    else:
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        images = fn.resize(images, resize_shorter=72)
        images = fn.crop_mirror_normalize(images, crop=(64, 64), dtype=types.FLOAT, output_layout="CHW",
                                          mean=[124, 116, 104], std=[58, 57, 57], name="cmn")
    return images, labels


@needs_flowers
@pytest.mark.usefixtures("device_stage_on_cpu")
def test_cpu_only_pipeline_with_a_one_device_sharding_normalises_on_that_device(monkeypatch):
    """DALIGenericIterator over a device_id=None pipeline whose outputs all go to one device works
    like data_iterator (device-output mode on that device): same values as run() on the host."""
    from jaxdali.ops.color import CropMirrorNormalize

    host = rn50_pipe(train=True, device_id=None)
    expected = [host.run() for _ in range(2)]
    host.close()

    def host_run(self, *args):
        raise AssertionError("crop_mirror_normalize ran on the host in device-output mode")

    monkeypatch.setattr(CropMirrorNormalize, "run", host_run)
    device = jax.devices()[-1]
    sharding = NamedSharding(Mesh([device], ("batch",)), P("batch"))
    it = DALIGenericIterator(rn50_pipe(train=True, device_id=None), ["images", "labels"], reader_name="Reader",
                             sharding=sharding)
    assert it._pipes[0]._runner.offloaded_ops == ["cmn"]
    for images, labels in expected:
        batch = next(it)
        assert batch["images"].sharding == sharding and batch["images"].devices() == {device}
        np.testing.assert_array_equal(np.asarray(batch["images"]), images.as_array())
        np.testing.assert_array_equal(np.asarray(batch["labels"]), labels.as_array())


@needs_flowers
@pytest.mark.usefixtures("device_stage_on_cpu")
@pytest.mark.parametrize("train", [True, False, "crop_decoded"], ids=["train", "val_windowed_resize", "ragged_crop"])
def test_iterator_moves_normalisation_to_the_device_with_identical_values(train, monkeypatch):
    """The iterator puts its pipeline in device-output mode: crop_mirror_normalize (whose result only
    feeds an output) runs in the fused device stage, on uint8 (val: the resize computes only the crop
    windows; ragged_crop: the windows are cut out of the ragged decoder output on the host), outputs
    are device arrays, and the values equal those of run() on the host."""
    from jaxdali.ops.color import CropMirrorNormalize

    host = rn50_pipe(train=train, device_id=0)
    expected = [host.run() for _ in range(3)]

    def host_run(self, *args):
        raise AssertionError("crop_mirror_normalize ran on the host in device-output mode")

    monkeypatch.setattr(CropMirrorNormalize, "run", host_run)
    it = DALIGenericIterator(rn50_pipe(train=train, device_id=0), ["images", "labels"], reader_name="Reader")
    runner = it._pipes[0]._runner
    assert runner.offloaded_ops == ["cmn"]
    for images, labels in expected:
        batch = next(it)
        assert isinstance(batch["images"], jax.Array)
        np.testing.assert_array_equal(np.asarray(batch["images"]), images.as_array())
        np.testing.assert_array_equal(np.asarray(batch["labels"]), labels.as_array())
    stats = it._pipes[0].executor_statistics()
    assert stats["(device stage)"] > 0 and "(executor)" in stats
    host.close()


@needs_flowers
@pytest.mark.parametrize("train", [True, False], ids=["train", "val_windowed_resize"])
def test_on_cpu_devices_normalisation_stays_on_the_host_with_the_same_values(train):
    """On a CPU device (host memory) crop_mirror_normalize is computed by the compiled host kernel, not by
    the device stage (without the kernel, by the device stage as for a GPU), and the iterator's arrays
    hold run()'s values, on the device."""
    from jaxdali.ops.image_kernels import normalize_kernel_status

    host = rn50_pipe(train=train, device_id=0)
    expected = [host.run() for _ in range(3)]
    host.close()
    it = DALIGenericIterator(rn50_pipe(train=train, device_id=0), ["images", "labels"], reader_name="Reader")
    compiled = normalize_kernel_status()[0] == "compiled kernel"
    assert it._pipes[0]._runner.offloaded_ops == ([] if compiled else ["cmn"])
    for images, labels in expected:
        batch = next(it)
        assert isinstance(batch["images"], jax.Array) and batch["images"].devices() == {jax.devices()[0]}
        np.testing.assert_array_equal(np.asarray(batch["images"]), images.as_array())
        np.testing.assert_array_equal(np.asarray(batch["labels"]), labels.as_array())
    it.close()


@pytest.mark.parametrize("ndev", [1, 2])
def test_host_normalised_batches_kept_or_donated_are_never_overwritten(ndev):
    """On CPU devices the normalised batches are pooled host buffers that the arrays alias: a batch the
    consumer keeps, and the result of a jitted step that was donated a batch, keep their values while
    later batches are computed into recycled buffers (1.5 MiB each: large enough to be pooled)."""
    from jaxdali.ops.image_kernels import normalize_kernel_status

    side, bs = 128, 8

    @pipeline_def(batch_size=bs, num_threads=2, prefetch_queue_depth=2)
    def frames(shard_id=0):
        def batch(i):  # sample k of iteration i: every pixel (i * bs + k + 50 * shard) % 251
            values = (i * bs + np.arange(bs) + 50 * shard_id) % 251
            return np.broadcast_to(values[:, None, None, None], (bs, side, side, 3)).astype(np.uint8)

        images = fn.external_source(source=batch, batch=True, layout="HWC")
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=[0.0], std=[1.0],
                                        mirror=fn.random.coin_flip())

    devices = jax.devices()[:ndev]
    pipes = [frames(shard_id=s, device_id=d.id, seed=s) for s, d in enumerate(devices)]
    sharding = NamedSharding(Mesh(devices, ("batch",)), P("batch"))
    with pytest.warns(Warning, match="reader_name"):
        it = DALIGenericIterator(pipes, ["images"], size=10 ** 6, sharding=sharding)
    if normalize_kernel_status()[0] == "compiled kernel":  # else the device stage computes them, as for a GPU
        assert all(p._runner.offloaded_ops == [] for p in pipes)
    step = jax.jit(lambda x: x + 1.0, donate_argnums=0)
    kept, stepped = [], []
    for i in range(12):
        images = next(it)["images"]
        want = np.concatenate([np.broadcast_to(((i * bs + np.arange(bs) + 50 * s) % 251)[:, None, None, None],
                                               (bs, 3, side, side)) for s in range(ndev)]).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(images), want)
        if i % 2:
            stepped.append((step(images), want + 1.0))
        else:
            kept.append((images, want))
    for array, want in kept + stepped:
        np.testing.assert_array_equal(np.asarray(array), want)
    it.close()


def test_device_output_mode_keeps_argument_producers_and_shared_values_on_the_host():
    """Only operators whose results feed outputs (or other moved operators) as data move: a random
    argument stays a host operator, and an operator whose result a host operator also reads stays."""

    @pipeline_def(batch_size=4, num_threads=1, device_id=0, seed=5)
    def p():
        x = fn.external_source(source=lambda: [np.full((6, 8, 3), i, np.uint8) for i in range(4)], layout="HWC")
        flipped = fn.flip(x, horizontal=fn.random.coin_flip(), name="flip")
        shared = fn.cast(x, dtype=types.FLOAT, name="shared")
        return fn.transpose(flipped, perm=[2, 0, 1], name="transpose"), shared, fn.resize(shared, size=[3, 4])

    pipe = p()
    pipe.build()
    pipe.set_output_device(jax.devices()[0])
    assert sorted(pipe._runner.offloaded_ops) == ["flip", "transpose"]
    out = pipe.run()
    assert all(type(o).__name__ == "TensorListGPU" for o in out)
    reference = p()
    for got, want in zip(out, reference.run()):
        np.testing.assert_array_equal(got.as_cpu().as_array(), want.as_array())


def test_run_driven_pipelines_keep_host_outputs_and_operators():
    pipe = files_pipe(["/dev/null"], batch_size=1, device_id=0)
    pipe.build()
    assert pipe._runner.offloaded_ops == []
    assert type(pipe.run()[1]).__name__ == "TensorListCPU"


def test_stats_report_waits_and_the_bottleneck(index_files):
    it = DALIGenericIterator(files_pipe(index_files(16), batch_size=2, device_id=0), ["data", "label"],
                             reader_name="Reader")
    for _ in range(5):
        next(it)
    stats = it.stats()
    assert stats["batches"] == 5 and stats["next_s"] > 0
    assert set(stats) >= {"consumer_wait_s", "mean_queue_occupancy", "producer_idle_s", "bottleneck"}
    assert stats["bottleneck"] in ("loader", "consumer")
    queue = it._pipes[0].queue_statistics()
    assert queue["batches"] >= 5 and queue["consumer_requests"] >= 5 and queue["queue_depth"] == 1
