"""The executor: one process-wide worker pool, chunked per-operator parallelism, errors from pool threads."""

from __future__ import annotations

import threading

import pytest

from jaxdali import fn, pipeline_def
from jaxdali.pipeline.executor import worker_pool


def _worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("jaxdali-worker")]


def test_parallel_for_runs_the_chunks_on_several_threads_at_once():
    pool = worker_pool()
    pool.ensure(3)
    # Three chunks that each wait for the other two: this completes only if three threads run them at once.
    barrier = threading.Barrier(3, timeout=20)
    seen: list[tuple[int, int, str]] = []
    lock = threading.Lock()

    def chunk(start: int, stop: int) -> None:
        barrier.wait()
        with lock:
            seen.append((start, stop, threading.current_thread().name))

    pool.parallel_for(chunk, 6, 3)
    assert sorted((a, b) for a, b, _ in seen) == [(0, 2), (2, 4), (4, 6)]  # the range, once
    names = {name for _, _, name in seen}
    assert len(names) == 3 and threading.current_thread().name in names  # the caller takes a chunk too


def test_an_error_in_a_pool_thread_reaches_the_caller_with_its_traceback():
    pool = worker_pool()
    pool.ensure(3)
    caller = threading.current_thread()
    barrier = threading.Barrier(3, timeout=20)

    def failing_chunk(start: int, stop: int) -> None:
        barrier.wait()
        if threading.current_thread() is not caller:
            raise ValueError(f"chunk {start}:{stop} failed on a pool thread")

    with pytest.raises(ValueError, match="failed on a pool thread") as info:
        pool.parallel_for(failing_chunk, 6, 3)
    assert any(frame.name == "failing_chunk" for frame in info.traceback)


def test_one_worker_pool_serves_every_pipeline(index_files):
    files = index_files(32)

    @pipeline_def(batch_size=16, device_id=None, prefetch_queue_depth=1)
    def reader():
        data, label = fn.readers.file(files=files)
        return data, label

    first = reader(num_threads=4)
    first.run()
    pool = worker_pool()
    size = pool.size
    assert size >= 3  # grown to the largest num_threads asked for (minus the calling thread)
    before = len(_worker_threads())  # may include threads of a replaced (smaller) pool, still exiting
    pipes = [reader(num_threads=k) for k in (1, 2, 3, 4) * 3]
    for pipe in pipes:
        data, _ = pipe.run()
        assert [int(s[0]) for s in data.samples()] == list(range(16))
    # No pipeline brought its own threads: the shared pool did not grow, nor its thread count.
    assert worker_pool() is pool and pool.size == size
    assert len(_worker_threads()) <= max(before, size)
    for pipe in [first, *pipes]:
        pipe.close()


def test_a_failure_inside_an_operators_chunk_reaches_the_consumer(index_files):
    files = index_files(15) + ["/nonexistent/missing.jpg"]

    @pipeline_def(batch_size=16, num_threads=4, device_id=None, prefetch_queue_depth=2)
    def reader():
        data, _ = fn.readers.file(files=files, name="files")
        return data

    pipe = reader()
    with pytest.raises(FileNotFoundError) as info:
        pipe.run()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "'/nonexistent/missing.jpg'" in notes and "fn.readers.file (instance 'files')" in notes
    assert any(frame.name == "read" for frame in info.traceback)  # the chunk function's own frame
    pipe.close()
