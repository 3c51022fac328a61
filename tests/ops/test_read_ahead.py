"""Read-ahead: batches fetched ahead on I/O threads are exactly the batches the reader then produces, an
unexpected batch is fetched afresh, errors surface at their batch, and readers give the same data with
it as without it, across epochs, checkpoints and re-sharding."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from jaxdali import config, fn, pipeline_def
from jaxdali.ops.readers.read_ahead import ReadAhead


def _io_threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"jaxdali-read-{name}")]


def test_scheduled_batches_are_taken_and_unexpected_ones_fetched_afresh():
    fetched = []
    lock = threading.Lock()

    def fetch(i):
        with lock:
            fetched.append(i)
        return i * 10

    ahead = ReadAhead(fetch, depth=2, name="unit")
    ahead.schedule([np.array([1, 2]), np.array([3, 4])])
    assert ahead.take(np.array([1, 2])) == [10, 20]
    ahead.schedule([np.array([3, 4]), np.array([5, 6])])  # [3, 4] is already in flight
    assert ahead.take(np.array([3, 4])) == [30, 40]
    assert ahead.take(np.array([7, 8])) == [70, 80]  # not the scheduled [5, 6]: dropped, fetched now
    ahead.close()
    assert sorted(fetched) == [1, 2, 3, 4, 5, 6, 7, 8]  # nothing fetched twice
    ahead.close()  # idempotent
    assert not _io_threads("unit")


def test_fetch_error_surfaces_at_its_batch_only():
    def fetch(i):
        if i == 3:
            raise OSError(f"cannot read sample {i}")
        return i

    ahead = ReadAhead(fetch, depth=1, name="errors")
    ahead.schedule([np.array([3])])
    assert ahead.take(np.array([1, 2])) == [1, 2]  # the failing batch was scheduled but is not this one
    ahead.schedule([np.array([3])])
    with pytest.raises(OSError, match="cannot read sample 3"):
        ahead.take(np.array([3]))
    ahead.close()


@pytest.fixture
def read_ahead_mode():
    before = config.get("reader_read_ahead")
    yield lambda mode: config.update("reader_read_ahead", mode)
    config.update("reader_read_ahead", before)


def _numpy_pipe(files, checkpoint=None, name="Reader", **args):
    @pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=5, enable_checkpointing=True)
    def p():
        return fn.readers.numpy(files=files, name=name, **args)

    pipe = p(checkpoint=checkpoint)
    pipe.build()
    return pipe


def _values(pipe, batches):
    return [[int(np.array(s)[0]) for s in pipe.run()[0].samples()] for _ in range(batches)]


def test_resume_on_another_layout_reads_the_same_with_read_ahead(tmp_path, read_ahead_mode):
    files = []
    for k in range(13):
        files.append(str(tmp_path / f"{k:02d}.npy"))
        np.save(files[-1], np.array([k], np.int64))
    first = _numpy_pipe(files, num_shards=2, shard_id=1, pad_last_batch=True, shuffle_after_epoch=True)
    _values(first, 1)
    checkpoint = first.checkpoint()
    got = {}
    for mode in ("never", "always"):
        read_ahead_mode(mode)
        resumed = _numpy_pipe(files, checkpoint=checkpoint, num_shards=1, pad_last_batch=True,
                              shuffle_after_epoch=True)
        got[mode] = _values(resumed, 9)  # the rest of the resumed epoch, then whole epochs on one shard
    assert got["always"] == got["never"]


def test_closing_the_pipeline_stops_the_io_threads(tmp_path, read_ahead_mode):
    read_ahead_mode("always")
    path = str(tmp_path / "a.npy")
    np.save(path, np.arange(3))
    pipe = _numpy_pipe([path], name="Closing")
    pipe.run()
    assert _io_threads("Closing")
    pipe.close()
    assert not _io_threads("Closing")
