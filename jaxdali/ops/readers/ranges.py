"""Reading many byte ranges of a few container files with few requests.

Record readers (TFRecord, tar shards) need, per batch, dozens of small ranges that usually sit next
to each other in one file. ``read_ranges`` merges ranges of the same file whose gaps are small into
one ``storage.read_range`` request each (one request for a batch of consecutive records), issues the
requests on the pipeline's worker threads (on up to ``IO_THREADS`` shared I/O threads for a remote
store, whose requests wait on the network rather than a core) and hands back the pieces as zero-copy
views.
"""

from __future__ import annotations

import concurrent.futures
import threading
from typing import Callable, Sequence

import numpy as np

from jaxdali.ops.readers import storage
from jaxdali.ops.readers.read_ahead import IO_THREADS

__all__ = ["MAX_GAP", "MAX_MAPPED_FILES", "map_local_files", "read_ranges"]

#: Largest gap (bytes) between two ranges of a file that is read through rather than split into two requests.
MAX_GAP = 1 << 16


#: Most files a reader memory-maps: each mapping counts against the kernel's per-process limit
#: (vm.max_map_count, 65530 by default), so data sets of more shards are read instead.
MAX_MAPPED_FILES = 4096


def map_local_files(paths: Sequence[str], dont_use_mmap: bool) -> list[np.ndarray] | None:
    """Every file of ``paths`` memory-mapped (``storage.map_file``), as DALI reads local container files
    unless ``dont_use_mmap``; None when that is set, some file is remote or there are more than
    ``MAX_MAPPED_FILES``."""
    if dont_use_mmap or len(paths) > MAX_MAPPED_FILES or any(storage.is_remote(p) for p in paths):
        return None
    return [storage.map_file(p) for p in paths]


def read_ranges(paths: Sequence[str], file_ids: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
                parallel_for: Callable[[Callable[[int, int], None], int], None], what: str,
                max_gap: int = MAX_GAP, maps: Sequence[np.ndarray] | None = None) -> tuple[bytes | memoryview,
                                                                                           np.ndarray]:
    """Reads range ``i`` = ``sizes[i]`` bytes of ``paths[file_ids[i]]`` from ``offsets[i]``, for all ``i``.

    Returns ``(buffer, starts)``: one buffer holding every range (the read itself when one
    request covers them all) and the position of range ``i`` in it (ranges shared by several
    requests, e.g. a repeated sample, are read once). ``maps``: the files memory-mapped
    (``map_local_files``), or None; ranges all in one mapped file are then read from a memoryview
    of its map, with no read call. A range that the file cannot fill raises ``EOFError`` naming the file, the
    offset and ``what``.
    """
    n = len(offsets)
    if n == 0:
        return b"", np.zeros(0, np.int64)
    file_ids = np.asarray(file_ids, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    ends = offsets + sizes
    if maps is not None and (file_ids == file_ids[0]).all():
        data = maps[file_ids[0]]
        if ends.max() > len(data):
            bad = int(np.argmax(ends > len(data)))
            raise EOFError(f"{what}: {paths[file_ids[0]]!r} ends at byte {len(data)}, before the end of the range at "
                           f"offset {int(offsets[bad])} (size {int(sizes[bad])}): the file is truncated or the index "
                           f"is stale")
        return memoryview(data), offsets
    if (file_ids == file_ids[0]).all() and (offsets[1:] - ends[:-1] <= max_gap).all() and \
            (offsets[1:] >= offsets[:-1]).all():
        # Ranges in file order, close to each other (a batch of consecutive records): one request.
        first, stop = int(offsets[0]), int(ends.max())
        path = paths[file_ids[0]]
        blob = storage.read_range(path, first, stop - first)
        if len(blob) < stop - first:
            bad = int(np.argmax(ends > first + len(blob)))
            raise EOFError(f"{what}: {path!r} ends at byte {first + len(blob)}, before the end of the range at offset "
                           f"{int(offsets[bad])} (size {int(sizes[bad])}): the file is truncated or the index is stale")
        return blob, offsets - first
    order = np.lexsort((offsets, file_ids))
    f, o, e = file_ids[order], offsets[order], offsets[order] + sizes[order]
    # A range starts a new request unless it begins within max_gap of the furthest end so far in its file.
    new_run = np.empty(n, dtype=bool)
    new_run[0] = True
    np.logical_or(f[1:] != f[:-1], o[1:] > _file_running_max(f, e)[:-1] + max_gap, out=new_run[1:])
    run_id = np.cumsum(new_run) - 1
    heads = np.flatnonzero(new_run)
    run_file = f[heads]
    run_start = o[heads]
    run_stop = np.maximum.reduceat(e, heads)
    run_len = run_stop - run_start
    run_pos = np.concatenate(([0], np.cumsum(run_len)[:-1]))
    pieces: list[bytes] = [b""] * len(heads)

    def read(lo: int, hi: int) -> None:
        for r in range(lo, hi):
            path = paths[run_file[r]]
            data = storage.read_range(path, int(run_start[r]), int(run_len[r]))
            got = len(data)
            pieces[r] = data
            if got < run_len[r]:
                inside = np.flatnonzero((run_id == r) & (e > run_start[r] + got))
                first = int(order[inside[0]])
                raise EOFError(f"{what}: {path!r} ends at byte {int(run_start[r]) + got}, before the end of the "
                               f"range at offset {int(offsets[first])} (size {int(sizes[first])}): the file is "
                               f"truncated or the index is stale")

    if len(heads) > 1 and any(storage.is_remote(paths[f]) for f in np.unique(run_file)):
        # A shuffled batch is up to one request per record: all in flight at once, not num_threads at a time.
        for _ in _io_pool().map(lambda r: read(r, r + 1), range(len(heads))):
            pass
    else:
        parallel_for(read, len(heads))
    buffer = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    starts = np.empty(n, dtype=np.int64)
    starts[order] = run_pos[run_id] + (o - run_start[run_id])
    return buffer, starts


_IO_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_IO_POOL_LOCK = threading.Lock()


def _io_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The process's threads for remote range requests (started on first use; idle ones cost nothing)."""
    global _IO_POOL
    with _IO_POOL_LOCK:
        if _IO_POOL is None:
            _IO_POOL = concurrent.futures.ThreadPoolExecutor(IO_THREADS, thread_name_prefix="jaxdali-ranges")
        return _IO_POOL


def _file_running_max(file_ids: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The largest end so far among ranges of the same file (inputs sorted by file, then offset)."""
    # Offsetting each file's ends by a per-file base keeps the running maximum from leaking across files.
    base = file_ids * (int(ends.max()) + 1)
    return np.maximum.accumulate(ends + base) - base
