"""Pipeline object model: pipeline_def routing, build, the run APIs, metadata, errors, lifetimes."""

from __future__ import annotations

import gc
import threading
import warnings

import numpy as np
import pytest

from jaxdali import Pipeline, fn, pipeline_def, types
from jaxdali.tensors import TensorListCPU, TensorListGPU


def counter_source(offset: int = 0, stop_after: int | None = None):
    """batch=False source returning [idx_in_epoch + offset] (int32), ending after `stop_after` batches."""

    def source(info: types.SampleInfo):
        if stop_after is not None and info.iteration >= stop_after:
            raise StopIteration
        return np.array([info.idx_in_epoch + offset], np.int32)

    return source


# -- pipeline_def routing -----------------------------------------------------------------------------------

def test_call_keywords_override_decorator_defaults():
    @pipeline_def(batch_size=42, num_threads=1, device_id=None)
    def p():
        return fn.random.coin_flip()

    assert p().max_batch_size == 42
    assert p(batch_size=3).max_batch_size == 3


def test_function_parameter_shadowing_pipeline_argument_goes_to_function():
    seen = {}

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p(seed):
        seen["seed"] = seed
        return fn.random.coin_flip()

    with pytest.warns(UserWarning, match="shadows a Pipeline constructor argument") as record:
        pipe = p(seed=123)
    assert record[0].filename == __file__  # the warning names the caller's line, not jaxdali's
    assert seen["seed"] == 123
    assert pipe.seed != 123 or pipe._requested_seed is None  # the Pipeline never saw it


def test_unknown_keyword_names_the_argument():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p(a):
        return fn.random.coin_flip()

    with pytest.raises(AssertionError, match="double-check the `shard_id` argument"):
        p(a=1, shard_id=0)
    with pytest.raises(TypeError, match="shard_id"):
        p(a=1, shard_id=0)


def test_var_keyword_graph_function_is_rejected():
    with pytest.raises(TypeError, match=r"\*\*kwargs"):
        @pipeline_def(batch_size=2)
        def p(**kwargs):
            return None


def test_positional_arguments_go_to_function_and_none_means_no_outputs():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p(value):
        return fn.random.uniform(range=[value, value])

    out = p(5.0).run()
    np.testing.assert_array_equal(out[0].as_array(), [5.0, 5.0])


def test_constant_outputs_and_nested_lists():
    @pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def consts():
        return np.float32(1.5), [1, 2]

    a, b = consts().run()
    np.testing.assert_array_equal(a.as_array(), [1.5] * 3)
    np.testing.assert_array_equal(b.as_array(), [[1, 2]] * 3)
    assert b.dtype == types.INT32

    @pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def nested():
        return [fn.random.coin_flip(), fn.random.coin_flip()], fn.random.coin_flip()

    with pytest.raises(TypeError, match="containing DataNodes"):
        nested()

    # Only a tuple is several outputs: a returned list is one output, a constant (DALI 2.4)...
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def a_list():
        return [1, 2]

    (c,) = a_list().run()
    np.testing.assert_array_equal(c.as_array(), [[1, 2], [1, 2]])

    # ... so a list of nodes (e.g. a multi-output operator's result) must be unpacked.
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def reader_result():
        return fn.external_source(source=lambda: ([np.zeros(1)] * 2, [np.ones(1)] * 2), num_outputs=2)

    with pytest.raises(TypeError, match="output 0 is a list containing DataNodes"):
        reader_result()


def test_decorator_keywords_are_pipeline_defaults_even_when_they_name_a_parameter():
    seen = {}

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=7)
    def p(seed=0):
        seen["seed"] = seed
        return fn.random.coin_flip()

    pipe = p()
    assert (seen["seed"], pipe.seed) == (0, 7)  # DALI 2.4 routes only call-time keywords by name
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['root'\]"):
        @pipeline_def(batch_size=2, root="/data")
        def q(root):
            return None


def test_conditionals_and_debug_keywords_are_dropped_unless_declared():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, enable_conditionals=False)
    def plain():
        return fn.random.coin_flip()

    assert plain(debug=False, enable_conditionals=False).max_batch_size == 2
    seen = {}

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def declares(debug):
        seen["debug"] = debug
        return fn.random.coin_flip()

    declares(debug="yes")
    assert seen["debug"] == "yes"


def test_pipeline_current_inside_definition():
    holder = {}

    @pipeline_def(batch_size=7, num_threads=1, device_id=None)
    def p():
        holder["bs"] = Pipeline.current().max_batch_size
        return fn.random.coin_flip()

    p()
    assert holder["bs"] == 7
    assert Pipeline.current() is None


def test_manual_pipeline_with_scope_and_set_outputs():
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None, seed=1)
    with pipe:
        x = fn.external_source(source=lambda: [np.array([1, 2], np.int32)] * 2)
        pipe.set_outputs(x * 2)
    pipe.build()
    pipe.build()  # idempotent
    np.testing.assert_array_equal(pipe.run()[0].as_array(), [[2, 4], [2, 4]])


def test_operator_outside_pipeline_scope_is_an_error():
    with pytest.raises(RuntimeError, match="outside a pipeline definition"):
        fn.random.coin_flip()


def test_batch_size_must_be_positive():
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        Pipeline(batch_size=0)
    with pytest.raises(ValueError, match="batch_size"):
        Pipeline()


# -- run APIs ---------------------------------------------------------------------------------------------

@pipeline_def(batch_size=2, num_threads=2, device_id=None)
def counting(prefetch_queue_depth=None):
    return fn.external_source(source=counter_source(), batch=False)


def test_run_without_build_and_sequence():
    pipe = counting()
    values = [pipe.run()[0].as_array().ravel().tolist() for _ in range(3)]
    assert values == [[0, 1], [2, 3], [4, 5]]


def test_scheduled_api_prefetches_depth_then_one_per_call():
    calls = []

    def source(info):
        calls.append(info.iteration)
        return np.array([info.idx_in_epoch], np.int32)

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, prefetch_queue_depth=3)
    def p():
        return fn.external_source(source=source, batch=False)

    pipe = p()
    pipe.schedule_run()
    first = pipe.share_outputs()
    assert first[0].as_array().ravel().tolist() == [0]
    pipe.release_outputs()
    assert sorted(set(calls)) == [0, 1, 2]  # depth 3 prefetched
    pipe.schedule_run()
    assert pipe.outputs()[0].as_array().ravel().tolist() == [1]
    assert pipe.outputs()[0].as_array().ravel().tolist() == [2]
    assert pipe.outputs()[0].as_array().ravel().tolist() == [3]


def test_share_without_schedule_raises_instead_of_hanging():
    pipe = counting()
    with pytest.raises(RuntimeError, match="No pipeline run is scheduled"):
        pipe.share_outputs()


def test_mixing_api_styles_is_an_error():
    pipe = counting()
    pipe.run()
    with pytest.raises(RuntimeError, match="Mixing pipeline API type"):
        pipe.schedule_run()
    pipe2 = counting()
    pipe2.schedule_run()
    with pytest.raises(RuntimeError, match="Mixing pipeline API type"):
        pipe2.run()


def test_framework_iterators_lock_the_iterator_api_style():
    from jaxdali.plugin.jax import DALIGenericIterator

    pipe = counting()
    it = DALIGenericIterator([pipe], ["x"])
    assert np.asarray(next(it)["x"]).ravel().tolist() == [0, 1]
    with pytest.raises(RuntimeError, match="Currently used: PipelineAPIType.ITERATOR, but trying to use "
                                           "PipelineAPIType.BASIC"):
        pipe.run()
    used = counting()
    used.run()
    with pytest.raises(RuntimeError, match="Currently used: PipelineAPIType.BASIC, but trying to use "
                                           "PipelineAPIType.ITERATOR"):
        DALIGenericIterator([used], ["x"])


def test_external_source_end_reset_and_empty():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=2)
    def p():
        return fn.external_source(source=counter_source(stop_after=2), batch=False)

    pipe = p()
    for epoch in range(3):
        got = [pipe.run()[0].as_array().ravel().tolist() for _ in range(2)]
        assert got == [[0, 1], [2, 3]], epoch
        with pytest.raises(StopIteration):
            pipe.run()
        with pytest.raises(StopIteration):  # stays ended until reset
            pipe.run()
        assert pipe.empty()
        pipe.reset()


def test_run_with_inputs_requires_depth_one():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def p():
        return fn.external_source(name="data") + 1

    pipe = p()
    out = pipe.run(data=np.array([[1], [2]], np.int32))
    np.testing.assert_array_equal(out[0].as_array(), [[2], [3]])
    out = pipe.run(data=[np.array([5, 6], np.int32)])  # ragged list form, smaller batch
    assert len(out[0]) == 1 and out[0].at(0).tolist() == [6, 7]

    deep = p(prefetch_queue_depth=2)
    with pytest.raises(RuntimeError, match="prefetch_queue_depth=1"):
        deep.run(data=np.zeros((2, 1), np.int32))
    serial = p(prefetch_queue_depth=2, exec_pipelined=False)  # not running ahead: allowed as well
    assert serial.run(data=np.array([[4]], np.int32))[0].as_array().tolist() == [[5]]


def test_feed_input_ahead_with_prefetch():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=2)
    def p():
        return fn.external_source(name="data")

    pipe = p()
    for k in range(2):
        pipe.feed_input("data", np.full((2, 3), k, np.uint8))
    pipe.schedule_run()
    assert pipe.share_outputs()[0].as_array()[0, 0] == 0
    pipe.feed_input("data", np.full((2, 3), 2, np.uint8))
    pipe.release_outputs()
    pipe.schedule_run()
    assert pipe.share_outputs()[0].as_array()[0, 0] == 1
    assert pipe.outputs()[0].as_array()[0, 0] == 2
    with pytest.raises(RuntimeError, match="no external source named 'nope'"):
        pipe.feed_input("nope", np.zeros((1, 1)))


def test_unfed_external_source_error_names_the_source():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def p():
        return fn.external_source(name="images")

    with pytest.raises(RuntimeError, match="no data was fed.*'images'"):
        p().run()


def test_reader_meta_and_epoch_size(index_files):
    files = index_files(10)

    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p(shard_id, num_shards, pad):
        data, label = fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards,
                                      pad_last_batch=pad, name="Reader")
        return data

    meta = p(shard_id=1, num_shards=3, pad=True).reader_meta("Reader")
    assert meta == {"epoch_size": 10, "epoch_size_padded": 12, "number_of_shards": 3, "shard_id": 1,
                    "pad_last_batch": True, "stick_to_shard": False}
    assert p(shard_id=1, num_shards=3, pad=False).epoch_size("Reader") == 10
    assert p(shard_id=0, num_shards=3, pad=True).epoch_size() == {"Reader": 12}
    with pytest.raises(RuntimeError, match=r'Operator Nope  not found or does not expose valid metadata'):
        p(shard_id=0, num_shards=1, pad=False).reader_meta("Nope")


def test_duplicate_operator_names_rejected():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def p():
        a = fn.random.coin_flip(name="x")
        b = fn.random.coin_flip(name="x")
        return a, b

    with pytest.raises(RuntimeError, match="'x' is not unique"):
        p()


def test_unused_operators_are_pruned_unless_preserved():
    calls = []

    def side_effect(info):
        calls.append(info)
        return np.zeros((1,), np.uint8)

    @pipeline_def(batch_size=2, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def p(preserve):
        fn.external_source(source=side_effect, batch=False, preserve=preserve)
        return fn.random.coin_flip()

    p(preserve=False).run()
    assert calls == []
    p(preserve=True).run()
    assert len(calls) == 2


# -- errors and output contracts ----------------------------------------------------------------------

def test_worker_error_reaches_consumer_with_traceback_and_note():
    def bad(info):
        if info.iteration == 1:
            raise ZeroDivisionError("boom in user code")
        return np.zeros((1,), np.int32)

    @pipeline_def(batch_size=2, num_threads=2, device_id=None, prefetch_queue_depth=3)
    def p():
        return fn.external_source(source=bad, batch=False, name="src")

    pipe = p()
    pipe.run()
    with pytest.raises(ZeroDivisionError, match="boom in user code") as info:
        pipe.run()
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "fn.external_source (instance 'src')" in notes
    assert any(frame.name == "bad" for frame in info.traceback)
    with pytest.raises(RuntimeError, match="earlier error"):
        pipe.run()


def test_output_contract_checked_every_batch():
    @pipeline_def(batch_size=2, num_threads=1, device_id=None, output_dtype=types.FLOAT, output_ndim=1)
    def p():
        return fn.random.coin_flip(shape=[2])

    with pytest.raises(TypeError, match="expected dtype DALIDataType.FLOAT, got DALIDataType.INT32"):
        p().run()


# -- determinism ------------------------------------------------------------------------------------------

@pipeline_def(batch_size=8, device_id=None, seed=1234)
def randoms():
    return (fn.random.coin_flip(probability=0.3), fn.random.uniform(range=[-2, 5], shape=[3]),
            fn.random.normal(mean=1.0, stddev=2.0, shape=[2, 2]))


def _collect(pipe, n=4):
    return [[o.as_array().copy() for o in pipe.run()] for _ in range(n)]


@pytest.mark.parametrize("num_threads,depth", [(1, 1), (2, 4), (4, 2)])
def test_same_seed_same_values_whatever_threads_and_prefetch(num_threads, depth):
    reference = _collect(randoms(num_threads=1, prefetch_queue_depth=1))
    got = _collect(randoms(num_threads=num_threads, prefetch_queue_depth=depth))
    for a, b in zip(reference, got):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_different_seeds_differ_and_unset_seed_is_random():
    a = _collect(randoms(num_threads=1))
    b = _collect(randoms(num_threads=1, seed=99))
    assert not np.array_equal(a[0][1], b[0][1])
    c = _collect(randoms(num_threads=1, seed=None))
    d = _collect(randoms(num_threads=1, seed=None))
    assert not np.array_equal(c[0][1], d[0][1])


# -- devices ----------------------------------------------------------------------------------------------

def test_cpu_only_pipeline_outputs_host_batches():
    out = randoms(num_threads=1, device_id=None).run()
    assert all(isinstance(o, TensorListCPU) for o in out)


def test_gpu_outputs_live_on_the_jax_device():
    import jax

    @pipeline_def(batch_size=3, num_threads=1, device_id=0, seed=1)
    def p():
        x = fn.external_source(source=lambda: [np.arange(4, dtype=np.uint8)] * 3)
        return x.gpu(), (x.gpu() * 2)

    a, b = p().run()
    assert isinstance(a, TensorListGPU) and isinstance(b, TensorListGPU)
    assert a.jax_array().devices() == {jax.local_devices()[0]}
    np.testing.assert_array_equal(b.as_cpu().as_array(), np.tile(np.arange(4) * 2, (3, 1)))
    assert b.dtype == types.INT32


def test_gpu_data_cannot_feed_a_cpu_operator():
    @pipeline_def(batch_size=2, num_threads=1, device_id=0)
    def p():
        x = fn.random.uniform().gpu()
        return fn.random.uniform(x, device="cpu")

    with pytest.raises(ValueError, match="is on the GPU but the operator runs on device='cpu'"):
        p()


# -- lifetimes ----------------------------------------------------------------------------------------------

def _prefetch_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("jaxdali-prefetch")}


def _thread_count() -> int:
    return len(_prefetch_threads())


def test_dropping_100_pipelines_stops_their_threads():
    counting().run()  # the shared worker pool exists from here on
    gc.collect()
    before = set(threading.enumerate())
    for _ in range(100):
        pipe = counting()
        pipe.run()
        del pipe
    gc.collect()
    # The collector's finalizer only tells producers to stop (it must not block); they end promptly.
    for thread in _prefetch_threads() - before:
        thread.join(10)
    assert set(threading.enumerate()) <= before  # (threads of earlier tests may end meanwhile)


def test_close_is_idempotent_and_later_use_fails():
    pipe = counting()
    pipe.run()
    pipe.close()
    pipe.close()
    with pytest.raises(RuntimeError, match="closed"):
        pipe.run()


def test_blocking_feed_wait_is_released_by_close():
    @pipeline_def(batch_size=1, num_threads=1, device_id=None, prefetch_queue_depth=1)
    def p():
        return fn.external_source(name="x", blocking=True)

    pipe = p()
    pipe.schedule_run()  # the producer now waits for data
    before = _thread_count()
    assert before >= 1
    pipe.close()
    gc.collect()
    assert _thread_count() == before - 1


def test_hint_arguments_are_accepted():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipe = Pipeline(batch_size=2, num_threads=1, device_id=None, bytes_per_sample=10, set_affinity=True,
                        max_streams=2, exec_dynamic=True, enable_memory_stats=True)
    assert pipe.exec_dynamic


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["kept", "dropped"])
def test_interpreter_exits_cleanly_while_producers_decode(ending, flowers_root, subprocess_env):
    # Producers still inside the C++ decoder at exit must be stopped and joined first: a daemon thread
    # torn down there aborts the process. "dropped" leaves only the non-blocking GC finalizer's signal.
    import subprocess
    import sys

    code = ("import gc\n"
            "from jaxdali import fn, pipeline_def\n"
            "@pipeline_def(batch_size=16, num_threads=2, device_id=None, prefetch_queue_depth=4)\n"
            "def p():\n"
            f"    jpegs, _ = fn.readers.file(file_root={flowers_root!r})\n"
            "    return fn.decoders.image(jpegs)\n"
            "pipe = p(); pipe.run(); print('done')\n"
            + ("del pipe; gc.collect()\n" if ending == "dropped" else ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=subprocess_env)
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr


def test_64_bit_device_data_narrows_or_fails_loudly():
    @pipeline_def(batch_size=1, num_threads=1, device_id=0)
    def p(value):
        return fn.external_source(source=lambda: [np.array([value, 3], np.int64)]).gpu()

    assert p(7).run()[0].as_cpu().as_array().tolist() == [[7, 3]]
    with pytest.raises(OverflowError, match="do not fit int32"):
        p(2 ** 40).run()


def test_64_bit_values_that_do_not_fit_the_device_name_the_operator():
    """A device operator's output used to be named only 'device output' in this error."""
    @pipeline_def(batch_size=1, num_threads=1, device_id=0)
    def p():
        x = fn.external_source(source=lambda: [np.array([[[2 ** 40, 3]]], np.int64)], layout="HWC")
        return fn.noise.salt_and_pepper(x.gpu(), prob=0.0)

    with pytest.raises(OverflowError, match=r"output 0 of fn\.noise\.salt_and_pepper \(instance .*do not fit int32"):
        p().run()


def test_schedule_run_with_explicit_run_count():
    calls = []

    def source(info):
        calls.append(info.iteration)
        return np.array([info.idx_in_epoch], np.int32)

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, prefetch_queue_depth=3)
    def p():
        return fn.external_source(source=source, batch=False)

    pipe = p()
    assert pipe.queue_depth == 3 and p(exec_pipelined=False).queue_depth == 1
    pipe.schedule_run(runs=1)
    assert pipe.share_outputs()[0].as_array().ravel().tolist() == [0]
    assert calls == [0]
    with pytest.raises(ValueError, match="runs must be a positive integer"):
        pipe.schedule_run(runs=0)
