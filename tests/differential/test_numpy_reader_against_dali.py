"""fn.readers.numpy against real NVIDIA DALI (CPU): the same arrays, bit for bit, for every dtype DALI
reads, C and Fortran order, folder listing, file lists and regions of interest."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")
dali_fn = pytest.importorskip("nvidia.dali.fn")

import jaxdali  # noqa: E402
from jaxdali import fn  # noqa: E402

COVERED_OPERATORS = ("readers.numpy",)

DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
          "float64")


def _array(rng, dtype, shape):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith("float"):
        return (rng.standard_normal(shape) * 100).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> pathlib.Path:
    """Arrays of every dtype in C and Fortran order, at the top of the root and one level down (plus
    one two levels down and a non-.npy file, which the folder listing skips)."""
    root = tmp_path_factory.mktemp("npy")
    rng = np.random.default_rng(0)
    (root / "sub").mkdir()
    (root / "sub" / "deeper").mkdir()
    (root / "b_sub").mkdir()
    for k, dtype in enumerate(DTYPES):
        shape = [(3, 4), (2, 3, 5), (7,), (1, 2, 1, 3)][k % 4]
        a = _array(rng, dtype, shape)
        np.save(root / f"{dtype}_c.npy", a)
        np.save(root / "sub" / f"{dtype}_f.npy", np.asfortranarray(a))
    np.save(root / "b_sub" / "scalar.npy", np.array(2.5, np.float32))
    np.save(root / "b_sub" / "empty.npy", np.zeros((0, 3), np.int16))
    np.save(root / "sub" / "deeper" / "ignored.npy", np.zeros(3))
    (root / "notes.txt").write_text("not an array")
    return root


@pytest.fixture(scope="module")
def volumes(tmp_path_factory) -> list[str]:
    """3-D arrays of several shapes, dtypes and orders, for region reads."""
    root = tmp_path_factory.mktemp("vol")
    rng = np.random.default_rng(1)
    files = []
    for k, (shape, dtype, fortran) in enumerate([((5, 6, 7), "float32", False), ((4, 9, 3), "uint8", True),
                                                 ((8, 2, 5), "int64", False), ((6, 6, 6), "float16", True),
                                                 ((3, 10, 4), "int16", False)]):
        a = _array(rng, dtype, shape)
        path = root / f"v{k}.npy"
        np.save(path, np.asfortranarray(a) if fortran else a)
        files.append(str(path))
    return files


def _run(lib: str, batch_size: int, batches: int = 1, **reader_args) -> list[tuple[str, np.ndarray]]:
    module_fn = dali_fn if lib == "dali" else fn
    pipeline_def = dali.pipeline_def if lib == "dali" else jaxdali.pipeline_def

    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, prefetch_queue_depth=1)
    def p():
        return module_fn.readers.numpy(name="Reader", **reader_args)

    pipe = p()
    pipe.build()
    out = []
    for _ in range(batches):
        (data,) = pipe.run()
        for k in range(batch_size):
            sample = data[k] if lib == "dali" else data.at(k)
            info = sample.source_info() if lib == "dali" else data.source_info[k]
            out.append((info, np.array(sample)))
    return out


def _assert_same(ours, theirs):
    assert [n for n, _ in ours] == [n for n, _ in theirs]
    for (name, a), (_, b) in zip(ours, theirs):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert a.tobytes() == b.tobytes(), name


def test_folder_listing_every_dtype_c_and_fortran_order(dataset):
    n = len(list(dataset.glob("*.npy"))) + len(list(dataset.glob("*/*.npy")))
    # DALI needs one dtype per batch: batches of 1
    ours, theirs = _run("jaxdali", 1, n, file_root=str(dataset)), _run("dali", 1, n, file_root=str(dataset))
    _assert_same(ours, theirs)
    assert {a.dtype.name for _, a in ours} >= set(DTYPES)


def test_file_filter_file_list_and_files(dataset, tmp_path):
    args = dict(file_root=str(dataset), file_filter="*int*_f.npy")
    _assert_same(_run("jaxdali", 1, 6, **args), _run("dali", 1, 6, **args))
    listing = tmp_path / "list.txt"
    listing.write_text("sub/int8_f.npy\n\nfloat64_c.npy\nb_sub/scalar.npy\n")
    for args in (dict(file_list=str(listing), file_root=str(dataset)),
                 dict(files=["uint16_c.npy", str(dataset / "sub" / "bool_f.npy")], file_root=str(dataset))):
        _assert_same(_run("jaxdali", 1, 3, **args), _run("dali", 1, 3, **args))


def test_shards_and_padding_follow_dali(tmp_path):
    files = []
    for k in range(10):
        files.append(str(tmp_path / f"{k}.npy"))
        np.save(files[-1], np.full((k + 1, 2), k, np.int32))
    for shard in range(3):
        args = dict(files=files, num_shards=3, shard_id=shard, pad_last_batch=True)
        _assert_same(_run("jaxdali", 3, batches=4, **args), _run("dali", 3, batches=4, **args))


ROI_CASES = [
    dict(roi_start=[1, 0, 1], roi_end=[3, 2, 3]),
    dict(roi_start=[1], roi_shape=[2], roi_axes=[2]),
    dict(roi_start=[0, 1], roi_axes=[1, 0]),
    dict(roi_start=[1]),
    dict(rel_roi_start=[0.25, 0.1], rel_roi_end=[0.75, 0.9], roi_axes=[0, 2]),
    dict(rel_roi_shape=[0.5], roi_axes=[-1]),
    dict(rel_roi_start=[0.3], rel_roi_shape=[0.3]),
    dict(rel_roi_start=[0.1875, 0.5, 0.3125], rel_roi_shape=[0.3125, 0.5, 0.25]),
    dict(roi_start=[2], roi_end=[2], roi_axes=[1]),
    dict(roi_start=[1, 1], roi_end=[2, 2], roi_axes=[0, 1]),
    dict(rel_roi_start=[0.1], rel_roi_end=[0.9], roi_axes=[2]),  # 0.9f * 5 = 4.5f in float32: end 5
    dict(roi_start=[-2, 0, 1], roi_shape=[4, 3, 9], out_of_bounds_policy="pad", fill_value=3.0),
    dict(roi_start=[-2, 0, 1], roi_shape=[4, 3, 9], out_of_bounds_policy="trim_to_shape"),
    dict(roi_start=[6], roi_shape=[5], roi_axes=[0], out_of_bounds_policy="pad", fill_value=-1.7),  # -2, 0 for uint8
    dict(roi_start=[-1], roi_shape=[3], roi_axes=[1], out_of_bounds_policy="pad", fill_value=300.5),
    dict(rel_roi_start=[-0.1], rel_roi_end=[1.2], roi_axes=[1], out_of_bounds_policy="pad", fill_value=7),
]


@pytest.mark.parametrize("roi", ROI_CASES, ids=lambda r: ",".join(f"{k}={v}" for k, v in r.items()))
def test_regions_of_interest_match_dali(volumes, roi):
    args = dict(files=volumes, **roi)
    _assert_same(_run("jaxdali", 1, len(volumes), **args), _run("dali", 1, len(volumes), **args))


def test_region_outside_the_array_is_an_error_in_both(volumes):
    args = dict(files=volumes, roi_start=[3], roi_shape=[4], roi_axes=[0])
    with pytest.raises(RuntimeError, match="out of bounds"):
        _run("dali", 1, len(volumes), **args)
    with pytest.raises(ValueError, match=r"v0\.npy.*Slice can't be placed out of bounds.*5 x 6 x 7"):
        _run("jaxdali", 1, len(volumes), **args)
