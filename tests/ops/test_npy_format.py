""".npy format: random regions of arrays larger than the first read equal NumPy's slicing, locally (page-sized
merging) and on a remote store (256 KiB merging), in C and Fortran order; headers are parsed once."""

from __future__ import annotations

import io

import numpy as np
import pytest

from jaxdali.ops.readers import npy_format


def _boxes(rng, shape, count):
    for _ in range(count):
        lo = [int(rng.integers(0, d)) for d in shape]
        hi = [int(rng.integers(l + 1, d + 1)) for l, d in zip(lo, shape)]
        if rng.random() < 0.3:  # whole trailing axes: long contiguous runs
            k = int(rng.integers(0, len(shape)))
            lo[k:], hi[k:] = [0] * (len(shape) - k), list(shape[k:])
        yield lo, hi


@pytest.mark.parametrize("where", ["local", "memory"])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape,dtype", [((40, 70, 50), "<f4"), ((300, 500), ">i2"), ((9, 11, 13, 17), "<u8")])
def test_random_regions_equal_numpy_slicing(tmp_path, where, order, shape, dtype):
    rng = np.random.default_rng(abs(hash((shape, order, where))) % 2**32)
    array = np.asarray(rng.integers(0, 1000, shape), dtype=dtype, order=order)
    buf = io.BytesIO()
    np.save(buf, array)
    data = buf.getvalue()
    if where == "local":
        path = str(tmp_path / "a.npy")
        with open(path, "wb") as f:
            f.write(data)
    else:
        fsspec = pytest.importorskip("fsspec")
        fsspec.filesystem("memory").pipe(f"/npy-format-test/{order}{len(shape)}.npy", data)
        path = f"memory://npy-format-test/{order}{len(shape)}.npy"
    header = npy_format.parse_header(data[:4096], path)
    assert len(data) > 100_000  # far past the 1 KiB prefix given: regions need ranged reads
    for lo, hi in _boxes(rng, shape, 12):
        got = npy_format.read_box(path, header, lo, hi, prefix=data[:1024])
        expected = array[tuple(slice(l, h) for l, h in zip(lo, hi))]
        assert got.dtype == expected.dtype.newbyteorder("=") and got.flags.c_contiguous
        np.testing.assert_array_equal(got, expected, err_msg=f"region {lo} - {hi}")


def test_headers_are_parsed_once_per_distinct_header():
    buf = io.BytesIO()
    np.save(buf, np.zeros((3, 4), np.float32))
    data = buf.getvalue()
    first = npy_format.parse_header(data, "a.npy")
    assert npy_format.parse_header(data, "b.npy") is first  # the same object: cached by the header bytes
    assert first.shape == (3, 4) and first.dtype == np.float32 and not first.fortran_order


def test_a_header_error_names_each_file_even_when_cached():
    text = b"{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }"
    bad = b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text
    for name in ("one.npy", "two.npy"):
        with pytest.raises(npy_format.NpyFormatError, match=rf"'{name}' holds elements of type '<c8'"):
            npy_format.parse_header(bad, name)
