"""``fn.external_source``: every source kind, multiple outputs, type checks, epochs and cycling,
variable batch sizes, worker processes, foreign array types and the feeding options.

Rows marked "DALI 2.4" were produced by running the same sources through NVIDIA DALI 2.4 and are
hard-coded here; the tests do not import DALI. (Feeding by name with ``run(name=...)``/``feed_input``
and the basic end-of-epoch/reset cycle are in tests/pipeline/test_pipeline.py.)
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import threading

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.schema import OpArgumentError

# JAX (already running in this test process) warns about every os.fork(). The forked workers of parallel
# sources only call the Python source and NumPy, never JAX, which DALI's default "fork" method relies on too.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")


def make_pipe(batch_size=2, depth=1, **pipe_kwargs):
    """A decorator turning a graph function into a built pipeline with the given options."""

    def wrap(graph):
        @pipeline_def(batch_size=batch_size, num_threads=1, device_id=None, prefetch_queue_depth=depth,
                      **pipe_kwargs)
        def p():
            out = graph()
            return tuple(out) if isinstance(out, (list, tuple)) else out

        return p()

    return wrap


def values(out) -> list:
    """One output batch as nested lists (sample by sample, so ragged batches work)."""
    return [np.asarray(out.at(i)).tolist() for i in range(len(out))]


def epoch(pipe, limit=10) -> list:
    """The first output of every batch until StopIteration (at most ``limit`` batches)."""
    got = []
    for _ in range(limit):
        try:
            got.append(values(pipe.run()[0]))
        except StopIteration:
            return got
    return got + ["no end"]


def epochs(pipe, n=2, limit=10) -> list:
    result = []
    for _ in range(n):
        result.append(epoch(pipe, limit))
        pipe.reset()
    return result


# -- source kinds ---------------------------------------------------------------------------------------------

def test_callable_without_arguments_returns_whole_batches():
    calls = []

    def source():
        calls.append(1)
        return np.full((2, 3), len(calls), np.uint8)

    pipe = make_pipe()(lambda: fn.external_source(source=source))
    assert [values(pipe.run()[0]) for _ in range(3)] == [[[k] * 3] * 2 for k in (1, 2, 3)]
    assert len(calls) == 3  # once per batch


def test_callable_with_one_argument_gets_the_iteration_in_the_epoch():
    def source(i):
        if i == 3:
            raise StopIteration
        return [np.array([i], np.int32)] * 2

    pipe = make_pipe()(lambda: fn.external_source(source=source))
    assert epochs(pipe) == [[[[0], [0]], [[1], [1]], [[2], [2]]]] * 2  # restarts from 0 after reset


def test_batch_info_gives_iteration_and_epoch():
    def source(info: types.BatchInfo):
        assert isinstance(info, types.BatchInfo)
        if info.iteration >= 2:
            raise StopIteration
        return [np.array([info.iteration, info.epoch_idx], np.int32)] * 2

    pipe = make_pipe()(lambda: fn.external_source(source=source, batch_info=True))
    # DALI 2.4
    assert epochs(pipe, 3) == [[[[0, e]] * 2, [[1, e]] * 2] for e in range(3)]


def test_per_sample_callable_gets_sample_info_and_a_mid_batch_stop_drops_the_partial_batch():
    def source(info: types.SampleInfo):
        if info.idx_in_epoch >= 7:
            raise StopIteration
        return np.array([info.idx_in_epoch, info.idx_in_batch, info.iteration, info.epoch_idx], np.int32)

    pipe = make_pipe(batch_size=3)(lambda: fn.external_source(source=source, batch=False))
    # DALI 2.4: batches [0 1 2] and [3 4 5]; sample 6 is dropped when sample 7 ends the epoch.
    assert epochs(pipe) == [
        [[[0, 0, 0, e], [1, 1, 0, e], [2, 2, 0, e]], [[3, 0, 1, e], [4, 1, 1, e], [5, 2, 1, e]]] for e in (0, 1)]


def test_per_sample_callable_without_arguments_is_called_batch_size_times():
    calls = []

    def source():
        calls.append(1)
        return np.array([len(calls)], np.int16)

    pipe = make_pipe(batch_size=3)(lambda: fn.external_source(source=source, batch=False))
    assert values(pipe.run()[0]) == [[1], [2], [3]]
    assert pipe.run()[0].dtype == types.INT16


BATCHES = [[np.array([i, j], np.int32) for j in range(2)] for i in range(3)]


def test_iterable_of_batches_ends_and_stays_ended_without_cycle():
    pipe = make_pipe()(lambda: fn.external_source(source=BATCHES))
    # DALI 2.4: with cycle="no" the iterable is not restarted by reset().
    assert epochs(pipe) == [[[[0, 0], [0, 1]], [[1, 0], [1, 1]], [[2, 0], [2, 1]]], []]


def test_iterable_of_samples_with_batch_false():
    samples = [np.array([k], np.int32) for k in range(5)]
    pipe = make_pipe()(lambda: fn.external_source(source=samples, batch=False))
    assert epochs(pipe) == [[[[0], [1]], [[2], [3]]], []]  # DALI 2.4: sample 4 is dropped


def test_generator_function_is_called_to_start_iterating():
    starts = []

    def gen():
        starts.append(1)
        for i in range(2):
            yield [np.array([i], np.int32)] * 2

    pipe = make_pipe()(lambda: fn.external_source(source=gen))
    assert epochs(pipe) == [[[[0], [0]], [[1], [1]]], []]
    assert len(starts) == 1


def test_generator_object_is_an_iterable():
    g = (np.full((2, 1), i, np.int32) for i in range(2))
    pipe = make_pipe()(lambda: fn.external_source(source=g))
    assert epoch(pipe) == [[[0], [0]], [[1], [1]]]


def test_named_source_fed_by_node_with_a_layout():
    holder = {}

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def p():
        holder["x"] = fn.external_source(name="x")
        holder["y"] = fn.external_source(name="y", layout="AB")
        return holder["x"], holder["y"]

    pipe = p()
    pipe.feed_input(holder["x"], np.zeros((2, 2, 3), np.uint8), layout="CD")
    pipe.feed_input(holder["y"], [np.ones((1, 1), np.uint8)] * 2)
    x, y = pipe.run()
    assert (x.layout(), x.shape()) == ("CD", [(2, 3), (2, 3)])
    assert (y.layout(), values(y)) == ("AB", [[[1]], [[1]]])
    pipe.feed_input("x", np.zeros((2, 2, 3), np.uint8))
    pipe.feed_input("y", np.zeros((2, 2, 3), np.uint8), layout="CD")
    # DALI 2.4: Expected data with layout: "AB" and got: "CD".
    with pytest.raises(ValueError, match="output 0 was declared with layout 'AB' but the data was fed with "
                                         "layout 'CD'"):
        pipe.run()


def test_feeding_a_source_that_has_a_callback_is_an_error():
    pipe = make_pipe()(lambda: fn.external_source(source=lambda: [np.zeros(1)] * 2, name="cb"))
    # DALI 2.4 wording
    with pytest.raises(RuntimeError, match="Cannot use `feed_input` on the external source 'cb' with a `source` "
                                           "argument specified."):
        pipe.feed_input("cb", np.zeros((2, 1)))


@pytest.mark.parametrize("source,message", [
    (lambda a, b: None, "a callable source must take 0 or 1 arguments, '<lambda>' takes 2"),
    (5, "'source' must be a callable, an iterable or a generator function, got int"),
])
def test_unusable_sources_are_rejected(source, message):
    with pytest.raises(OpArgumentError, match=message):
        make_pipe()(lambda: fn.external_source(source=source)).build()


# -- multiple outputs -------------------------------------------------------------------------------------------

def test_num_outputs_splits_batches_and_samples():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def p():
        a, b = fn.external_source(source=lambda: (np.zeros((2, 2, 2), np.uint8), np.ones((2,), np.float32)),
                                  num_outputs=2, dtype=[types.UINT8, types.FLOAT], layout=["AB", ""])
        c, d = fn.external_source(source=lambda info: (np.array([info.idx_in_batch], np.int32),
                                                       np.float32(info.idx_in_epoch)),
                                  num_outputs=2, batch=False)
        return a, b, c, d

    pipe = p()
    pipe.run()
    a, b, c, d = pipe.run()
    assert (a.dtype, a.layout(), a.shape()) == (types.UINT8, "AB", [(2, 2), (2, 2)])
    assert (b.dtype, b.layout(), b.shape()) == (types.FLOAT, "", [(), ()])
    assert values(c) == [[0], [1]] and values(d) == [2.0, 3.0]  # DALI 2.4


def test_num_outputs_with_a_generator():
    def gen():
        yield np.zeros((2, 1), np.uint8), [np.ones(3, np.int32)] * 2

    pipe = make_pipe()(lambda: fn.external_source(source=gen, num_outputs=2))
    a, b = pipe.run()
    assert values(a) == [[0], [0]] and values(b) == [[1, 1, 1]] * 2


@pytest.mark.parametrize("returned,message", [
    ((np.zeros((2, 1)),), r"with num_outputs=2 the source must return a tuple of 2 batches, got 1"),
    (np.zeros((2, 1)), r"with num_outputs=2 the source must return a tuple of 2 batches, got ndarray"),
])
def test_num_outputs_needs_a_tuple_of_that_length(returned, message):
    pipe = make_pipe()(lambda: fn.external_source(source=lambda: returned, num_outputs=2))
    with pytest.raises(TypeError, match=message):
        pipe.run()


def test_per_sample_num_outputs_needs_tuples():
    pipe = make_pipe()(lambda: fn.external_source(source=lambda info: np.zeros(1), num_outputs=2, batch=False))
    with pytest.raises(TypeError, match=r"each sample must be a tuple of 2 arrays \(or an array whose first axis holds "
                                        r"them\); sample 0 is an array of shape \(1,\)"):
        pipe.run()


def test_per_output_lists_must_match_num_outputs():
    with pytest.raises(OpArgumentError, match="'dtype' lists 1 values for 2 outputs"):
        make_pipe()(lambda: fn.external_source(source=lambda: (np.zeros(2), np.zeros(2)), num_outputs=2,
                                               dtype=[types.FLOAT])).build()


# -- declared dtype, ndim and layout ------------------------------------------------------------------------------

def test_declared_dtype_is_checked_every_batch():
    data = iter([np.zeros((2, 1), np.uint8), np.zeros((2, 1), np.float32)])
    pipe = make_pipe()(lambda: fn.external_source(source=lambda: next(data), dtype=types.UINT8, name="img"))
    assert pipe.run()[0].dtype == types.UINT8
    with pytest.raises(TypeError, match=r"'img'\): output 0 was declared with dtype=DALIDataType.UINT8 but the "
                                        r"source returned DALIDataType.FLOAT data"):
        pipe.run()


def test_declared_ndim_is_checked():
    pipe = make_pipe()(lambda: fn.external_source(source=lambda: np.zeros((2, 3), np.uint8), ndim=2))
    with pytest.raises(ValueError, match="declared with ndim=2 but the source returned samples with 1 dimensions"):
        pipe.run()
    ok = make_pipe()(lambda: fn.external_source(source=lambda: np.zeros((2, 3, 4), np.uint8), ndim=2))
    assert ok.run()[0].shape() == [(3, 4), (3, 4)]


def test_layout_is_set_and_must_fit_the_data():
    ok = make_pipe()(lambda: fn.external_source(source=lambda: np.zeros((2, 3, 4), np.uint8), layout="HW"))
    assert ok.run()[0].layout() == "HW"
    bad = make_pipe()(lambda: fn.external_source(source=lambda: np.zeros((2, 3), np.uint8), layout="HW"))
    with pytest.raises(ValueError, match="layout 'HW' of output 0 does not fit samples with 1 dimensions"):
        bad.run()
    with pytest.raises(OpArgumentError, match="layout 'HW' of output 0 does not match ndim=3"):
        make_pipe()(lambda: fn.external_source(source=lambda: np.zeros((2, 3)), layout="HW", ndim=3)).build()


@pytest.mark.parametrize("batch,message", [
    ([np.zeros(2, np.uint8), np.zeros(2, np.int32)], r"same dtype and number of dimensions, got dtypes "
                                                     r"\['int32', 'uint8'\]"),
    ([np.zeros(2, np.uint8), np.zeros((2, 1), np.uint8)], r"ndims \[1, 2\]"),
    (5, "a batch must be an array with a leading batch dimension or a list of samples, got a scalar 5"),
])
def test_inconsistent_batches_are_rejected(batch, message):
    pipe = make_pipe()(lambda: fn.external_source(source=lambda: batch))
    with pytest.raises(TypeError, match=message):
        pipe.run()


# -- cycling and epochs ------------------------------------------------------------------------------------------

def gen_two():
    for i in range(2):
        yield [np.array([i], np.int32)] * 2


@pytest.mark.parametrize("cycle", ["quiet", True])
def test_cycle_quiet_restarts_silently(cycle):
    for source in (BATCHES[:2], gen_two):
        pipe = make_pipe()(lambda: fn.external_source(source=source, cycle=cycle))
        got = [values(pipe.run()[0])[0] for _ in range(5)]
        assert got == [got[0], got[1]] * 2 + [got[0]] and got[0] != got[1]


def test_cycle_raise_ends_each_epoch_and_restarts_after_reset():
    for source in (BATCHES[:2], gen_two):
        pipe = make_pipe()(lambda: fn.external_source(source=source, cycle="raise"))
        first, second, third = epochs(pipe, 3)
        assert len(first) == 2 and first == second == third  # DALI 2.4


@pytest.mark.parametrize("cycle", ["no", False, None])
def test_cycle_no_ends_for_good(cycle):
    pipe = make_pipe()(lambda: fn.external_source(source=gen_two, cycle=cycle))
    assert [len(e) for e in epochs(pipe, 3)] == [2, 0, 0]


def test_cycle_needs_a_restartable_source():
    with pytest.raises(OpArgumentError, match="'cycle' needs an iterable or a generator function source"):
        make_pipe()(lambda: fn.external_source(source=lambda: [np.zeros(1)] * 2, cycle="quiet")).build()
    with pytest.raises(TypeError, match=r"cannot restart a generator object; pass the generator function itself "
                                        r"\(source=gen_two, not source=gen_two\(\)\)"):
        make_pipe()(lambda: fn.external_source(source=gen_two(), cycle="raise")).build()
    with pytest.raises(OpArgumentError, match="'cycle' must be one of None, False, True, 'no', 'quiet', 'raise', "
                                              "got 'bogus'"):
        make_pipe()(lambda: fn.external_source(source=BATCHES, cycle="bogus")).build()


def test_prefetched_batches_drain_before_the_epoch_ends():
    calls = []

    def source(i):
        calls.append(i)
        if i >= 2:
            raise StopIteration
        return np.full((2, 1), i, np.int32)

    pipe = make_pipe(depth=3)(lambda: fn.external_source(source=source))
    pipe.schedule_run()
    got = []
    with pytest.raises(StopIteration):
        for _ in range(5):
            got.append(values(pipe.share_outputs()[0]))
            pipe.release_outputs()
            pipe.schedule_run()
    assert got == [[[0], [0]], [[1], [1]]]
    assert pipe.empty()
    pipe.reset()
    pipe.schedule_run()
    assert values(pipe.share_outputs()[0]) == [[0], [0]]  # a new epoch from iteration 0
    assert sorted(set(calls)) == [0, 1, 2]


# -- variable batch sizes ----------------------------------------------------------------------------------------

def test_variable_batch_sizes_reach_downstream_operators():
    def graph():
        x = fn.external_source(source=lambda i: [np.full(2, i, np.float32)] * (i % 3 + 1))
        return x, x + fn.random.uniform(range=[0, 0]), fn.random.coin_flip()

    pipe = make_pipe(batch_size=3)(graph)
    sizes = [[len(o) for o in pipe.run()] for _ in range(4)]
    assert sizes == [[1, 1, 1], [2, 2, 2], [3, 3, 3], [1, 1, 1]]


def test_batch_larger_than_batch_size_is_an_error():
    pipe = make_pipe(batch_size=3)(lambda: fn.external_source(source=lambda: np.zeros((4, 2), np.uint8)))
    with pytest.raises(ValueError, match="returned a batch of 4 samples, more than the pipeline's batch_size=3"):
        pipe.run()


def test_sources_with_different_batch_sizes_in_one_iteration_fail():
    def graph():
        a = fn.external_source(source=lambda: [np.zeros(1)] * 2)
        b = fn.external_source(source=lambda: [np.zeros(1)] * 3)
        return a + b

    with pytest.raises(RuntimeError, match="Batch size has to be uniform across one iteration"):
        make_pipe(batch_size=3)(graph).run()


def test_sources_with_different_batch_sizes_fail_even_as_direct_outputs():
    def graph():
        a = fn.external_source(source=lambda: [np.zeros(1)] * 2)
        return a, fn.external_source(source=lambda: [np.zeros(1)] * 3)

    with pytest.raises(RuntimeError, match="Batch size has to be uniform across one iteration"):
        make_pipe(batch_size=3)(graph).run()


def test_empty_batch():
    pipe = make_pipe()(lambda: fn.external_source(source=lambda: []))
    out = pipe.run()[0]
    assert len(out) == 0 and out.shape() == []


# -- parallel sources ----------------------------------------------------------------------------------------------

def square(info: types.SampleInfo):
    """Module level, so that spawned worker processes can import it."""
    if info.idx_in_epoch >= 6:
        raise StopIteration
    return np.array([info.idx_in_epoch ** 2, info.epoch_idx, os.getpid()], np.int64)


def batch_of_iteration(info: types.BatchInfo):
    return [np.array([info.iteration, info.epoch_idx, os.getpid()], np.int64)] * 2


def parallel_pipe(source, start_method=None, batch_size=4, depth=1, **kwargs):
    """A pipeline with 2 worker processes, started with the default method ("fork") unless given."""
    method = {} if start_method is None else {"py_start_method": start_method}
    return make_pipe(batch_size=batch_size, depth=depth, py_num_workers=2, **method)(
        lambda: fn.external_source(source=source, parallel=True, **kwargs))


@pytest.mark.slow
def test_parallel_lambda_runs_in_two_forked_processes_at_once():
    barrier = multiprocessing.get_context("fork").Barrier(2, timeout=60)

    def source(info):
        barrier.wait()  # returns only when both worker processes are inside the callback
        return np.array([info.idx_in_epoch, os.getpid()], np.int64)

    pipe = parallel_pipe(lambda info: source(info))
    try:
        out = pipe.run()[0].as_array()
    finally:
        pipe.close()
    assert out[:, 0].tolist() == [0, 1, 2, 3]
    pids = set(out[:, 1].tolist())
    assert len(pids) == 2 and os.getpid() not in pids


@pytest.mark.slow
def test_parallel_module_level_function_with_spawn_and_epochs():
    pipe = parallel_pipe(square, "spawn", batch_size=3)
    try:
        got = epochs(pipe)
    finally:
        pipe.close()
    assert [[[s[:2] for s in b] for b in e] for e in got] == [
        [[[0, e], [1, e], [4, e]], [[9, e], [16, e], [25, e]]] for e in (0, 1)]
    assert os.getpid() not in {s[2] for e in got for b in e for s in b}


@pytest.mark.slow
def test_parallel_batch_callable_gets_batch_info():
    pipe = parallel_pipe(batch_of_iteration, batch=True, batch_info=True, batch_size=2)
    try:
        got = [values(pipe.run()[0]) for _ in range(2)]
    finally:
        pipe.close()
    assert [[s[:2] for s in b] for b in got] == [[[0, 0]] * 2, [[1, 0]] * 2]
    assert got[0][0][2] != os.getpid()


def test_parallel_generator_runs_in_one_dedicated_process():
    def gen():
        for i in range(3):
            yield [np.array([i, os.getpid()], np.int64)] * 2

    pipe = parallel_pipe(gen, batch=True, cycle="raise", batch_size=2)
    try:
        got = epochs(pipe)
    finally:
        pipe.close()
    assert [[b[0][0] for b in e] for e in got] == [[0, 1, 2], [0, 1, 2]]  # order kept, restarted
    pids = {b[0][1] for e in got for b in e}
    assert len(pids) == 1 and os.getpid() not in pids


def test_parallel_errors():
    with pytest.raises(OpArgumentError, match=r"parallel=True needs py_num_workers >= 1"):
        make_pipe(py_num_workers=0)(lambda: fn.external_source(source=square, parallel=True)).build()
    with pytest.raises(OpArgumentError, match=r"parallel=True needs a 'source'"):
        make_pipe()(lambda: fn.external_source(name="x", parallel=True)).build()
    with pytest.raises(OpArgumentError, match=r"an iterable source needs batch=True"):
        make_pipe()(lambda: fn.external_source(source=BATCHES, parallel=True)).build()


@pytest.mark.slow
def test_parallel_closures_and_lambdas_are_pickled_by_value_with_spawn():
    offset = 100

    def shifted(i):
        return i + offset

    def source(info):  # a local function calling another local function over a closure
        return np.array([shifted(info.idx_in_epoch), os.getpid()], np.int64)

    for callback in (source, lambda info: source(info)):
        pipe = parallel_pipe(callback, "spawn")
        try:
            out = pipe.run()[0].as_array()
        finally:
            pipe.close()
        assert out[:, 0].tolist() == [100, 101, 102, 103]
        assert os.getpid() not in set(out[:, 1].tolist())


class _Pickler:
    """A ``py_callback_pickler`` that is not jaxdali's: plain ``pickle``, which stores functions by name."""

    dumps = staticmethod(pickle.dumps)
    loads = staticmethod(pickle.loads)


@pytest.mark.slow
def test_parallel_spawn_uses_the_pipelines_py_callback_pickler():
    def run(pickler, source):
        pipe = make_pipe(batch_size=3, depth=1, py_num_workers=2, py_start_method="spawn",
                         py_callback_pickler=pickler)(lambda: fn.external_source(source=source, parallel=True))
        try:
            return pipe.run()[0].as_array()[:, 0].tolist()
        finally:
            pipe.close()

    assert run((_Pickler, {"protocol": 4}, {}), square) == [0, 1, 4]
    with pytest.raises(Exception, match="Can't pickle local object"):  # plain pickle cannot store a lambda
        run(_Pickler, lambda info: np.zeros(1))
    with pytest.raises(TypeError, match="py_callback_pickler must have 'dumps' and 'loads'"):
        make_pipe(py_callback_pickler=object())(lambda: fn.external_source(source=square, parallel=True))


def test_parallel_spawn_names_the_source_that_cannot_be_pickled():
    lock = threading.Lock()
    pipe = parallel_pipe(lambda info: np.zeros(1) if lock else None, "spawn")
    with pytest.raises(TypeError, match=r"external_source.*pickling it failed.*py_callback_pickler"):
        pipe.build()


@pytest.mark.slow
def test_closing_a_pipeline_stops_a_producer_waiting_on_the_workers():
    never = multiprocessing.get_context("fork").Event()

    def source(info):
        if info.iteration >= 1:
            never.wait(60)  # the prefetched second batch keeps the producer thread waiting
        return np.zeros(1, np.uint8)

    pipe = parallel_pipe(lambda info: source(info), depth=2)
    pipe.run()
    before = [t for t in threading.enumerate() if t.name.startswith("jaxdali-prefetch")]
    pipe.close()  # must end the wait instead of running into the prefetch thread's join timeout
    after = [t for t in threading.enumerate() if t.name.startswith("jaxdali-prefetch")]
    assert len(after) == len(before) - 1


# -- foreign arrays, copies and feeding options ------------------------------------------------------------------------

def test_torch_cpu_tensors_as_samples_and_batches():
    torch = pytest.importorskip("torch")
    samples = [torch.arange(3, dtype=torch.int16), torch.ones(3, dtype=torch.int16)]
    pipe = make_pipe()(lambda: (fn.external_source(source=lambda: samples),
                                fn.external_source(source=lambda: torch.full((2, 2), 1.5)),
                                fn.external_source(source=lambda info: torch.tensor([info.idx_in_batch]), batch=False)))
    a, b, c = pipe.run()
    assert a.dtype == types.INT16 and values(a) == [[0, 1, 2], [1, 1, 1]]
    assert b.dtype == types.FLOAT and values(b) == [[1.5, 1.5]] * 2
    assert c.dtype == types.INT64 and values(c) == [[0], [1]]


def test_jax_arrays_as_samples_and_batches():
    import jax.numpy as jnp

    pipe = make_pipe()(lambda: (fn.external_source(source=lambda: [jnp.arange(3, dtype=jnp.uint8)] * 2),
                                fn.external_source(source=lambda: jnp.zeros((2, 4), jnp.float32))))
    a, b = pipe.run()
    assert a.dtype == types.UINT8 and values(a) == [[0, 1, 2]] * 2
    assert b.dtype == types.FLOAT and b.shape() == [(4,), (4,)]


def test_feed_input_accepts_torch_and_jax():
    torch = pytest.importorskip("torch")
    import jax.numpy as jnp

    pipe = make_pipe()(lambda: fn.external_source(name="x"))
    pipe.feed_input("x", torch.tensor([[1, 2], [3, 4]], dtype=torch.int32))
    assert values(pipe.run()[0]) == [[1, 2], [3, 4]]
    pipe.feed_input("x", [jnp.array([5], jnp.int32), jnp.array([6, 7], jnp.int32)])
    assert values(pipe.run()[0]) == [[5], [6, 7]]


def test_no_copy_uses_the_users_buffer_and_the_default_copies():
    data = np.arange(6, dtype=np.uint8).reshape(2, 3)
    pipe = make_pipe()(lambda: (fn.external_source(source=lambda: data, no_copy=True),
                                fn.external_source(source=lambda: data)))
    shared, copied = pipe.run()
    assert np.shares_memory(shared.as_array(), data)
    assert not np.shares_memory(copied.as_array(), data)
    data[0, 0] = 99  # only allowed because this test no longer needs the batch it shared
    assert copied.as_array()[0, 0] == 0


def test_repeat_last_reuses_the_last_fed_batch():
    pipe = make_pipe()(lambda: fn.external_source(name="x", repeat_last=True))
    pipe.feed_input("x", np.array([[1], [2]], np.int32))
    assert [values(pipe.run()[0]) for _ in range(3)] == [[[1], [2]]] * 3
    pipe.feed_input("x", np.array([[5]], np.int32))
    assert [values(pipe.run()[0]) for _ in range(2)] == [[[5]]] * 2


def test_blocking_source_waits_for_data():
    pipe = make_pipe()(lambda: fn.external_source(name="x", blocking=True))
    pipe.schedule_run()  # the producer starts and waits: nothing was fed yet
    pipe.feed_input("x", np.full((2, 2), 3, np.uint8))
    assert values(pipe.share_outputs()[0]) == [[3, 3]] * 2
    pipe.close()


def test_num_outputs_per_sample_array_gives_its_first_axis_to_the_outputs():
    # As DALI: with num_outputs=n a per-sample array is indexed 0..n-1 along its first axis.
    pipe = make_pipe()(lambda: fn.external_source(
        lambda info: np.arange(3, dtype=np.int32) + info.idx_in_batch, num_outputs=2, batch=False))
    a, b = pipe.run()
    assert values(a) == [0, 1] and values(b) == [1, 2]
    pipe = make_pipe()(lambda: fn.external_source(lambda info: np.ones((2, 4), np.int32), num_outputs=1, batch=False))
    (out,) = pipe.run()
    assert out.as_array().shape == (2, 4) and (out.as_array() == 1).all()


def test_num_outputs_per_sample_tuple_of_other_length_is_refused():
    # DALI silently drops the extra entry; a tuple that does not match is most likely a bug.
    pipe = make_pipe()(lambda: fn.external_source(lambda info: (np.ones(1),) * 3, num_outputs=2, batch=False))
    with pytest.raises(TypeError, match=r"num_outputs=2 each sample must be a tuple of 2 arrays.*sample 0 is a tuple of 3"):
        pipe.run()


def _numbers(info):
    return np.full((2,), info.idx_in_epoch, np.int32)


def _constant():
    return np.zeros((2,), np.int32)


@pytest.mark.parametrize("source, kind", [
    ([np.zeros((1, 2), np.int32)] * 3, "iterable"),
    (iter([np.zeros((1, 2), np.int32)] * 3), "iterable"),
    (_constant, "parameterless callable"),
])
def test_checkpointing_warns_at_build_about_a_source_whose_state_is_not_kept(source, kind):
    # DALI warns when the pipeline is built, not only when a checkpoint is restored.
    @pipeline_def(batch_size=1, num_threads=1, device_id=None, enable_checkpointing=True)
    def pipe():
        return fn.external_source(source=source, batch=kind != "parameterless callable")

    p = pipe()
    with pytest.warns(RuntimeWarning, match=f"DALI doesn't capture state of such 'source'. This {kind} source "
                                            "restarts from its beginning"):
        p.build()
    p.close()


def test_a_sample_callable_or_checkpointing_off_builds_without_a_warning(recwarn):
    @pipeline_def(batch_size=1, num_threads=1, device_id=None, enable_checkpointing=True)
    def resumable():
        return fn.external_source(source=_numbers, batch=False)

    @pipeline_def(batch_size=1, num_threads=1, device_id=None)
    def unrecorded():
        return fn.external_source(source=_constant, batch=False)

    for make in (resumable, unrecorded):
        p = make()
        p.build()
        p.close()
    assert not [w for w in recwarn if "capture state" in str(w.message)]
