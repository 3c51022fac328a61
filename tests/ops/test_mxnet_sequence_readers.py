"""fn.readers.mxnet, fn.readers.sequence and fn.decoders.numpy: exact mid-epoch resume from a checkpoint,
and errors that name the operator, the file or record and the argument (their values are compared with
DALI in tests/differential/test_readers_formats.py)."""

from __future__ import annotations

import io
import pathlib

import numpy as np
import pytest

import jaxdali
from jaxdali import fn, types
from jaxdali.ops.readers import recordio_format

FLOWERS = pathlib.Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "flowers"


def _records(tmp_path, count=13) -> tuple[str, str]:
    payloads = [recordio_format.encode_record(float(i), i.to_bytes(4, "little") * (i % 3 + 1), i)
                for i in range(count)]
    rec, idx = str(tmp_path / "d.rec"), str(tmp_path / "d.idx")
    recordio_format.write_recordio(rec, payloads, idx)
    return rec, idx


def _pipe(reader, batch_size=4, checkpoint=None, **args):
    @jaxdali.pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=9,
                          enable_checkpointing=checkpoint is not None, checkpoint=checkpoint or None)
    def p():
        return tuple(reader(name="Reader", **args))

    pipe = p()
    pipe.build()
    return pipe


def _labels(pipe, batches) -> list[list[float]]:
    return [[float(np.array(s)[0]) for s in pipe.run()[1].samples()] for _ in range(batches)]


@pytest.mark.parametrize("args", [{"random_shuffle": True}, {"shuffle_after_epoch": True},
                                  {"num_shards": 2, "shard_id": 1, "pad_last_batch": True}])
def test_mxnet_resumes_mid_epoch_exactly(tmp_path, args):
    rec, idx = _records(tmp_path)
    args = dict(path=[rec], index_path=[idx], **args)
    original = _pipe(fn.readers.mxnet, checkpoint="", **args)
    first = _labels(original, 2)
    assert len({v for b in first for v in b}) >= 7  # shard 1 of 2 holds 7 records (one padded)
    checkpoint = original.checkpoint()
    expected = _labels(original, 6)
    assert _labels(_pipe(fn.readers.mxnet, checkpoint=checkpoint, **args), 6) == expected


@pytest.mark.parametrize("dont_use_mmap", [False, True])
def test_mxnet_reads_records_in_offset_order_with_their_bytes(tmp_path, dont_use_mmap):
    rec, idx = _records(tmp_path)
    data, labels = _pipe(fn.readers.mxnet, batch_size=13, path=[rec], index_path=[idx],
                         dont_use_mmap=dont_use_mmap).run()
    assert [bytes(s) for s in data.samples()] == [i.to_bytes(4, "little") * (i % 3 + 1) for i in range(13)]
    assert labels.as_array().ravel().tolist() == list(range(13)) and labels.np_dtype == np.float32


@pytest.mark.parametrize("case,error,message", [
    ("no_index", FileNotFoundError, "index file"),
    ("two_indexes", ValueError, "'index_path' must list exactly one index file"),
    ("stale_index", ValueError, "past the end of the RecordIO files"),
    ("bad_magic", ValueError, "does not start with the RecordIO magic word"),
    ("truncated", ValueError, "does not fit"),
    ("bad_line", ValueError, "is not an integer"),
])
def test_mxnet_errors_name_file_record_and_argument(tmp_path, case, error, message):
    rec, idx = _records(tmp_path)
    index_path = [idx]
    if case == "no_index":
        index_path = [str(tmp_path / "missing.idx")]
    elif case == "two_indexes":
        index_path = [idx, idx]
    elif case == "stale_index":
        pathlib.Path(idx).write_text("0\t0\n1\t99999\n")
    elif case == "bad_magic":
        pathlib.Path(idx).write_text("0\t4\n")  # not on a record boundary
    elif case == "truncated":
        data = pathlib.Path(rec).read_bytes()
        pathlib.Path(rec).write_bytes(data[:-4])
    elif case == "bad_line":
        pathlib.Path(idx).write_text("0\t0\n1\tx12\n")
    with pytest.raises(error, match="fn.readers.mxnet") as info:
        _pipe(fn.readers.mxnet, batch_size=13, path=[rec], index_path=index_path).run()
    assert message in str(info.value)
    if case in ("bad_magic", "truncated"):
        assert rec in str(info.value)


# -- readers.sequence ---------------------------------------------------------------------------------

@pytest.fixture
def streams(tmp_path) -> str:
    cv2 = pytest.importorskip("cv2")
    photos = sorted(FLOWERS.rglob("*.jpg"))[:9]
    if len(photos) < 9:
        pytest.skip(f"the shared photos are missing under {FLOWERS}")
    for k, path in enumerate(photos):
        stream = tmp_path / "streams" / f"{k // 5}"
        stream.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(stream / f"{k:03d}.png"), cv2.resize(cv2.imread(str(path)), (16, 12)))
    return str(tmp_path / "streams")


def _sequence(**args):
    return [fn.readers.sequence(**args)]


def _first_pixels(pipe, batches) -> list[list[int]]:
    """A fingerprint of each sequence: the sum of its frames, per batch."""
    return [[int(np.array(s).sum()) for s in pipe.run()[0].samples()] for _ in range(batches)]


def test_sequence_resumes_mid_epoch_exactly(streams):
    args = dict(file_root=streams, sequence_length=2, random_shuffle=True)
    original = _pipe(_sequence, batch_size=2, checkpoint="", **args)
    assert original.reader_meta("Reader")["epoch_size"] == 4 + 3
    _first_pixels(original, 2)
    checkpoint = original.checkpoint()
    expected = _first_pixels(original, 5)
    restored = _pipe(_sequence, batch_size=2, checkpoint=checkpoint, **args)
    assert _first_pixels(restored, 5) == expected


def test_sequence_frames_are_the_decoded_files_in_order(streams):
    (out,) = _pipe(_sequence, batch_size=3, file_root=streams, sequence_length=3,
                   stride=2).run()
    cv2 = pytest.importorskip("cv2")
    files = sorted(pathlib.Path(streams).rglob("*.png"))
    assert out.layout() == "FHWC" and len(out) == 3
    # Stream 0 has frames 0-4: one sequence (0, 2, 4); stream 1 has 5-8: none; the batch wraps around.
    for sample in out.samples():
        expected = np.stack([cv2.cvtColor(cv2.imread(str(files[k])), cv2.COLOR_BGR2RGB) for k in (0, 2, 4)])
        np.testing.assert_array_equal(np.array(sample), expected)


@pytest.mark.parametrize("case,message", [
    ("no_root", "is not a directory"),
    ("too_long", "no stream of file_root"),
    ("mixed_sizes", "the frames of a sequence must have one shape"),
    ("bad_length", "sequence_length"),
])
def test_sequence_errors(streams, case, message):
    args = dict(file_root=streams, sequence_length=2)
    if case == "no_root":
        args["file_root"] = streams + "-missing"
    elif case == "too_long":
        args["sequence_length"] = 6
    elif case == "mixed_sizes":
        from PIL import Image

        Image.new("RGB", (5, 5)).save(pathlib.Path(streams) / "0" / "001.png")
    elif case == "bad_length":
        args["sequence_length"] = 0
    with pytest.raises(Exception, match="readers.sequence") as info:
        _pipe(_sequence, batch_size=2, **args).run()
    assert message in str(info.value)


# -- decoders.numpy -----------------------------------------------------------------------------------

def _npy(array) -> np.ndarray:
    out = io.BytesIO()
    np.save(out, array)
    return np.frombuffer(out.getvalue(), np.uint8)


def _decode(samples, **kw):
    @jaxdali.pipeline_def(batch_size=len(samples), num_threads=1, device_id=None)
    def p():
        return fn.decoders.numpy(fn.external_source(source=lambda: samples), **kw)

    pipe = p()
    pipe.build()
    return [np.array(s) for s in pipe.run()[0].samples()]


def test_numpy_decoder_fortran_and_big_endian_arrays():
    """(DALI 2.4's CPU operator fails on Fortran-order arrays without a GPU; NumPy is the reference.)"""
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got = _decode([_npy(np.asfortranarray(a)), _npy(a.astype(">f4"))])
    for g in got:
        assert g.dtype == np.float32 and g.flags.c_contiguous
        np.testing.assert_array_equal(g, a)


@pytest.mark.parametrize("samples,kw,message", [
    ([_npy(np.zeros(3, np.int16)), _npy(np.zeros(3, np.float32))], {}, "same type unless 'dtype' is given"),
    ([_npy(np.zeros(3)), _npy(np.zeros((1, 3)))], {"dtype": types.FLOAT}, "same number of dimensions"),
    ([np.frombuffer(b"definitely not numpy", np.uint8)], {}, "sample 0: 'input bytes' is not a .npy file"),
    ([_npy(np.arange(6))[:-5]], {}, "is truncated"),
    ([_npy(np.zeros(2, np.complex64))], {}, "holds elements of type '<c8'"),
    ([np.zeros(4, np.float32)], {}, "must hold the bytes of a .npy file as uint8"),
])
def test_numpy_decoder_errors(samples, kw, message):
    with pytest.raises(Exception, match="fn.decoders.numpy") as info:
        _decode(samples, **kw)
    assert message in str(info.value)


def test_mxnet_reads_fsspec_urls_like_local_files(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    rec, idx = _records(tmp_path)
    fs = fsspec.filesystem("memory")
    for local in (rec, idx):
        fs.pipe(f"/mxnet-test/{pathlib.Path(local).name}", pathlib.Path(local).read_bytes())
    try:
        args = dict(batch_size=5, random_shuffle=True)
        remote = _pipe(fn.readers.mxnet, path=["memory:///mxnet-test/d.rec"], index_path=["memory:///mxnet-test/d.idx"],
                       **args)
        local = _pipe(fn.readers.mxnet, path=[rec], index_path=[idx], **args)
        for _ in range(4):
            (a_data, a_labels), (b_data, b_labels) = remote.run(), local.run()
            assert [bytes(s) for s in a_data.samples()] == [bytes(s) for s in b_data.samples()]
            np.testing.assert_array_equal(a_labels.as_array(), b_labels.as_array())
    finally:
        fs.rm("/mxnet-test", recursive=True)
