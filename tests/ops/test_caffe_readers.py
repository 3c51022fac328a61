"""fn.readers.caffe2 / fn.readers.caffe: LMDB records parsed as DALI 2.4 does (checked against DALI on the
CPU), sharding and resume through the shared reader machinery, bad records named, and DALI's JAX/Flax MNIST
pipelines on an LMDB of real digits with only the import changed."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

lmdb = pytest.importorskip("lmdb")

import jaxdali  # noqa: E402
from jaxdali import fn, types  # noqa: E402
from jaxdali.ops.readers.caffe import encode_datum, encode_tensor, encode_tensor_protos  # noqa: E402
from jaxdali.ops.readers import protowire  # noqa: E402
from jaxdali.ops.readers.protowire import ProtoError  # noqa: E402

#: Operators these tests check against real DALI (collected by tests/test_operator_coverage.py).
COVERED_OPERATORS = ("readers.caffe", "readers.caffe2")

FLOAT, INT32, BYTE, STRING, INT64 = 1, 2, 3, 4, 10


def write_lmdb(path, values, key=lambda i: f"{i:08d}".encode()) -> str:
    env = lmdb.open(str(path), map_size=1 << 28)
    with env.begin(write=True) as txn:
        for i, v in enumerate(values):
            txn.put(key(i), v)
    env.close()
    return str(path)


def caffe2_records(n, label_type, raw=False):
    """n records: image (encoded-like bytes or a raw HWC image), label of ``label_type``, two additional
    tensors (float, int64) and an int32 bbox."""
    out = []
    for i in range(n):
        if raw:
            image = encode_tensor(BYTE, dims=[2, 3, 2], byte_data=bytes(range(i, i + 12)))
        else:
            image = encode_tensor(STRING, strings=[bytes([i % 256]) * (3 + i)])
        label = {0: [encode_tensor(INT32, ints=[i - 3])],
                 1: [encode_tensor(INT32, ints=[1, i % 4])],
                 2: [encode_tensor(FLOAT, floats=[i, 0.5, -1.25])],
                 3: [encode_tensor(INT32, ints=[0, 2]), encode_tensor(FLOAT, floats=[0.5, i])],
                 4: []}[label_type]
        extra = [encode_tensor(FLOAT, floats=[1.5, -i]), encode_tensor(INT64, int64s=[-5, 1 << 40, i])]
        bbox = encode_tensor(INT32, ints=[1, 2, 30, 40 + i])
        out.append(encode_tensor_protos([image, *label, *extra, bbox]))
    return out


def _run(lib_fn, pipeline_def, batches, batch_size=3, **reader_args):
    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, seed=3)
    def p():
        reader = getattr(lib_fn.readers, reader_args.pop("_reader", "caffe2"))
        out = reader(name="Reader", **reader_args)
        return tuple(out) if isinstance(out, (list, tuple)) else out

    pipe = p()
    pipe.build()
    return pipe, [pipe.run() for _ in range(batches)]


def _assert_same(dali_batches, our_batches):
    for d_batch, o_batch in zip(dali_batches, our_batches, strict=True):
        assert len(d_batch) == len(o_batch)
        for d, o in zip(d_batch, o_batch):
            assert d.dtype == o.dtype
            for i in range(len(d)):
                np.testing.assert_array_equal(o.at(i), d.at(i), strict=True)
                assert o[i].source_info() == d[i].source_info()


# -- protobuf wire format -----------------------------------------------------------------------------------

def _parse(*records):
    return protowire.parse_batch(*protowire.join_records(list(records)))


def test_protowire_matches_google_protobuf():
    struct_pb2 = pytest.importorskip("google.protobuf.struct_pb2")  # any compiled message with repeated fields
    msgs = [struct_pb2.ListValue(values=[struct_pb2.Value(number_value=x) for x in xs]).SerializeToString()
            for xs in ([1.5, -2.0], [], [7.25])]
    outer = _parse(*msgs)
    msg, start, length = outer.repeated_bytes(1)
    assert msg.tolist() == [0, 0, 2]
    inner = protowire.parse_batch(outer.buf, start, start + length)
    values, of = inner.fixed(2, np.float64)
    assert values.tolist() == [1.5, -2.0, 7.25] and of.tolist() == [0, 1, 2]
    ints = [-1, 0, 300, -(2 ** 31), 2 ** 31 - 1]
    t = _parse(encode_tensor(INT32, dims=[5], ints=ints), encode_tensor(INT32, ints=[]),
               encode_tensor(INT32, ints=[5]) + protowire.encode_field(4, 9))  # packed, then one unpacked value
    values, of = t.varints(4)
    assert values.astype(np.int64).astype(np.int32).tolist() == ints + [5, 9] and of.tolist() == [0] * 5 + [2, 2]
    assert t.last_varint(2).tolist() == [INT32] * 3 and t.has(1).tolist() == [True, False, False]


@pytest.mark.parametrize("bad, record", [(b"\x0a\x05ab", 1), (b"\x08", 1), (b"\x0b\x00", 1), (b"\x08\x80", 1)])
def test_protowire_names_the_bad_message(bad, record):
    with pytest.raises(ProtoError) as e:
        _parse(b"\x08\x01", bad)
    assert e.value.message == record


# -- against DALI --------------------------------------------------------------------------------------------

dali = pytest.importorskip("nvidia.dali")
dali_fn = pytest.importorskip("nvidia.dali.fn")


@pytest.mark.parametrize("label_type", [0, 2, 4])
@pytest.mark.parametrize("raw", [False, True])
def test_caffe2_outputs_match_dali(tmp_path, label_type, raw):
    path = write_lmdb(tmp_path / "db", caffe2_records(7, label_type, raw))
    args = dict(path=path, label_type=label_type, additional_inputs=2, bbox=True)
    _, expected = _run(dali_fn, dali.pipeline_def, 4, **args)
    pipe, got = _run(fn, jaxdali.pipeline_def, 4, **args)
    _assert_same(expected, got)
    assert pipe.reader_meta("Reader")["epoch_size"] == 7
    if raw:
        assert got[0][0].layout() == "HWC" and got[0][0].at(0).shape == (2, 3, 2)


def test_caffe2_without_image_and_several_databases_match_dali(tmp_path):
    labels = [encode_tensor_protos([encode_tensor(INT32, ints=[i])]) for i in range(7)]
    a = write_lmdb(tmp_path / "a", labels[:4])
    b = write_lmdb(tmp_path / "b", labels[4:])
    args = dict(path=[a, b], label_type=0, image_available=False, num_shards=3, shard_id=1, pad_last_batch=True)
    dali_pipe, expected = _run(dali_fn, dali.pipeline_def, 5, batch_size=2, **args)
    pipe, got = _run(fn, jaxdali.pipeline_def, 5, batch_size=2, **args)
    assert [len(b) for b in got[0]] == [2]  # label only
    _assert_same(expected, got)
    assert pipe.reader_meta("Reader") == dali_pipe.reader_meta("Reader")


def test_caffe_outputs_match_dali_encoded_and_raw(tmp_path):
    encoded = write_lmdb(tmp_path / "enc", [encode_datum(bytes([i]) * (4 + i), label=i - 2) for i in range(5)])
    raw = write_lmdb(tmp_path / "raw", [encode_datum(bytes(range(i, i + 12)), label=i, encoded=False, shape=(2, 2, 3))
                                        for i in range(5)])
    for args in (dict(path=encoded), dict(path=raw), dict(path=encoded, label_available=False)):
        _, expected = _run(dali_fn, dali.pipeline_def, 3, batch_size=4, _reader="caffe", **args)
        _, got = _run(fn, jaxdali.pipeline_def, 3, batch_size=4, _reader="caffe", **args)
        _assert_same(expected, got)


# -- beyond DALI: sparse labels (DALI 2.4 fails at run time), errors, resume ----------------------------------

def test_sparse_label_types_give_dense_vectors(tmp_path):
    sparse = write_lmdb(tmp_path / "s", caffe2_records(3, 1))
    _, [(images, labels, *_rest)] = _run(fn, jaxdali.pipeline_def, 1, path=sparse, label_type=1, num_labels=5,
                                         additional_inputs=2)
    assert labels.as_array().tolist() == [[1, 1, 0, 0, 0], [0, 1, 0, 0, 0], [0, 1, 1, 0, 0]]
    assert labels.dtype == types.INT32
    weighted = write_lmdb(tmp_path / "w", caffe2_records(3, 3))
    _, [(images, labels, extra_f, extra_i, bbox)] = _run(fn, jaxdali.pipeline_def, 1, path=weighted, label_type=3,
                                                         num_labels=3, additional_inputs=2, bbox=True)
    assert labels.as_array().tolist() == [[0.5, 0, 0], [0.5, 0, 1], [0.5, 0, 2]]
    assert labels.dtype == types.FLOAT and extra_f.at(2).tolist() == [1.5, -2]
    assert bbox.at(1).tolist() == [1, 2, 30, 41]


def test_sparse_label_outside_num_labels_is_named(tmp_path):
    path = write_lmdb(tmp_path / "s", caffe2_records(4, 1))
    with pytest.raises(ValueError, match=r"readers.caffe2: record 3 .* at key 00000003.*index 3 is outside"):
        _run(fn, jaxdali.pipeline_def, 1, batch_size=4, path=path, label_type=1, num_labels=3, additional_inputs=2)


def test_bad_records_and_paths_are_named(tmp_path):
    good = encode_tensor_protos([encode_tensor(STRING, strings=[b"img"]), encode_tensor(INT32, ints=[1])])
    path = write_lmdb(tmp_path / "db", [good, good[:-3], good])
    with pytest.raises(ValueError, match=r"record 1 \(.*db at key 00000001\).*announced"):
        _run(fn, jaxdali.pipeline_def, 1, path=path)
    broken_label = encode_tensor_protos([encode_tensor(STRING, strings=[b"img"]), b"\x10"])  # varint cut short
    path = write_lmdb(tmp_path / "inner", [good, good, broken_label, good])
    with pytest.raises(ValueError, match=r"record 2 \(.*inner at key 00000002\).*truncated varint"):
        _run(fn, jaxdali.pipeline_def, 1, batch_size=4, path=path)
    path = write_lmdb(tmp_path / "two", [good, good])
    with pytest.raises(ValueError, match="holds 2 tensors.*need 3"):
        _run(fn, jaxdali.pipeline_def, 1, path=path, bbox=True)
    with pytest.raises(ValueError, match="label tensor has data type STRING"):
        _run(fn, jaxdali.pipeline_def, 1, path=path, image_available=False, label_type=0)
    with pytest.raises(FileNotFoundError, match="readers.caffe2: LMDB path .*nowhere"):
        _run(fn, jaxdali.pipeline_def, 1, path=str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="readers.caffe: argument 'path': 'gs://bucket/db' is a URL.*local path"):
        _run(fn, jaxdali.pipeline_def, 1, _reader="caffe", path="gs://bucket/db")
    with pytest.raises(ValueError, match="the Datum has no label"):
        _run(fn, jaxdali.pipeline_def, 1, _reader="caffe", path=write_lmdb(tmp_path / "c", [encode_datum(b"x")]))


@pytest.mark.slow
def test_a_key_deleted_after_build_is_named(tmp_path):
    path = write_lmdb(tmp_path / "db", caffe2_records(6, 0))
    pipe, _ = _run(fn, jaxdali.pipeline_def, 1, path=path)
    # lmdb opens an environment once per process: another process deletes the key.
    script = ("import lmdb, sys\nenv = lmdb.open(sys.argv[1])\nwith env.begin(write=True) as txn:\n"
              "    txn.delete(b'00000004')\nenv.close()\n")
    subprocess.run([sys.executable, "-c", script, path], check=True, timeout=60)
    with pytest.raises(KeyError, match=r"readers.caffe2: key b'00000004' of .*db' disappeared"):
        for _ in range(6):  # past the batches prefetched before the deletion
            pipe.run()


def test_shuffled_reader_resumes_mid_epoch_exactly(tmp_path):
    path = write_lmdb(tmp_path / "db", caffe2_records(11, 0))

    def pipe(checkpoint=None):
        @jaxdali.pipeline_def(batch_size=3, num_threads=1, device_id=None, seed=5, enable_checkpointing=True,
                              checkpoint=checkpoint)
        def p():
            images, labels = fn.readers.caffe2(path=path, random_shuffle=True, num_shards=2, shard_id=1)
            return labels

        return p()

    original = pipe()
    for _ in range(3):
        original.run()
    checkpoint = original.checkpoint()
    assert json.loads(checkpoint)  # plain JSON
    expected = [original.run()[0].as_array().ravel().tolist() for _ in range(6)]
    restored = pipe(checkpoint)
    assert [restored.run()[0].as_array().ravel().tolist() for _ in range(6)] == expected
    # Positions 9..26: the end of reader epoch 1 (5 samples of one shard), then epoch 2 (the 6 of the
    # other shard) and epoch 3: each epoch visits its whole shard once, and the two shards partition the set.
    stream = sum(expected, [])
    assert sorted(stream[2:8] + stream[8:13]) == list(range(-3, 8))


def test_a_checkpoint_of_rewritten_databases_is_refused(tmp_path):
    from jaxdali.core.checkpoint import CheckpointError

    paths = [str(tmp_path / "a"), str(tmp_path / "b")]

    def write(split: int) -> None:  # 7 records, the first `split` in database a
        records = caffe2_records(7, 0)
        for path, part in zip(paths, (records[:split], records[split:])):
            shutil.rmtree(path, ignore_errors=True)
            write_lmdb(path, part)

    def pipe(checkpoint=None):
        @jaxdali.pipeline_def(batch_size=3, num_threads=1, device_id=None, enable_checkpointing=True,
                              checkpoint=checkpoint)
        def p():
            return fn.readers.caffe2(path=paths)[1]

        return p()

    write(4)
    original = pipe()
    original.run()
    checkpoint = original.checkpoint()
    del original
    write(3)
    with pytest.raises(CheckpointError, match=r"listing.*LMDB.*changed"):
        pipe(checkpoint).build()


# -- DALI's JAX/Flax MNIST example pipelines ------------------------------------------------------------------

@pytest.fixture(scope="module")
def digits_lmdb(tmp_path_factory):
    """1000 real handwritten digits (scikit-learn), upscaled to 28x28 PNGs in Caffe2 TensorProtos."""
    datasets = pytest.importorskip("sklearn.datasets")
    Image = pytest.importorskip("PIL.Image")
    digits = datasets.load_digits()
    records = []
    for image, label in zip(digits.images[:1000], digits.target[:1000]):
        pixels = Image.fromarray((image * (255 / 16)).astype(np.uint8)).resize((28, 28), Image.BILINEAR)
        png = io.BytesIO()
        pixels.save(png, format="PNG")
        records.append(encode_tensor_protos([encode_tensor(STRING, strings=[png.getvalue()]),
                                             encode_tensor(INT32, ints=[int(label)])]))
    return write_lmdb(tmp_path_factory.mktemp("mnist") / "training", records), digits.target[:1000]


def _mnist_pipelines(pipeline_def, fn, types, decoder_device):
    """The two pipelines of DALI's JAX and Flax MNIST examples (decoder device aside: DALI here has no GPU)."""

    @pipeline_def(device_id=0, batch_size=200, num_threads=4, seed=0)
    def mnist_pipeline(data_path, random_shuffle):
        jpegs, labels = fn.readers.caffe2(
            path=data_path,
            random_shuffle=random_shuffle,
            name="mnist_caffe2_reader")
        images = fn.decoders.image(
            jpegs, device=decoder_device, output_type=types.GRAY)
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT, std=[255.], output_layout="CHW")
        images = fn.reshape(images, shape=[-1])  # Flatten the output image

        labels = labels.gpu() if decoder_device == "mixed" else labels

        if random_shuffle:
            labels = fn.one_hot(labels, num_classes=10)

        return images, labels

    return mnist_pipeline


def test_dali_mnist_pipelines_run_with_the_import_changed(digits_lmdb):
    path, targets = digits_lmdb
    from jaxdali.plugin import jax as dax

    ours = _mnist_pipelines(jaxdali.pipeline_def, fn, types, "mixed")
    training = dax.DALIGenericIterator(ours(data_path=path, random_shuffle=True), output_map=["images", "labels"],
                                       reader_name="mnist_caffe2_reader", auto_reset=True)
    validation = dax.DALIGenericIterator(ours(data_path=path, random_shuffle=False),
                                         output_map=["images", "labels"], reader_name="mnist_caffe2_reader",
                                         auto_reset=True)
    assert len(training) == len(validation) == 5
    seen = []
    for batch in training:
        assert batch["images"].shape == (200, 784) and batch["labels"].shape == (200, 10)
        seen.append(np.argmax(np.asarray(batch["labels"]), axis=-1))
    assert sorted(np.concatenate(seen).tolist()) == sorted(targets.tolist())  # each digit once per epoch

    # The validation pipeline gives DALI's values bit for bit (DALI decoding on its CPU).
    theirs = _mnist_pipelines(dali.pipeline_def, dali_fn, dali.types, "cpu")
    dali_pipe = theirs(data_path=path, random_shuffle=False, device_id=None)
    dali_pipe.build()
    for batch in validation:
        images, labels = dali_pipe.run()
        np.testing.assert_array_equal(np.asarray(batch["images"]), images.as_array(), strict=True)
        np.testing.assert_array_equal(np.asarray(batch["labels"]), labels.as_array(), strict=True)
