"""readers.ranges.read_ranges: byte ranges of several files, merged into few requests, returned intact."""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali.ops.readers.ranges import read_ranges


def _serial(fn, n):
    fn(0, n)


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(1)
    paths = []
    for k in range(3):
        path = tmp_path / f"f{k}.bin"
        path.write_bytes(rng.integers(0, 256, 5000 + 1000 * k, dtype=np.uint8).tobytes())
        paths.append(str(path))
    return paths


def _check(paths, file_ids, offsets, sizes, **kw):
    blob, starts = read_ranges(paths, np.array(file_ids), np.array(offsets), np.array(sizes), _serial, "test", **kw)
    for f, o, s, at in zip(file_ids, offsets, sizes, starts.tolist()):
        with open(paths[f], "rb") as fh:
            fh.seek(o)
            assert blob[at:at + s] == fh.read(s)
    return blob


def test_consecutive_ranges_come_from_one_read(files):
    blob = _check(files, [1] * 5, [0, 10, 30, 30, 100], [10, 20, 5, 5, 50])
    assert len(blob) == 150  # the single request spans the first offset to the last end


@pytest.mark.parametrize("max_gap", [0, 64, 1 << 16])
def test_scattered_repeated_ranges_of_several_files(files, max_gap):
    rng = np.random.default_rng(2)
    file_ids = rng.integers(0, 3, 40).tolist()
    offsets = rng.integers(0, 4900, 40).tolist()
    sizes = rng.integers(0, 100, 40).tolist()
    file_ids += file_ids[:5]  # repeated ranges, as padding repeats samples
    offsets += offsets[:5]
    sizes += sizes[:5]
    blob = _check(files, file_ids, offsets, sizes, max_gap=max_gap)
    if max_gap == 0:
        assert len(blob) <= sum(sizes)


def test_a_range_past_the_end_names_the_file(files):
    with pytest.raises(EOFError, match=r"f0\.bin.* ends at byte 5000, before the end of the range at offset 4990"):
        read_ranges(files, np.array([0]), np.array([4990]), np.array([20]), _serial, "test")
    with pytest.raises(EOFError, match=r"f2\.bin.* ends at byte 7000"):
        read_ranges(files, np.array([2, 0]), np.array([6990, 0]), np.array([20, 5]), _serial, "test")


def test_memory_mapped_files_give_the_same_bytes_without_a_read(files):
    from jaxdali.ops.readers.ranges import map_local_files

    maps = map_local_files(files, dont_use_mmap=False)
    assert map_local_files(files, dont_use_mmap=True) is None
    assert map_local_files(["memory://x/y.bin"], dont_use_mmap=False) is None
    # One file: views of its map; several files: the reads, as without maps.
    _check(files, [1] * 4, [3000, 10, 10, 4000], [100, 20, 20, 2000], maps=maps)
    _check(files, [0, 2, 1], [0, 6000, 10], [50, 999, 10], maps=maps)
    with pytest.raises(EOFError, match=r"f0\.bin.* ends at byte 5000, before the end of the range at offset 4990"):
        read_ranges(files, np.array([0]), np.array([4990]), np.array([20]), _serial, "test", maps=maps)


def test_remote_requests_are_in_flight_together(files):
    """A shuffled batch from a remote store is one request per record: they wait on the network
    together (on the shared I/O threads), not num_threads at a time; the bytes are those of the files."""
    fsspec = pytest.importorskip("fsspec")
    import threading

    from fsspec.implementations.local import LocalFileSystem

    class Slow(LocalFileSystem):
        """Each request waits until 6 are in flight (a serial caller would time out)."""

        protocol = "slowranges"
        barrier = threading.Barrier(6, timeout=10)

        @classmethod
        def _strip_protocol(cls, path):
            return super()._strip_protocol(path[len("slowranges://"):] if path.startswith("slowranges://") else path)

        def cat_file(self, path, start=None, end=None, **kwargs):
            Slow.barrier.wait()
            return super().cat_file(path, start=start, end=end, **kwargs)

    fsspec.register_implementation("slowranges", Slow, clobber=True)
    remote = ["slowranges://" + p for p in files]
    file_ids, offsets, sizes = [0, 1, 2, 0, 1, 2] * 2, [0, 0, 0, 2500, 2500, 2500] * 2, [10, 20, 30, 40, 50, 60] * 2
    blob, starts = read_ranges(remote, np.array(file_ids), np.array(offsets), np.array(sizes), _serial, "test",
                               max_gap=0)
    for f, o, s, at in zip(file_ids, offsets, sizes, starts.tolist()):
        with open(files[f], "rb") as fh:
            fh.seek(o)
            assert blob[at:at + s] == fh.read(s)
    assert Slow.barrier.n_waiting == 0 and not Slow.barrier.broken  # the 6 distinct ranges were in flight at once
