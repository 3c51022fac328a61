"""Lifetimes of pipelines and iterators: close(), context managers, no thread or memory left behind.

Threads are compared with those alive before the pipelines were made (threads of earlier tests may
end meanwhile); the process-wide worker pool is warmed up first (its threads live for the whole
process by design).
"""

from __future__ import annotations

import gc
import pathlib
import threading
import time
import weakref

import numpy as np
import pytest

from jaxdali import fn, pipeline_def
from jaxdali.pipeline.executor import Prefetcher
from jaxdali.plugin.jax import DALIGenericIterator as JaxIterator
from jaxdali.plugin.jax import data_iterator
from jaxdali.plugin.pytorch import DALIGenericIterator as TorchIterator


def _photos(flowers_root: str, n: int) -> list[str]:
    return sorted(str(p) for p in pathlib.Path(flowers_root).glob("*/*.jpg"))[:n]


@pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=1)
def _photo_pipeline(files):
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
    return fn.resize(fn.decoders.image(jpegs), size=(32, 32)), labels


def _failing_source(info):
    if info.iteration == 1:
        raise ValueError("bad sample in batch 1")
    return [np.zeros((1000,), np.uint8) for _ in range(2)]


@pipeline_def(batch_size=2, num_threads=2, device_id=None, seed=1)
def _failing_pipeline():
    return fn.external_source(_failing_source, batch_info=True)


def _new_threads(baseline: set) -> list[str]:
    return [t.name for t in threading.enumerate() if t not in baseline]


def _settled_new_threads(baseline: set, patience_s: float = 20.0) -> list[str]:
    """Threads started since ``baseline`` once there are none, or after ``patience_s`` (a hang guard:
    threads that were told to stop leave within milliseconds)."""
    deadline = time.monotonic() + patience_s
    while _new_threads(baseline) and time.monotonic() < deadline:
        time.sleep(0.01)
    return _new_threads(baseline)


@pytest.fixture
def baseline(flowers_root) -> set:
    """The threads alive with the worker pool warmed up and no pipeline of this test alive."""
    pipe = _photo_pipeline(_photos(flowers_root, 8))
    pipe.run()
    pipe.close()
    gc.collect()
    return set(threading.enumerate())


@pytest.mark.slow
def test_a_pipeline_that_raised_is_freed_with_its_threads(baseline):
    # Issue 15 defect 1: the queued error's traceback kept the pipeline reachable from its own
    # producer threads; each round leaked 2 threads and the pipeline's memory.
    refs = []
    for _ in range(10):
        pipe = _failing_pipeline()
        pipe.run()
        with pytest.raises(ValueError, match="bad sample"):
            pipe.run()
        refs.append(weakref.ref(pipe))
        del pipe
        gc.collect()
    assert _settled_new_threads(baseline) == []
    assert [r() for r in refs] == [None] * 10


def test_after_an_error_later_runs_say_so_and_close_releases_everything(baseline):
    pipe = _failing_pipeline()
    pipe.run()
    with pytest.raises(ValueError, match="bad sample"):
        pipe.run()
    with pytest.raises(RuntimeError, match="stopped after an earlier error") as later:
        pipe.run()
    assert isinstance(later.value.__cause__, ValueError)
    pipe.close()
    assert _new_threads(baseline) == []  # close() waits for the producers
    with pytest.raises(RuntimeError, match=r"Pipeline\(batch_size=2.* is closed"):
        pipe.run()


def _jax_iterator(files):
    return JaxIterator([_photo_pipeline(files)], ["images", "labels"], reader_name="Reader")


def _torch_iterator(files):
    return TorchIterator([_photo_pipeline(files)], ["images", "labels"], reader_name="Reader")


def _peekable_iterator(files):
    from jaxdali.plugin.jax.clu import DALIGenericPeekableIterator

    it = DALIGenericPeekableIterator([_photo_pipeline(files)], ["images", "labels"], reader_name="Reader")
    it.peek_async().result()  # starts its peek thread too
    return it


@data_iterator(output_map=["images", "labels"], reader_name="Reader")
def _decorated(files):
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), name="Reader")
    return fn.resize(fn.decoders.image(jpegs), size=(32, 32)), labels


def _decorated_iterator(files):
    return _decorated(files=files, batch_size=4, num_threads=2, device_id=None, seed=1)


ITERATORS = {"jax": _jax_iterator, "torch": _torch_iterator, "peekable": _peekable_iterator,
             "data_iterator": _decorated_iterator}


@pytest.mark.parametrize("kind", sorted(ITERATORS))
def test_close_stops_threads_is_idempotent_and_next_then_names_the_iterator(kind, flowers_root, baseline):
    with ITERATORS[kind](_photos(flowers_root, 16)) as it:
        next(it)
        assert _new_threads(baseline)
    assert _new_threads(baseline) == []
    it.close()
    with pytest.raises(RuntimeError, match=f"{type(it).__name__} is closed"):
        next(it)


@pytest.mark.parametrize("kind", sorted(ITERATORS))
def test_an_iterator_dropped_mid_epoch_stops_its_threads_without_garbage_collection(kind, flowers_root, baseline):
    gc.disable()
    try:
        it = ITERATORS[kind](_photos(flowers_root, 16))
        for k, _ in enumerate(it):
            if k == 1:
                break
        assert _new_threads(baseline)
        del it
        assert _settled_new_threads(baseline) == []
    finally:
        gc.enable()


def test_close_cancels_work_in_progress_and_closes_operators_after_the_producers_stop():
    events = []
    started, release = threading.Event(), threading.Event()

    def produce():
        started.set()
        release.wait()
        events.append("batch abandoned")
        raise RuntimeError("cancelled")

    def cancel():
        events.append("cancel")
        release.set()

    prefetcher = Prefetcher(produce, "order", cancel=cancel, on_stop=lambda: events.append("operators closed"))
    prefetcher.schedule(1)
    assert started.wait(10)
    prefetcher.close()
    assert events == ["cancel", "batch abandoned", "operators closed"]
    prefetcher.close()
    assert events.count("operators closed") == 1


def test_close_ends_a_producer_waiting_for_fed_data(baseline):
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def fed():
        return fn.external_source(name="data", blocking=True)

    pipe = fed()
    pipe.schedule_run()  # the producer now waits for feed_input
    pipe.close()
    assert _new_threads(baseline) == []


@pytest.mark.slow
def test_200_create_iterate_close_cycles_with_failures_leave_threads_and_memory_flat(flowers_root, tmp_path):
    photos = _photos(flowers_root, 16)
    corrupt = tmp_path / "corrupt.jpg"
    corrupt.write_bytes(pathlib.Path(photos[0]).read_bytes()[:300])
    with_corrupt = photos[:7] + [str(corrupt)] + photos[7:]
    makers = [_jax_iterator, _torch_iterator]
    failures = []

    def cycle(i: int) -> None:
        failing = i % 4 == 3
        it = makers[i % 2](with_corrupt if failing else photos)
        try:
            for k, _ in enumerate(it):
                if k == 2:
                    break
        except Exception as e:  # noqa: BLE001 - the corrupt file's decode error
            failures.append(str(e))
        finally:
            it.close()

    for i in range(20):  # warm-up: allocator pools, the worker pool, JAX
        cycle(i)
    gc.collect()
    threads = set(threading.enumerate())
    for i in range(100):
        cycle(i)
    gc.collect()
    # The allocator's arenas may still grow over the first cycles (more so on a loaded machine, where
    # more threads overlap); a leak grows in every cycle, so the second hundred must add nothing.
    rss = _rss_bytes()
    for i in range(100, 200):
        cycle(i)
    gc.collect()
    assert _new_threads(threads) == []
    assert _rss_bytes() < rss * 1.03
    assert len(failures) == 5 + 50 and all("corrupt.jpg" in f for f in failures)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
