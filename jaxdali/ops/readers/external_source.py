"""``fn.external_source``: batches from Python — callables, iterables, generators or ``feed_input``.

Source kinds (chosen when the pipeline is built):

* no ``source``: data arrives through ``Pipeline.feed_input`` / ``Pipeline.run(name=...)``;
* a callable with no parameters: called once per batch (or once per sample with ``batch=False``);
* a callable with one parameter: gets the iteration index within the epoch, a ``BatchInfo`` with
  ``batch_info=True``, or a ``SampleInfo`` per sample with ``batch=False``;
* a generator function: called to obtain an iterator;
* an iterable: ``iter()`` once, then ``next()`` per batch (per sample with ``batch=False``).

``StopIteration`` from the source ends the epoch; ``Pipeline.reset()`` starts the next one. Callables
start again from iteration 0. An iterable or generator function starts again only with
``cycle="raise"``; with ``cycle="no"`` (the default) it stays exhausted, as in DALI, and with
``cycle="quiet"`` it restarts silently, so its epoch never ends.
"""

from __future__ import annotations

import collections
import inspect
import multiprocessing
import threading
import warnings
from typing import Any, Callable

import numpy as np

from jaxdali import pickling
from jaxdali._caller import user_stacklevel
from jaxdali.ops.graph import add_op
from jaxdali.ops.operator import Operator
from jaxdali.ops.schema import Arg, OpArgumentError, OpSchema, register
from jaxdali.core.checkpoint import CheckpointError
from jaxdali.tensors import TensorListCPU, TensorListGPU
from jaxdali.types import BatchInfo, SampleInfo, to_dali_type, to_numpy_type

__all__ = ["EXTERNAL_SOURCE", "external_source"]

_CYCLE = {None: "no", False: "no", "no": "no", True: "quiet", "quiet": "quiet", "raise": "raise"}


def _count_positional(fn: Callable) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                  and p.default is p.empty]
    return len(positional)


_KIND_WORDS = {"iterable": "iterable", "genfunc": "generator function", "callable0": "parameterless callable"}


def _classify(source: Any) -> str:
    if source is None:
        return "feed"
    if inspect.isgeneratorfunction(source):
        return "genfunc"
    if callable(source) and not hasattr(source, "__iter__"):
        n = _count_positional(source)
        if n > 1:
            raise OpArgumentError(f"fn.external_source: a callable source must take 0 or 1 arguments, "
                                  f"{getattr(source, '__name__', source)!r} takes {n}")
        return f"callable{n}"
    if hasattr(source, "__iter__"):
        return "iterable"
    raise OpArgumentError(f"fn.external_source: 'source' must be a callable, an iterable or a generator "
                          f"function, got {type(source).__name__}")


def _as_array(x: Any, copy: bool) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return np.array(x, copy=True) if copy else x
    if hasattr(x, "__array_interface__") or hasattr(x, "__array__"):
        try:
            # np.asarray, not np.array(copy=...): older __array__ methods (torch) take no `copy` argument.
            arr = np.asarray(x)
            return np.array(arr, copy=True) if copy else arr
        except (TypeError, RuntimeError):
            pass
    if hasattr(x, "__dlpack__"):
        arr = np.from_dlpack(x)
        return np.array(arr, copy=True) if copy else arr
    if hasattr(x, "cpu") and callable(x.cpu):  # device tensors (torch.cuda) without host access
        return np.asarray(x.cpu())
    return np.array(x)


def to_host_batch(data: Any, copy: bool, what: str) -> TensorListCPU:
    """Converts user data (array with a batch axis, or a list of samples) into a host batch."""
    if isinstance(data, TensorListCPU):
        return data
    if isinstance(data, TensorListGPU):
        return data.as_cpu()
    if isinstance(data, (list, tuple)):
        samples = [_as_array(s, copy) for s in data]
        if samples:
            dtypes = {s.dtype for s in samples}
            ndims = {s.ndim for s in samples}
            if len(dtypes) > 1 or len(ndims) > 1:
                raise TypeError(f"{what}: all samples of a batch must have the same dtype and number of dimensions, "
                                f"got dtypes {sorted(map(str, dtypes))} and ndims {sorted(ndims)}")
        return TensorListCPU(samples)
    arr = _as_array(data, copy)
    if arr.ndim == 0:
        raise TypeError(f"{what}: a batch must be an array with a leading batch dimension or a list of samples, "
                        f"got a scalar {data!r}")
    return TensorListCPU(arr)


class _Feed:
    """Batches pushed with ``feed_input``, consumed one per iteration."""

    def __init__(self):
        self.cond = threading.Condition()
        self.queue: collections.deque = collections.deque()
        self.closed = False


# -- process pool for parallel=True -------------------------------------------------------------------

_worker_callback: Callable | None = None
_END = "__jaxdali_end_of_data__"


def _init_worker(callback: Callable) -> None:
    global _worker_callback
    _worker_callback = callback


def _init_unpickled_worker(loads: Callable, payload: bytes, loads_kwargs: dict) -> None:
    """The initializer of spawned workers: the callback arrives as ``py_callback_pickler``'s bytes."""
    _init_worker(loads(payload, **loads_kwargs))


def _call_in_worker(arg: Any) -> Any:
    try:
        return _worker_callback(arg) if arg is not None else _worker_callback()
    except StopIteration:
        return _END


_worker_iterator: Any = None


def _restart_in_worker() -> None:
    global _worker_iterator
    source = _worker_callback
    _worker_iterator = source() if inspect.isgeneratorfunction(source) else iter(source)


def _next_in_worker() -> Any:
    try:
        return next(_worker_iterator)
    except StopIteration:
        return _END


class _Workers:
    """The process pool of a parallel source.

    Results are awaited in short steps, so that ``close()`` from another thread ends a wait: a
    terminated ``multiprocessing.Pool`` never completes its pending results, and a producer thread
    blocked on one could not be joined.
    """

    def __init__(self, pool, name: str):
        self._pool = pool
        self._name = name
        self._closed = threading.Event()

    def apply(self, func: Callable, args: tuple = ()) -> Any:
        return self._wait(self._pool.apply_async(func, args))

    def map(self, func: Callable, items: list, chunksize: int) -> list:
        return self._wait(self._pool.map_async(func, items, chunksize))

    def _wait(self, result) -> Any:
        while not result.ready():
            if self._closed.is_set():
                raise RuntimeError(f"{self._name}: the pipeline was closed while waiting for the worker processes")
            result.wait(0.05)
        return result.get()

    def cancel(self) -> None:
        """Ends the waits for results (they raise); the processes keep running until ``close``."""
        self._closed.set()

    def close(self) -> None:
        self.cancel()
        self._pool.terminate()
        self._pool.join()


class _WorkerIterator:
    """An iterable or generator source iterated inside its dedicated worker process."""

    def __init__(self, workers: _Workers):
        self._workers = workers
        workers.apply(_restart_in_worker)

    def __next__(self) -> Any:
        result = self._workers.apply(_next_in_worker)
        if isinstance(result, str) and result == _END:
            raise StopIteration
        return result


def _describe_sample(sample: Any) -> str:
    if isinstance(sample, (list, tuple)):
        return f"a {type(sample).__name__} of {len(sample)}"
    if isinstance(sample, np.ndarray):
        return f"an array of shape {sample.shape}"
    return type(sample).__name__


class ExternalSource(Operator):
    def __init__(self, node, build):
        super().__init__(node, build)
        a = self.args
        self._source = a["source"]
        self._kind = _classify(self._source)
        self._num_outputs = a["num_outputs"]
        self._parallel = bool(a["parallel"])
        self._batch = a["batch"] if a["batch"] is not None else not self._parallel
        self._batch_info = bool(a["batch_info"])
        self._copy = not a["no_copy"]
        if a["cycle"] not in _CYCLE:
            raise OpArgumentError(f"fn.external_source: 'cycle' must be one of None, False, True, 'no', 'quiet', "
                                  f"'raise', got {a['cycle']!r}")
        self._cycle = _CYCLE[a["cycle"]]
        if self._cycle != "no" and self._kind not in ("iterable", "genfunc"):
            raise OpArgumentError("fn.external_source: 'cycle' needs an iterable or a generator function source")
        if self._cycle != "no" and inspect.isgenerator(self._source):
            raise TypeError(
                f"fn.external_source: cycle={a['cycle']!r} cannot restart a generator object; pass the generator "
                f"function itself (source={self._source.__name__}, not source={self._source.__name__}())")
        if self._batch_info and not (self._kind == "callable1" and self._batch):
            raise OpArgumentError("fn.external_source: 'batch_info' applies only to a one-argument callable with "
                                  "batch=True")
        if self._kind == "feed" and self._parallel:
            raise OpArgumentError("fn.external_source: parallel=True needs a 'source'")
        n_out = self._num_outputs or 1
        self._dtypes = self._per_output("dtype", n_out)
        self._ndims = self._per_output("ndim", n_out)
        self._layouts = self._per_output("layout", n_out)
        for i, (nd, lay) in enumerate(zip(self._ndims, self._layouts)):
            if nd is not None and lay and len(lay) != nd:
                raise OpArgumentError(f"fn.external_source: layout {lay!r} of output {i} does not match ndim={nd}")
        if build.checkpointing and self._kind not in ("feed", "callable1"):
            # Warned when the pipeline is built, as DALI does (its tests match the middle sentence).
            warnings.warn(f"{self.name}: checkpointing is enabled, but only one-argument callable sources (iteration "
                          "index, BatchInfo or SampleInfo) resume from a checkpoint. DALI doesn't capture state of "
                          f"such 'source'. This {_KIND_WORDS[self._kind]} source restarts from its beginning when a "
                          "checkpoint is restored; adjust it yourself to start where the checkpoint was taken.",
                          RuntimeWarning, stacklevel=user_stacklevel())
        self._feed = _Feed() if self._kind == "feed" else None
        self._last_fed: list | None = None
        self._iterator = None
        self._pool = None
        try:
            if self._parallel:
                self._start_pool(build)
            self._restart_iterator()
        except BaseException:
            self.close()
            raise

    def _per_output(self, key: str, n: int) -> list:
        value = self.args[key]
        values = list(value) if isinstance(value, (list, tuple)) else [value] * n
        if len(values) != n:
            raise OpArgumentError(f"fn.external_source: '{key}' lists {len(values)} values for {n} outputs")
        if key == "dtype":
            values = [None if v is None else to_dali_type(v) for v in values]
        return values

    # -- parallel --------------------------------------------------------------------------------------
    def _start_pool(self, build) -> None:
        """Starts ``py_num_workers`` processes for a callable, or one dedicated process that iterates an
        iterable or generator source (whose order must be kept)."""
        if build.py_num_workers < 1:
            raise OpArgumentError("fn.external_source: parallel=True needs py_num_workers >= 1 on the Pipeline")
        sequential = self._kind in ("iterable", "genfunc")
        if sequential and not self._batch:
            raise OpArgumentError(
                "fn.external_source: parallel=True with batch=False needs a callable taking a SampleInfo; an "
                f"{'iterable' if self._kind == 'iterable' else 'generator function'} source needs batch=True")
        ctx = multiprocessing.get_context(build.py_start_method)
        workers = 1 if sequential else build.py_num_workers
        if build.py_start_method == "fork":
            initializer, initargs = _init_worker, (self._source,)
        else:
            initializer, initargs = _init_unpickled_worker, self._pickled_source(build)
        self._pool = _Workers(ctx.Pool(workers, initializer=initializer, initargs=initargs), self.name)

    def _pickled_source(self, build) -> tuple[Callable, bytes, dict]:
        pickler, dumps_kwargs, loads_kwargs = pickling.resolve_pickler(build.py_callback_pickler)
        try:
            payload = pickler.dumps(self._source, **dumps_kwargs)
        except Exception as e:
            raise TypeError(
                f"{self.name}: with py_start_method={build.py_start_method!r} the source is pickled into the worker "
                f"processes, and pickling it failed ({type(e).__name__}: {e}). Local functions, lambdas and "
                "closures are pickled by value; objects of local classes are not: define the class at module "
                "level, pass a pickler such as cloudpickle as the Pipeline's py_callback_pickler, or use "
                "py_start_method='fork'") from e
        return pickler.loads, payload, loads_kwargs

    # -- epochs ------------------------------------------------------------------------------------------
    def _restart_iterator(self) -> None:
        if self._pool is not None and self._kind in ("iterable", "genfunc"):
            self._iterator = _WorkerIterator(self._pool)
        elif self._kind == "iterable":
            self._iterator = iter(self._source)
        elif self._kind == "genfunc":
            self._iterator = self._source()

    def start_epoch(self, epoch: int) -> None:
        if self._cycle == "raise":
            self._restart_iterator()

    def _next_from_iterator(self) -> Any:
        try:
            return next(self._iterator)
        except StopIteration:
            if self._cycle != "quiet":
                raise
            self._restart_iterator()
            return next(self._iterator)

    @property
    def ends_epochs(self) -> bool:
        """Whether the source can end an epoch by raising StopIteration (fed data and
        ``cycle="quiet"`` cannot)."""
        return self._kind != "feed" and self._cycle != "quiet"

    # -- feeding -------------------------------------------------------------------------------------------
    @property
    def takes_fed_data(self) -> bool:
        """Whether data arrives through ``feed_input`` (no ``source``)."""
        return self._feed is not None

    def feed(self, data: Any, layout: str | None) -> None:
        if self._feed is None:
            raise RuntimeError(f"Cannot use `feed_input` on the external source {self.node.name!r} with a `source` "
                               "argument specified.")
        batch = self._split_outputs(data, batch_mode=True)
        if layout is not None:
            for b in batch:
                b._layout = layout
        with self._feed.cond:
            self._feed.queue.append(batch)
            self._feed.cond.notify_all()

    def _next_fed(self) -> list:
        feed = self._feed
        with feed.cond:
            while not feed.queue:
                if feed.closed:
                    raise RuntimeError(f"{self.name}: the pipeline was closed while waiting for fed data")
                if self.args["repeat_last"] and self._last_fed is not None:
                    return self._last_fed
                if not self.args["blocking"]:
                    raise RuntimeError(
                        f"{self.name}: no data was fed for this iteration. Call pipe.feed_input({self.node.name!r}, "
                        "batch) before running; with prefetching, feed prefetch_queue_depth batches ahead "
                        "(or use blocking=True).")
                feed.cond.wait()
            self._last_fed = feed.queue.popleft()
            return self._last_fed

    # -- running -------------------------------------------------------------------------------------------
    def run(self, ctx, inputs, args):
        if self._kind == "feed":
            outputs = self._next_fed()
        elif self._batch:
            outputs = self._split_outputs(self._get_batch(ctx), batch_mode=True)
        else:
            outputs = self._assemble_samples(self._get_samples(ctx))
        self._check(outputs, ctx.max_batch_size)
        return outputs

    def _get_batch(self, ctx) -> Any:
        if self._kind in ("iterable", "genfunc"):
            return self._next_from_iterator()
        arg = None
        if self._kind == "callable1":
            arg = BatchInfo(ctx.iteration_in_epoch, ctx.epoch) if self._batch_info else ctx.iteration_in_epoch
        if self._pool is not None:
            result = self._pool.apply(_call_in_worker, (arg,))
            if isinstance(result, str) and result == _END:
                raise StopIteration
            return result
        return self._source(arg) if self._kind == "callable1" else self._source()

    def _get_samples(self, ctx) -> list:
        n = ctx.max_batch_size
        if self._kind in ("iterable", "genfunc"):
            return [self._next_from_iterator() for _ in range(n)]
        if self._kind == "callable0":
            args = [None] * n
        else:
            base = ctx.iteration_in_epoch * n
            args = [SampleInfo(base + i, i, ctx.iteration_in_epoch, ctx.epoch) for i in range(n)]
        if self._pool is not None:
            chunk = -(-n // self.build_ctx.py_num_workers)
            samples = self._pool.map(_call_in_worker, args, chunksize=chunk)
            if any(isinstance(s, str) and s == _END for s in samples):
                raise StopIteration
            return samples
        if self._kind == "callable0":
            return [self._source() for _ in range(n)]
        return [self._source(info) for info in args]

    def _split_outputs(self, data: Any, batch_mode: bool) -> list[TensorListCPU]:
        what = f"{self.name}"
        if self._num_outputs is None:
            return [to_host_batch(data, self._copy, what)]
        if not isinstance(data, (list, tuple)) or len(data) != self._num_outputs:
            got = len(data) if isinstance(data, (list, tuple)) else type(data).__name__
            raise TypeError(f"{what}: with num_outputs={self._num_outputs} the source must return a tuple of "
                            f"{self._num_outputs} batches, got {got}")
        return [to_host_batch(d, self._copy, f"{what} output {i}") for i, d in enumerate(data)]

    def _assemble_samples(self, samples: list) -> list[TensorListCPU]:
        if self._num_outputs is None:
            return [to_host_batch(list(samples), self._copy, self.name)]
        per_output: list[list] = [[] for _ in range(self._num_outputs)]
        for i, s in enumerate(samples):
            # DALI indexes a sample per output, so an array's first axis gives the outputs.
            fits = (len(s) == self._num_outputs if isinstance(s, (list, tuple))
                    else isinstance(s, np.ndarray) and s.ndim > 0 and len(s) >= self._num_outputs)
            if not fits:
                raise TypeError(f"{self.name}: with num_outputs={self._num_outputs} each sample must be a tuple of "
                                f"{self._num_outputs} arrays (or an array whose first axis holds them); sample {i} "
                                f"is {_describe_sample(s)}")
            for k in range(self._num_outputs):
                per_output[k].append(s[k])
        return [to_host_batch(p, self._copy, f"{self.name} output {k}") for k, p in enumerate(per_output)]

    def _check(self, outputs: list[TensorListCPU], max_batch_size: int) -> None:
        sizes = {len(o) for o in outputs}
        if len(sizes) > 1:
            raise ValueError(f"{self.name}: the outputs have different batch sizes {sorted(sizes)}")
        n = sizes.pop()
        if n > max_batch_size:
            raise ValueError(f"{self.name}: the source returned a batch of {n} samples, more than the pipeline's "
                             f"batch_size={max_batch_size}")
        for i, (out, dtype, ndim, layout) in enumerate(zip(outputs, self._dtypes, self._ndims, self._layouts)):
            if dtype is not None and n and out.np_dtype != np.dtype(to_numpy_type(dtype)):
                raise TypeError(f"{self.name}: output {i} was declared with dtype={dtype!r} but the source returned "
                                f"{out.dtype!r} data")
            if ndim is not None and n and out.ndim() != ndim:
                raise ValueError(f"{self.name}: output {i} was declared with ndim={ndim} but the source returned "
                                 f"samples with {out.ndim()} dimensions")
            if layout:
                if out.layout() and out.layout() != layout:
                    raise ValueError(f"{self.name}: output {i} was declared with layout {layout!r} but the data was "
                                     f"fed with layout {out.layout()!r}")
                if n and len(layout) != out.ndim():
                    raise ValueError(f"{self.name}: layout {layout!r} of output {i} does not fit samples with "
                                     f"{out.ndim()} dimensions")
                out._layout = layout

    # -- state -----------------------------------------------------------------------------------------------
    def state(self) -> dict:
        return {"kind": self._kind}

    def restore(self, state: dict) -> None:
        if state.get("kind") != self._kind:
            raise CheckpointError(f"checkpoint field 'pipeline.runner.ops.{self.name}.kind' is {state.get('kind')!r}, "
                                  f"but this source is a {self._kind!r} source")

    def cancel(self) -> None:
        if self._feed is not None:
            with self._feed.cond:
                self._feed.closed = True
                self._feed.cond.notify_all()
        if self._pool is not None:
            self._pool.cancel()

    def close(self) -> None:
        self.cancel()
        if self._pool is not None:
            self._pool.close()
            self._pool = None


EXTERNAL_SOURCE = register(OpSchema(
    name="external_source", impl=ExternalSource, min_inputs=0, max_inputs=0, is_source=True,
    devices=("cpu", "gpu"), num_outputs=lambda a: a.get("num_outputs") or 1,
    doc="Batches from Python: a callable, an iterable, a generator function, or data fed with feed_input.",
    args=(
        Arg("source", "any", None, "Where the data comes from (see the module documentation)."),
        Arg("num_outputs", "int", None, "Number of outputs; the source then returns a tuple per batch/sample.",
            min=1),
        Arg("batch", "bool", None, "Whole batches (True, default) or one sample per call (False)."),
        Arg("batch_info", "bool", False, "Pass a BatchInfo instead of the iteration index."),
        Arg("parallel", "bool", False, "Run the callable in py_num_workers processes."),
        Arg("cycle", "any", None, "What to do when an iterable ends: 'no' (end the epoch), 'quiet' (restart), "
            "'raise' (end the epoch, restart on the next one)."),
        Arg("layout", "any", None, "Layout of each output (a string or a list)."),
        Arg("dtype", "any", None, "Expected element type of each output, checked every batch."),
        Arg("ndim", "any", None, "Expected number of dimensions of each output."),
        Arg("no_copy", "bool", False, "Use the user's buffers without copying (keep them unchanged)."),
        Arg("blocking", "bool", False, "Wait for fed data instead of failing."),
        Arg("repeat_last", "bool", False, "Repeat the last fed batch when no new one was fed."),
        Arg("prefetch_queue_depth", "int", 1, "Batches computed ahead by parallel sources.", min=1, hint=True),
        Arg("cuda_stream", "any", None, "CUDA stream of fed data.", hint=True),
        Arg("use_copy_kernel", "bool", False, "Copy with a kernel.", hint=True),
    )))


def external_source(source: Any = None, num_outputs: int | None = None, **kwargs: Any):
    """``fn.external_source``: returns one DataNode, or a list of ``num_outputs`` nodes."""
    outputs = add_op(EXTERNAL_SOURCE, [], {"source": source, "num_outputs": num_outputs, **kwargs})
    return outputs if num_outputs is not None else outputs[0]


external_source.__doc__ = EXTERNAL_SOURCE.docstring()
