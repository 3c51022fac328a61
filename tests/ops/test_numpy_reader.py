"""fn.readers.numpy: header versions, byte orders, errors naming the file, region reads that touch only
the region's bytes, per-sample regions, reader_meta, read-ahead and exact mid-epoch resume."""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import config, fn, pipeline_def
from jaxdali.core.checkpoint import CheckpointError
from jaxdali.ops.readers import npy_format


def _pipe(batch_size=2, checkpoint=None, **reader_args):
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=3, prefetch_queue_depth=1,
                  enable_checkpointing=True)
    def p():
        return fn.readers.numpy(name="Reader", **reader_args)

    pipe = p(checkpoint=checkpoint)
    pipe.build()
    return pipe


def _arrays(pipe, batches: int = 1) -> list[np.ndarray]:
    out = []
    for _ in range(batches):
        (data,) = pipe.run()
        out += [np.array(data.at(k)) for k in range(len(data))]
    return out


def _write(path, array, version=None) -> str:
    with open(path, "wb") as f:
        np.lib.format.write_array(f, array, version=version)
    return str(path)


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", ["<f4", ">i4", ">f8", "|b1", "<u2"])
def test_header_versions_byte_orders_and_orders_read_as_numpy_loads_them(tmp_path, version, order, dtype):
    a = np.asarray(np.arange(24).reshape(2, 3, 4) % 7, dtype=dtype, order=order)
    path = _write(tmp_path / "a.npy", a, version)
    (got,) = _arrays(_pipe(batch_size=1, files=[path]))
    assert got.dtype == a.dtype.newbyteorder("=") and got.flags.c_contiguous
    np.testing.assert_array_equal(got, np.load(path))
    (region,) = _arrays(_pipe(batch_size=1, files=[path], roi_start=[1, 0, 1], roi_end=[2, 2, 4]))
    np.testing.assert_array_equal(region, np.load(path)[1:2, 0:2, 1:4])


def test_region_read_touches_only_the_region_bytes(tmp_path):
    """A file cut after its first 100 rows still gives regions inside those rows: nothing else is read."""
    a = np.arange(1000 * 256, dtype=np.float32).reshape(1000, 256)
    path = _write(tmp_path / "big.npy", a)
    header = npy_format.parse_header(open(path, "rb").read(256), path)
    with open(path, "r+b") as f:
        f.truncate(header.data_offset + 100 * 256 * 4)
    (got,) = _arrays(_pipe(batch_size=1, files=[path], roi_start=[10, 3], roi_shape=[20, 7]))
    np.testing.assert_array_equal(got, a[10:30, 3:10])
    with pytest.raises(ValueError, match=r"big\.npy' is truncated: reading its region"):
        _pipe(batch_size=1, files=[path], roi_start=[500], roi_shape=[2], roi_axes=[0]).run()
    with pytest.raises(ValueError, match=r"big\.npy' is truncated: its header announces 1024000 bytes"):
        _pipe(batch_size=1, files=[path]).run()


@pytest.mark.parametrize("content,match", [
    (b"\x93NUMPX\x01\x00\x10\x00", "is not a .npy file"),
    (b"\x93NUMPY\x01\x00\x40\x00{'descr': '<f4'", "truncated inside its .npy header"),
    (b"\x93NUMPY\x04\x00\x40\x00", "version 4.0"),
    (b"hello", "not a .npy file"),
])
def test_bad_headers_name_the_file(tmp_path, content, match):
    (tmp_path / "bad.npy").write_bytes(content)
    with pytest.raises(ValueError, match=match) as e:
        _pipe(batch_size=1, files=[str(tmp_path / "bad.npy")]).run()
    assert "bad.npy" in str(e.value)


@pytest.mark.parametrize("array,match", [(np.arange(3, dtype=np.complex64), "'<c8'"),
                                         (np.array(["ab"]), "'<U2'"),
                                         (np.zeros(2, [("x", "<i4")]), "structured dtype")])
def test_unsupported_dtypes_name_the_file_and_type(tmp_path, array, match):
    path = _write(tmp_path / "odd.npy", array)
    with pytest.raises(ValueError, match=match) as e:
        _pipe(batch_size=1, files=[path]).run()
    assert "odd.npy" in str(e.value)


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        _pipe(batch_size=1, files=[str(tmp_path / "nope.npy")]).run()
    assert "nope.npy" in str(e.value) + "".join(e.value.__notes__)


def test_batch_of_mixed_dtypes_is_dalis_error(tmp_path):
    files = [_write(tmp_path / "a.npy", np.zeros(2, np.float32)), _write(tmp_path / "b.npy", np.zeros(2, np.uint8))]
    with pytest.raises(ValueError, match="All samples in the batch must have the same data type"):
        _pipe(files=files).run()
    files[1] = _write(tmp_path / "b.npy", np.zeros((2, 1), np.float32))
    with pytest.raises(ValueError, match="same number of dimensions"):
        _pipe(files=files).run()


@pytest.mark.parametrize("args,error,match", [
    (dict(), ValueError, "give one of 'file_root', 'file_list' or 'files'"),
    (dict(files=["a.npy"], file_list="x"), ValueError, "mutually exclusive"),
    (dict(files=["a.npy"], roi_start=[1], rel_roi_start=[0.5]), ValueError, "'roi_start' is incompatible"),
    (dict(files=["a.npy"], roi_end=[1], roi_shape=[1]), ValueError, "'roi_end' is incompatible with 'roi_shape'"),
    (dict(files=["a.npy"], out_of_bounds_policy="wrap"), ValueError, "must be one of"),
    (dict(file_root="/nonexistent/dir"), FileNotFoundError, "is not a directory"),
    (dict(files=["a.npy"], use_o_direct=True), ValueError, "Cannot use use_o_direct with ``dont_use_mmap=False``"),
])
def test_argument_errors(args, error, match):
    with pytest.raises(error, match=match):
        _pipe(**args)


def test_no_files_found(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(RuntimeError, match="No files found"):
        _pipe(file_root=str(tmp_path))


def test_per_sample_regions_from_an_argument_input(tmp_path):
    files = [_write(tmp_path / f"{k}.npy", np.arange(20, dtype=np.int16).reshape(4, 5) + 100 * k) for k in range(3)]
    starts = [np.array([k, 1], np.int32) for k in range(3)]

    @pipeline_def(batch_size=3, num_threads=2, device_id=None)
    def p():
        start = fn.external_source(source=lambda: starts, batch=True)
        return fn.readers.numpy(files=files, roi_start=start, roi_shape=[1, 3])

    pipe = p()
    pipe.build()
    (data,) = pipe.run()
    for k in range(3):
        np.testing.assert_array_equal(np.array(data.at(k)), np.load(files[k])[k:k + 1, 1:4])


def test_reader_meta_counts_files(tmp_path):
    files = [_write(tmp_path / f"{k}.npy", np.zeros(1)) for k in range(7)]
    meta = _pipe(batch_size=2, files=files, num_shards=2, shard_id=1, pad_last_batch=True).reader_meta("Reader")
    assert meta == {"epoch_size": 7, "epoch_size_padded": 8, "number_of_shards": 2, "shard_id": 1,
                    "pad_last_batch": True, "stick_to_shard": False}


@pytest.fixture
def read_ahead_mode():
    """Sets the reader_read_ahead option for one test."""
    before = config.get("reader_read_ahead")
    yield lambda mode: config.update("reader_read_ahead", mode)
    config.update("reader_read_ahead", before)


@pytest.mark.parametrize("shuffle", [dict(random_shuffle=True), dict(shuffle_after_epoch=True), dict()])
def test_mid_epoch_resume_is_exact_with_and_without_read_ahead(tmp_path, read_ahead_mode, shuffle):
    files = [_write(tmp_path / f"{k:02d}.npy", np.full(3, k, np.int32)) for k in range(11)]
    args = dict(files=files, roi_start=[1], **shuffle)
    runs = {}
    for mode in ("never", "always"):
        read_ahead_mode(mode)
        pipe = _pipe(batch_size=3, **args)
        head = _arrays(pipe, 5)
        checkpoint = pipe.checkpoint()
        tail = _arrays(pipe, 6)
        resumed = _arrays(_pipe(batch_size=3, checkpoint=checkpoint, **args), 6)
        assert [a.tolist() for a in resumed] == [a.tolist() for a in tail]
        runs[mode] = ([a.tolist() for a in head + tail], checkpoint)
    assert runs["never"] == runs["always"]  # read-ahead changes neither the data nor the checkpoints


def test_a_checkpoint_of_changed_files_is_refused(tmp_path):
    for k in range(4):
        _write(tmp_path / f"{k}.npy", np.full(2, k, np.int32))
    pipe = _pipe(file_root=str(tmp_path))
    pipe.run()
    (tmp_path / "3.npy").rename(tmp_path / "4.npy")  # same count, same arguments: another listing
    with pytest.raises(CheckpointError, match=r"listing.*sub-folders.*changed"):
        _pipe(file_root=str(tmp_path), checkpoint=pipe.checkpoint())


def test_cached_headers_give_the_same_regions(tmp_path):
    files = [_write(tmp_path / f"{k}.npy", np.arange(30, dtype=np.uint8).reshape(5, 6) * k) for k in range(4)]
    args = dict(files=files, rel_roi_start=[0.2, 0.5], rel_roi_shape=[0.4, 0.5])
    plain = _arrays(_pipe(**args), 4)
    cached = _arrays(_pipe(cache_header_information=True, **args), 4)
    assert [a.tolist() for a in plain] == [a.tolist() for a in cached]


def test_per_sample_regions_from_a_random_operator(tmp_path):
    """An argument input computed by a non-source operator runs before the reader in the same iteration."""
    files = [_write(tmp_path / f"{k}.npy", np.arange(60, dtype=np.float32).reshape(6, 10) + k) for k in range(4)]

    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=11)
    def p():
        start = fn.random.uniform(range=[0.0, 0.5], shape=[2])
        return start, fn.readers.numpy(files=files, rel_roi_start=start, roi_shape=[2, 3])

    pipe = p()
    pipe.build()
    for _ in range(2):
        starts, data = pipe.run()
        for k in range(4):
            rel = np.array(starts.at(k), np.float32)
            lo = np.floor(rel * np.array([6, 10], np.float32) + np.float32(0.5)).astype(int)
            np.testing.assert_array_equal(np.array(data.at(k)), np.load(files[k])[lo[0]:lo[0] + 2, lo[1]:lo[1] + 3])
