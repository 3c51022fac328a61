"""Tests for jaxdali.plugin.pytorch.experimental.proxy: DALIServer, its proxy and DataLoader.

Cases K1-K6 of spec/dali_jax_plugin.md §8, plus the lifetime rules: the server thread runs only
while a loader needs it, worker processes exit, and nothing is left running afterwards.
"""

import collections
import gc
import inspect
import multiprocessing
import threading
import traceback
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.utils.data import default_collate  # noqa: E402

from jaxdali import fn, pipeline_def  # noqa: E402
from jaxdali.plugin.pytorch.experimental import proxy as dali_proxy  # noqa: E402
from jaxdali.plugin.pytorch.experimental.proxy import DALIServer, DataLoader  # noqa: E402

# Forking workers from a process where JAX has started its threads makes JAX warn; harmless here.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")


@pytest.fixture
def pipes():
    """Collects the pipelines a test makes and closes them afterwards."""
    made = []
    yield made
    for p in made:
        p.close()


@pipeline_def(batch_size=4, num_threads=1, device_id=None)
def square_pipe():
    x = fn.external_source(name="x")
    return x * x


@pipeline_def(batch_size=4, num_threads=1, device_id=None)
def two_input_pipe():
    a = fn.external_source(name="a")
    b = fn.external_source(name="b")
    return a + b, b - a


@pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=1234)
def noisy_pipe():
    x = fn.external_source(name="x")
    return x + fn.random.uniform(range=[0.0, 1.0])


class ProxyDataset(torch.utils.data.Dataset):
    """``(i, proxy(i))`` for i in range(n)."""

    def __init__(self, proxy, n, make=lambda i: i):
        self.proxy, self.n, self.make = proxy, n, make

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i, self.proxy(self.make(i))


def proxy_threads():
    return [t for t in threading.enumerate() if t.name.startswith("jaxdali-proxy")]


def as_lists(batches):
    return [tuple(t.tolist() for t in batch) for batch in batches]


def children_left(timeout=10.0):
    """Child processes still alive after giving each ``timeout`` seconds to exit.

    torch's worker shutdown joins each worker for a few seconds and then only terminates a slow one
    without waiting for it, so on a busy machine a worker can still be exiting when the iterator is
    done; a worker that never exits still fails the check.
    """
    for child in multiprocessing.active_children():
        child.join(timeout)
    return multiprocessing.active_children()


def join_queue_feeders():
    """torch's index queues stop their feeder threads asynchronously after close(); wait for them."""
    for t in threading.enumerate():
        if t.name == "QueueFeederThread":
            t.join(10)


# -- K1, K2: the proxy's signature and the server's arguments -------------------------------------------


def test_several_inputs_give_a_keyword_only_proxy(pipes):  # K1
    pipes.append(two_input_pipe())
    server = DALIServer(pipes[0])
    assert str(inspect.signature(server.proxy)) == "(*, a, b)"
    with pytest.raises(ValueError, match="too many positional arguments"):
        server.proxy(1, 2)
    samples = [server.proxy(a=np.float32(i), b=np.float32(10 * i)) for i in range(4)]
    assert all(isinstance(s, tuple) and len(s) == 2 for s in samples)
    batch = default_collate(samples)
    with server:
        total, diff = server.produce_data(batch)
    assert total.tolist() == [0, 11, 22, 33] and diff.tolist() == [0, 9, 18, 27]


def test_one_input_gives_a_positional_or_keyword_proxy(pipes):  # K2
    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    assert str(inspect.signature(server.proxy)) == "(x)"
    refs = [server.proxy(1), server.proxy(x=2), server.proxy(3)]
    assert all(isinstance(r, dali_proxy.DALIOutputSampleRef) for r in refs)
    batch = default_collate(refs)
    assert isinstance(batch, dali_proxy.DALIOutputBatchRef)
    with server:
        assert server.produce_data(batch).tolist() == [1, 4, 9]


def test_server_rejects_a_non_pipeline():  # K2
    with pytest.raises(TypeError, match="Expected an NVIDIA DALI pipeline, got: "):
        DALIServer(lambda x: x)


def test_server_rejects_a_pipeline_without_inputs(index_files, pipes):  # K2
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def reader_only():
        data, _ = fn.readers.file(files=index_files(4))
        return data

    pipes.append(reader_only())
    with pytest.raises(RuntimeError, match="The provided pipeline doesn't have any inputs"):
        DALIServer(pipes[0])


def test_produce_data_needs_a_running_server(pipes):
    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    batch = default_collate([server.proxy(1)])
    with pytest.raises(RuntimeError, match="is not running"):
        server.produce_data(batch)


def test_produce_data_rejects_uncollated_samples(pipes):
    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    with server, pytest.raises(TypeError, match="uncollated sample placeholder"):
        server.produce_data([server.proxy(1)])


# -- collation checks -----------------------------------------------------------------------------------


def test_collating_samples_of_different_batches_fails(pipes):
    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    first = server.proxy(1)
    default_collate([first])  # closes the first batch
    second = server.proxy(2)
    with pytest.raises(RuntimeError, match="All samples should belong to the same batch"):
        default_collate([first, second])


def test_collating_samples_out_of_order_fails(pipes):
    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    refs = [server.proxy(i) for i in range(3)]
    with pytest.raises(RuntimeError, match="Unexpected sample order"):
        default_collate([refs[1], refs[0], refs[2]])


# -- K3: the proxy DataLoader -------------------------------------------------------------------------


@pytest.mark.slow
def test_dataloader_with_workers_yields_pipeline_outputs_every_epoch(pipes):  # K3
    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    loader = DataLoader(server, ProxyDataset(server.proxy, 10), batch_size=4, num_workers=2, drop_last=True)
    for _ in range(3):
        it = iter(loader)
        assert not server.is_running
        first = next(it)
        assert server.is_running  # started on demand by the first batch
        rest = list(it)
        assert as_lists([first, *rest]) == [([0, 1, 2, 3], [0, 1, 4, 9]), ([4, 5, 6, 7], [16, 25, 36, 49])]
        # The epoch's end stopped the server it started and the worker processes.
        assert not server.is_running and proxy_threads() == []
        assert children_left() == []
        assert not any(w.is_alive() for w in it._workers)


def test_dataloader_in_the_main_process(pipes):
    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    loader = DataLoader(server, ProxyDataset(server.proxy, 6), batch_size=4, num_workers=0)
    assert as_lists(loader) == [([0, 1, 2, 3], [0, 1, 4, 9]), ([4, 5], [16, 25])]
    assert as_lists(loader) == [([0, 1, 2, 3], [0, 1, 4, 9]), ([4, 5], [16, 25])]
    assert proxy_threads() == []


@pytest.mark.slow
def test_plain_torch_dataloader_with_produce_data(pipes):
    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    loader = torch.utils.data.DataLoader(ProxyDataset(server.proxy, 8), batch_size=4, num_workers=2)
    with server:
        batches = [server.produce_data(b) for b in loader]
    assert as_lists(batches) == [([0, 1, 2, 3], [0, 1, 4, 9]), ([4, 5, 6, 7], [16, 25, 36, 49])]
    assert proxy_threads() == []


@pytest.mark.slow
def test_persistent_workers_and_multi_output_dicts(pipes):
    pipes.append(two_input_pipe())
    server = DALIServer(pipes[0])

    class Pairs(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            total, diff = server.proxy(a=np.int32(i), b=np.int32(2 * i))
            return {"index": i, "out": (total, diff)}

    loader = DataLoader(server, Pairs(), batch_size=4, num_workers=2, persistent_workers=True)
    for _ in range(2):
        batches = list(loader)
        assert [b["index"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]
        assert [b["out"][0].tolist() for b in batches] == [[0, 3, 6, 9], [12, 15, 18, 21]]
        assert [b["out"][1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]
        assert proxy_threads() == []
    del loader
    gc.collect()
    assert children_left() == []


@pytest.mark.slow
def test_abandoned_epoch_stops_everything_and_the_next_epoch_is_complete(pipes):
    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    loader = DataLoader(server, ProxyDataset(server.proxy, 12), batch_size=4, num_workers=2)
    it = iter(loader)
    next(it)
    del it
    gc.collect()
    assert not server.is_running and proxy_threads() == [] and children_left() == []
    assert as_lists(loader) == [([0, 1, 2, 3], [0, 1, 4, 9]), ([4, 5, 6, 7], [16, 25, 36, 49]),
                                ([8, 9, 10, 11], [64, 81, 100, 121])]


@pytest.mark.slow
def test_batch_larger_than_the_pipeline_fails_in_the_worker(pipes):
    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    loader = DataLoader(server, ProxyDataset(server.proxy, 10), batch_size=5, num_workers=2)
    it = iter(loader)
    with pytest.raises(ValueError, match="does not fit the pipeline's batch_size=4") as info:
        next(it)
    # torch keeps iterating after a worker error; the iterator's frames in the traceback hold it.
    traceback.clear_frames(info.tb)
    del it, info
    assert proxy_threads() == [] and children_left() == []


# -- K4: determinism ----------------------------------------------------------------------------------


def _noisy_epoch(deterministic, num_workers):
    pipe = noisy_pipe()
    try:
        server = DALIServer(pipe, deterministic=deterministic)
        dataset = ProxyDataset(server.proxy, 16, make=lambda i: np.float32(i))
        loader = DataLoader(server, dataset, batch_size=4, num_workers=num_workers, shuffle=True,
                            generator=torch.Generator().manual_seed(7))
        return as_lists(loader)
    finally:
        pipe.close()


@pytest.mark.slow
def test_deterministic_server_repeats_random_augmentations_exactly():  # K4
    runs = [_noisy_epoch(deterministic=True, num_workers=2) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    indices = sorted(i for idx, _ in runs[0] for i in idx)
    assert indices == list(range(16))
    for idx, noisy in runs[0]:
        noise = np.array(noisy) - np.array(idx)
        assert np.all((noise >= 0) & (noise < 1))


@pytest.mark.slow
def test_non_deterministic_server_pairs_every_sample_with_its_output():  # K4
    for idx, noisy in _noisy_epoch(deterministic=False, num_workers=2):
        noise = np.array(noisy) - np.array(idx)
        assert np.all((noise >= 0) & (noise < 1))


# -- K5: errors ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_pipeline_error_reaches_the_caller_with_its_cause(pipes):  # K5
    @pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def bad_crop():
        image = fn.external_source(name="image", layout="HWC")
        return fn.crop(image, crop=(8, 8))  # larger than the 4x4 images: out of bounds

    pipes.append(bad_crop())
    server = DALIServer(pipes[0])
    dataset = ProxyDataset(server.proxy, 8, make=lambda i: np.zeros((4, 4, 3), np.uint8))
    loader = DataLoader(server, dataset, batch_size=4, num_workers=2)
    it = iter(loader)
    with pytest.raises(RuntimeError, match="Critical error in pipeline: ") as info:
        next(it)
    assert isinstance(info.value.__cause__, ValueError) and "out of bounds" in str(info.value.__cause__)
    # The failed iterator has shut its workers and the server down already.
    assert proxy_threads() == [] and children_left() == []
    with pytest.raises(RuntimeError, match="stopped after a pipeline error"):
        next(it)
    # A new epoch reports the pipeline's failure at once.
    with pytest.raises(RuntimeError, match="Critical error in pipeline: "):
        next(iter(loader))


# -- K6: produce_data walks any structure ------------------------------------------------------------


Pair = collections.namedtuple("Pair", ["index", "value"])


class Holder:
    def __init__(self, value):
        self.value = value
        self.me = self


def test_produce_data_replaces_refs_everywhere_and_survives_cycles(pipes):  # K6
    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    ref = default_collate([server.proxy(2), server.proxy(3)])
    cyclic = [ref]
    cyclic.append(cyclic)
    holder = Holder(ref)
    batch = {"list": cyclic, "pair": Pair(1, ref), "holder": holder, "plain": (1, "a")}
    batch["self"] = batch
    with server:
        out = server.produce_data(batch)
    assert out is batch
    assert out["list"][0].tolist() == [4, 9] and out["list"][1] is cyclic
    assert isinstance(out["pair"], Pair) and out["pair"].value.tolist() == [4, 9]
    assert out["holder"].value.tolist() == [4, 9] and out["holder"].me is holder
    assert out["plain"] == (1, "a") and out["self"] is batch


# -- lifetime -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_nothing_is_left_running_after_the_server_and_pipeline_are_gone():
    gc.collect()
    join_queue_feeders()
    before = {t.ident for t in threading.enumerate()}
    pipe = square_pipe()
    server = DALIServer(pipe)
    loader = DataLoader(server, ProxyDataset(server.proxy, 8), batch_size=4, num_workers=2)
    assert len(list(loader)) == 2
    server.start_thread()  # a server left running is stopped when it is garbage-collected
    assert len(proxy_threads()) == 1
    del server, loader
    gc.collect()  # the finalizer signals the server thread to stop; it exits on its own shortly after
    pipe.close()
    join_queue_feeders()
    for thread in proxy_threads():
        thread.join(10)
    assert [(t.name, t.daemon) for t in threading.enumerate() if t.ident not in before] == []
    assert children_left() == []


def test_stop_thread_is_idempotent(pipes):
    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    server.stop_thread()
    server.start_thread()
    server.start_thread()
    assert len(proxy_threads()) == 1
    server.stop_thread()
    server.stop_thread()
    assert proxy_threads() == []


def test_dataloader_needs_a_server():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TypeError, match="Expected a DALIServer"):
            DataLoader([1, 2, 3], batch_size=2)


@pytest.mark.slow
def test_a_worker_killed_while_sending_makes_stop_fail_instead_of_hanging(pipes, monkeypatch):
    """A worker process killed while it holds the request queue's write lock leaves the lock taken;
    stopping the server then raises a TimeoutError that says so, instead of blocking forever."""
    import os
    import signal

    pipes.append(square_pipe())
    server = DALIServer(pipes[0])
    server.start_thread()
    lock = server.proxy.channel._queue._wlock
    ctx = multiprocessing.get_context("fork")

    def die_holding(lock):
        lock.acquire()
        os.kill(os.getpid(), signal.SIGKILL)

    worker = ctx.Process(target=die_holding, args=(lock,))
    worker.start()
    worker.join(10)
    assert worker.exitcode == -signal.SIGKILL
    monkeypatch.setattr(dali_proxy, "_STOP_TIMEOUT_S", 0.5)
    with pytest.raises(TimeoutError, match="could not be told to stop.*killed while sending"):
        server.stop_thread()
    lock.release()  # what no real run can do: let the stop message through and clean up
    for thread in proxy_threads():
        thread.join(10)
    assert proxy_threads() == []
