"""DALI proxy: one pipeline in the main process serving PyTorch ``DataLoader`` worker processes.

A torch ``Dataset`` keeps its own indexing, files and labels, but hands the heavy per-sample work to
a jaxdali pipeline through ``server.proxy``. Every DataLoader batch becomes exactly one pipeline
iteration, run by a server thread in the main process, so the workers never build a pipeline or
touch an accelerator::

    worker process                                    main process
    --------------                                    ------------
    dataset[i] -> proxy(x) records x, returns         DataLoader yields the collated batch
      a DALIOutputSampleRef (output, sample)            with DALIOutputBatchRef placeholders
    default_collate(refs) -> DALIOutputBatchRef  --+   server.produce_data(batch) replaces
      and the batch's inputs go on the channel     |     each placeholder by its tensor
                                                   +-> server thread: feed_input per input,
                                                         schedule_run, share_outputs -> tensors

The channel is one ``multiprocessing`` SimpleQueue created with the server (workers inherit it);
requests made in the main process itself (``num_workers=0``, deterministic mode) skip the pickling
and only wake the server thread through it. Outputs never cross a process boundary: the server
thread publishes them, by batch id, to the ``produce_data`` calls waiting in the main process.

``deterministic=True`` sends a batch's inputs along with its placeholders through the DataLoader
and submits them only when the main process consumes the batch, so pipeline iterations (and with
them the random augmentations) follow the DataLoader's order instead of the workers' timing.

Importing this module registers the collate rule for ``DALIOutputSampleRef`` in torch's
``default_collate_fn_map``.
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
import os
import sys
import threading
import weakref
from typing import Any

import torch
import torch.multiprocessing
import torch.utils.data
from torch.utils.data._utils.collate import default_collate_fn_map
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter, _SingleProcessDataLoaderIter

from jaxdali.pipeline.pipeline import Pipeline
from jaxdali.plugin.pytorch.torch_utils import batch_to_torch

__all__ = ["DALIServer", "DataLoader"]

NO_INPUTS_MSG = "The provided pipeline doesn't have any inputs"
SAME_BATCH_MSG = "All samples should belong to the same batch"
SAMPLE_ORDER_MSG = "Unexpected sample order"
CRITICAL_ERROR_MSG = "Critical error in pipeline: "

_STOP_TIMEOUT_S = 30.0
_LIVENESS_CHECK_S = 1.0  # how often a waiting produce_data checks that the server thread still runs


# =============================================================================================
# Placeholders: what the proxy returns and what collation turns them into.


@dataclasses.dataclass(frozen=True)
class DALIOutputSampleRef:
    """Placeholder for one sample of one pipeline output, returned by ``DALIServer.proxy``.

    Attributes:
      server_id: the server whose pipeline will compute it.
      batch_id: the batch request it belongs to (process token, batch number in that process).
      output_idx: which pipeline output.
      sample_idx: position of the sample in its batch.
    """

    server_id: str
    batch_id: tuple[str, int]
    output_idx: int
    sample_idx: int


@dataclasses.dataclass(frozen=True)
class _BatchRequest:
    """One pipeline iteration to run: ``inputs[name]`` is the list of samples for that input."""

    server_id: str
    batch_id: tuple[str, int]
    inputs: dict[str, list]


@dataclasses.dataclass(frozen=True)
class DALIOutputBatchRef:
    """Placeholder for one batch of one pipeline output, made by collating ``DALIOutputSampleRef``\\ s.

    ``DALIServer.produce_data`` replaces it with the output tensor.

    Attributes:
      server_id, batch_id, output_idx: as in ``DALIOutputSampleRef``.
      num_samples: the batch size.
      request: deterministic mode only: the batch's inputs, submitted when the batch is consumed.
    """

    server_id: str
    batch_id: tuple[str, int]
    output_idx: int
    num_samples: int
    request: _BatchRequest | None = dataclasses.field(default=None, repr=False)


# =============================================================================================
# The channel from DataLoader workers (and the main process) to the server thread.

_WAKE = "jaxdali-proxy-wake"  # a request made in the owning process is waiting in the local queue
_STOP = "jaxdali-proxy-stop"


class _Channel:
    """Batch requests for one server: a SimpleQueue for other processes, a deque for the owner.

    Workers started by fork inherit the queue; workers started with another method receive it when
    the dataset is pickled for them, which needs the queue's start method to match theirs.
    """

    def __init__(self):
        self._queue = torch.multiprocessing.SimpleQueue()
        self._owner_pid = os.getpid()
        self._local: collections.deque[_BatchRequest] = collections.deque()
        # Making the queue fixed the default start method; workers must use the same.
        self.start_method = torch.multiprocessing.get_start_method()

    def __getstate__(self) -> dict:
        return {"_queue": self._queue, "_owner_pid": self._owner_pid, "start_method": self.start_method}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._local = collections.deque()

    def submit(self, request: _BatchRequest) -> None:
        if os.getpid() == self._owner_pid:
            self._local.append(request)
            self._queue.put(_WAKE)
        else:
            self._queue.put(request)

    def stop(self) -> None:
        """Asks the server thread to finish the runs in flight and exit."""
        self._queue.put(_STOP)

    def has_message(self) -> bool:
        return not self._queue.empty()

    def get(self) -> _BatchRequest | str:
        """The next request (or ``_STOP``); blocks until one arrives."""
        message = self._queue.get()
        if isinstance(message, str) and message == _WAKE:
            return self._local.popleft()
        return message


# =============================================================================================
# Worker side: recording proxy calls and collating their placeholders.


class _OpenBatch:
    def __init__(self, proxy: "_DALIProxy", batch_id: tuple[str, int]):
        self.proxy = proxy
        self.batch_id = batch_id
        self.inputs: dict[str, list] = {name: [] for name in proxy.input_names}
        self.num_samples = 0


class _ProcessBatches:
    """The batches this process is recording, one per server; rebuilt in every forked child."""

    def __init__(self):
        self.token = os.urandom(8).hex()  # batch ids stay unique across processes and epochs
        self.next_number = 0
        self.lock = threading.Lock()
        self.open: dict[str, _OpenBatch] = {}
        # The batch collated last, per server: the other outputs of the same batch collate after it.
        self.closed: dict[str, tuple[tuple[str, int], int, _BatchRequest, _DALIProxy]] = {}

    def record(self, proxy: "_DALIProxy", inputs: dict[str, Any]) -> Any:
        with self.lock:
            batch = self.open.get(proxy.server_id)
            if batch is None:
                batch = self.open[proxy.server_id] = _OpenBatch(proxy, (self.token, self.next_number))
                self.next_number += 1
            for name, value in inputs.items():
                batch.inputs[name].append(value)
            sample_idx = batch.num_samples
            batch.num_samples += 1
        refs = tuple(DALIOutputSampleRef(proxy.server_id, batch.batch_id, k, sample_idx)
                     for k in range(proxy.num_outputs))
        return refs[0] if len(refs) == 1 else refs

    def close(self, server_id: str, batch_id: tuple[str, int],
              num_samples: int) -> tuple[_BatchRequest, "_DALIProxy", bool]:
        """A collated batch's request and proxy, and whether this call closed (so must submit) it."""
        with self.lock:
            batch = self.open.get(server_id)
            if batch is not None and batch.batch_id == batch_id:
                if num_samples != batch.num_samples:
                    raise RuntimeError(
                        f"{SAMPLE_ORDER_MSG}: batch {batch_id} recorded {batch.num_samples} proxy calls, but "
                        f"{num_samples} of its samples were collated")
                max_batch_size = batch.proxy.max_batch_size
                if num_samples > max_batch_size:
                    raise ValueError(
                        f"DALIServer: a DataLoader batch of {num_samples} samples does not fit the pipeline's "
                        f"batch_size={max_batch_size}; use a DataLoader batch_size <= {max_batch_size}")
                del self.open[server_id]
                request = _BatchRequest(server_id, batch_id, batch.inputs)
                self.closed[server_id] = (batch_id, num_samples, request, batch.proxy)
                return request, batch.proxy, True
            closed = self.closed.get(server_id)
            if closed is not None and closed[0] == batch_id:
                if closed[1] != num_samples:
                    raise RuntimeError(f"{SAMPLE_ORDER_MSG}: batch {batch_id} has {closed[1]} samples, but "
                                       f"{num_samples} were collated for another output")
                return closed[2], closed[3], False
        raise RuntimeError(f"{SAME_BATCH_MSG}: batch {batch_id} is not the batch being collated in this process")


_batches = _ProcessBatches()


def _forget_parent_batches() -> None:
    global _batches
    _batches = _ProcessBatches()


os.register_at_fork(after_in_child=_forget_parent_batches)


def _collate_sample_refs(batch: list, *, collate_fn_map=None) -> DALIOutputBatchRef:
    """torch collate rule: the sample placeholders of one batch and output -> a batch placeholder."""
    first = batch[0]
    for ref in batch:
        if not (isinstance(ref, DALIOutputSampleRef) and ref.server_id == first.server_id
                and ref.batch_id == first.batch_id and ref.output_idx == first.output_idx):
            raise RuntimeError(f"{SAME_BATCH_MSG}: got {ref!r} together with {first!r}")
    order = [ref.sample_idx for ref in batch]
    if order != list(range(len(batch))):
        raise RuntimeError(f"{SAMPLE_ORDER_MSG}: expected samples 0..{len(batch) - 1} in order, got {order}")
    request, proxy, closed_now = _batches.close(first.server_id, first.batch_id, len(batch))
    if closed_now and not proxy.deterministic:
        proxy.channel.submit(request)
    return DALIOutputBatchRef(first.server_id, first.batch_id, first.output_idx, len(batch),
                              request if proxy.deterministic else None)


default_collate_fn_map[DALIOutputSampleRef] = _collate_sample_refs


class _DALIProxy:
    """``DALIServer.proxy``: records one sample of inputs per call and returns its placeholders.

    It carries only what workers need (input names, the channel), never the pipeline, so it can be
    copied into worker processes with the dataset.
    """

    def __init__(self, server_id: str, input_names: list[str], num_outputs: int, max_batch_size: int,
                 deterministic: bool, channel: _Channel):
        self.server_id = server_id
        self.input_names = list(input_names)
        self.num_outputs = num_outputs
        self.max_batch_size = max_batch_size
        self.deterministic = deterministic
        self.channel = channel
        kind = (inspect.Parameter.POSITIONAL_OR_KEYWORD if len(input_names) == 1
                else inspect.Parameter.KEYWORD_ONLY)
        self.__signature__ = inspect.Signature([inspect.Parameter(n, kind) for n in input_names])

    def __reduce__(self):
        return (_DALIProxy, (self.server_id, self.input_names, self.num_outputs, self.max_batch_size,
                             self.deterministic, self.channel))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = self.__signature__.bind(*args, **kwargs)
        except TypeError as e:
            raise ValueError(f"Expected signature is: {self.__signature__}. Got: {e}") from e
        return _batches.record(self, dict(bound.arguments))

    def __repr__(self) -> str:
        return f"DALIServer.proxy{self.__signature__}"


# =============================================================================================
# Main-process side: the server thread and the results it publishes.


@dataclasses.dataclass
class _Result:
    tensors: list | None = None
    error: BaseException | None = None


class _ServerCore:
    """Everything the server thread uses; holds no reference to the ``DALIServer`` facade."""

    def __init__(self, pipe: Pipeline, channel: _Channel, name: str):
        self.pipe = pipe
        self.channel = channel
        self.name = name
        self.input_names = pipe.external_source_names()
        self.depth = pipe.queue_depth
        self.cond = threading.Condition()
        self.results: dict[tuple[str, int], _Result] = {}
        self.failure: BaseException | None = None  # the pipeline stopped with this error
        self.thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        with self.cond:
            if self.thread is not None and self.thread.is_alive():
                return
            # Daemon only as a last resort, so that a server nobody stopped cannot hang interpreter
            # exit (threads are joined before atexit hooks run); stop_thread() is the way to stop it.
            self.thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
            self.thread.start()

    def stop(self, join: bool = True) -> None:
        """Stops the server thread; without ``join`` (a garbage-collection finalizer, which may run on a
        thread holding a lock the server waits for) it only signals it."""
        with self.cond:
            thread = self.thread
        if thread is None:
            return
        if thread.is_alive():
            if sys.is_finalizing():
                self.channel.stop()
                return
            # The stop message goes through the queue that worker processes write to; a worker killed
            # while writing leaves its lock taken, and the put would never return. Sent from a
            # helper thread, that ends in the TimeoutError below instead of a hang.
            signal = threading.Thread(target=self.channel.stop, name=f"{self.name}-stop", daemon=True)
            signal.start()
            if not join:
                return
            signal.join(_STOP_TIMEOUT_S)
            thread.join(_STOP_TIMEOUT_S)
            if signal.is_alive():
                raise TimeoutError(
                    f"DALIServer thread {thread.name!r} could not be told to stop within {_STOP_TIMEOUT_S} s: the "
                    "request queue stays locked, most likely by a DataLoader worker that was killed while sending")
            if thread.is_alive():
                raise TimeoutError(f"DALIServer thread {thread.name!r} did not stop within {_STOP_TIMEOUT_S} s")
        with self.cond:
            self.thread = None
            self.results.clear()  # outputs of batches nobody consumed (an abandoned epoch)

    @property
    def running(self) -> bool:
        thread = self.thread
        return thread is not None and thread.is_alive()

    # -- the server thread ----------------------------------------------------------------------
    def _serve(self) -> None:
        in_flight: collections.deque = collections.deque()  # batch ids in run order
        stopping = False
        try:
            while True:
                # Take requests while the pipeline has room; block only when nothing is running.
                while not stopping and len(in_flight) < self.depth:
                    if in_flight and not self.channel.has_message():
                        break
                    message = self.channel.get()
                    if isinstance(message, str) and message == _STOP:
                        stopping = True
                    else:
                        self._start_run(message, in_flight)
                if not in_flight:
                    if stopping:
                        return
                    continue
                self._finish_run(in_flight)
        except BaseException as e:  # noqa: BLE001 - e.g. a request that cannot be unpickled
            self._fail(e, in_flight)
            raise

    def _start_run(self, request: _BatchRequest, in_flight: collections.deque) -> None:
        """Feeds ``request`` and schedules one run for it."""
        if self.failure is not None:
            self._publish(request.batch_id, _Result(error=self.failure))
            return
        try:
            self._feed(request)
            self.pipe.schedule_run(runs=1)
        except Exception as e:  # noqa: BLE001 - inputs may be half fed: the pipeline cannot go on
            self._fail(e, [request.batch_id])
            return
        in_flight.append(request.batch_id)

    def _fail(self, error: BaseException, batch_ids) -> None:
        """The pipeline cannot run any more: ``batch_ids`` and every later request get ``error``."""
        self.failure = error
        for batch_id in batch_ids:
            self._publish(batch_id, _Result(error=error))

    def _feed(self, request: _BatchRequest) -> None:
        for name in self.input_names:
            self.pipe.feed_input(name, request.inputs[name])

    def _finish_run(self, in_flight: collections.deque) -> None:
        batch_id = in_flight.popleft()
        try:
            outputs = self.pipe.share_outputs()
        except Exception as e:  # noqa: BLE001 - the pipeline is stopped; every waiter gets the error
            self._fail(e, [batch_id, *in_flight])
            in_flight.clear()
            return
        try:
            result = _Result(tensors=[batch_to_torch(out) for out in outputs])
        except Exception as e:  # noqa: BLE001 - e.g. a ragged output; only this batch fails
            result = _Result(error=e)
        finally:
            self.pipe.release_outputs()
        self._publish(batch_id, result)

    def _publish(self, batch_id: tuple[str, int], result: _Result) -> None:
        with self.cond:
            self.results[batch_id] = result
            self.cond.notify_all()

    # -- consumer side --------------------------------------------------------------------------
    def wait_for(self, batch_id: tuple[str, int]) -> _Result:
        with self.cond:
            while batch_id not in self.results:
                if self.failure is not None and not self.running:
                    return _Result(error=self.failure)
                if not self.running:
                    raise RuntimeError(
                        f"DALIServer thread {self.name!r} is not running, so batch {batch_id} will never be "
                        "produced: use `with server:`, server.start_thread(), or the proxy DataLoader")
                self.cond.wait(_LIVENESS_CHECK_S)
            return self.results[batch_id]

    def claim(self, batch_ids) -> None:
        with self.cond:
            for batch_id in batch_ids:
                self.results.pop(batch_id, None)


class DALIServer:
    """Runs a pipeline in a thread of the main process for PyTorch DataLoader workers.

    Use ``server.proxy`` inside a torch ``Dataset`` in place of the pipeline's inputs, and the proxy
    ``DataLoader`` (or a plain DataLoader plus ``server.produce_data`` on every batch) to get the
    pipeline's outputs in place of the placeholders. Each DataLoader batch is one pipeline
    iteration, so the DataLoader's batch size must not exceed the pipeline's ``batch_size``.

    Args:
      pipeline: a ``jaxdali.Pipeline`` with at least one ``fn.external_source(name=...)`` without a
        ``source``; the proxy's parameters are those sources' names.
      deterministic: DALI default False. True: batches run in the order the main process consumes
        them, so results do not depend on worker timing (slower: one batch at a time).

    Raises:
      TypeError: ``pipeline`` is not a Pipeline.
      RuntimeError: the pipeline has no external source.

    Example::

        @pipeline_def(batch_size=4, num_threads=2, device_id=None)
        def square():
            x = fn.external_source(name="x")
            return x * x

        class Numbers(torch.utils.data.Dataset):
            def __init__(self, proxy): self.proxy = proxy
            def __len__(self): return 8
            def __getitem__(self, i): return i, self.proxy(np.int64(i))

        server = DALIServer(square())
        loader = DataLoader(server, Numbers(server.proxy), batch_size=4, num_workers=2)
        for index, squared in loader:   # squared is a torch tensor computed by the pipeline
            ...

    The server feeds each batch request and schedules exactly one run for it, keeping up to
    ``prefetch_queue_depth`` runs in flight.
    """

    def __init__(self, pipeline: Pipeline, deterministic: bool = False):
        if not isinstance(pipeline, Pipeline):
            raise TypeError(f"Expected an NVIDIA DALI pipeline, got: {pipeline!r} (a jaxdali.Pipeline is needed)")
        input_names = pipeline.external_source_names()
        if not input_names:
            raise RuntimeError(NO_INPUTS_MSG)
        self._id = os.urandom(8).hex()
        self._pipe = pipeline
        self._deterministic = bool(deterministic)
        channel = _Channel()
        self._core = _ServerCore(pipeline, channel, f"jaxdali-proxy-server-{self._id}")
        self._proxy = _DALIProxy(self._id, input_names, pipeline.num_outputs, pipeline.max_batch_size,
                                 self._deterministic, channel)
        self._finalizer = weakref.finalize(self, _ServerCore.stop, self._core, False)
        self._submitted: set[tuple[str, int]] = set()  # deterministic mode: requests sent, not yet claimed

    # -- public API -----------------------------------------------------------------------------
    @property
    def proxy(self) -> _DALIProxy:
        """The callable to use in a Dataset: one argument per pipeline input (external source).

        One input: ``proxy(x)`` (positional or keyword). Several: keyword-only, ``proxy(*, a, b)``.
        Returns a placeholder per pipeline output (a bare one for a single output, else a tuple);
        collating them with torch's ``default_collate`` turns them into batch placeholders.

        Raises:
          ValueError: the arguments do not fit the signature (e.g. positional arguments with several
            inputs: "too many positional arguments").
        """
        return self._proxy

    @property
    def deterministic(self) -> bool:
        return self._deterministic

    def start_thread(self) -> None:
        """Starts the server thread (no-op when it runs)."""
        self._core.start()

    def stop_thread(self) -> None:
        """Lets the runs in flight finish, stops the server thread and forgets unclaimed outputs.

        Safe to call repeatedly.

        Raises:
          TimeoutError: the thread did not stop within 30 s.
        """
        self._core.stop()
        self._submitted.clear()

    @property
    def is_running(self) -> bool:
        return self._core.running

    def __enter__(self) -> "DALIServer":
        self.start_thread()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_thread()

    def produce_data(self, obj: Any) -> Any:
        """Replaces every batch placeholder of this server in ``obj`` by the pipeline's output tensor.

        Walks lists and dicts (changed in place), tuples and namedtuples (rebuilt) and objects'
        ``__dict__`` (changed in place); reference cycles are followed once.

        Returns:
          ``obj`` with the placeholders replaced (a new object where ``obj`` is a tuple or a
          placeholder itself).

        Raises:
          RuntimeError: "Critical error in pipeline: ..." when the pipeline failed (the original
            exception is the cause), or the server thread is not running.
          TypeError: ``obj`` holds a sample placeholder that was never collated into a batch.
        """
        fetched: dict[tuple[str, int], _Result] = {}

        def resolve(ref: DALIOutputBatchRef) -> Any:
            result = fetched.get(ref.batch_id)
            if result is None:
                if ref.request is not None and ref.batch_id not in self._submitted:
                    self._submitted.add(ref.batch_id)
                    self._proxy.channel.submit(ref.request)
                result = fetched[ref.batch_id] = self._core.wait_for(ref.batch_id)
            if result.error is not None:
                raise RuntimeError(f"{CRITICAL_ERROR_MSG}{type(result.error).__name__}: {result.error}") \
                    from result.error
            return result.tensors[ref.output_idx]

        try:
            return _replace_refs(obj, self._id, resolve, {})
        finally:
            self._core.claim(fetched)
            self._submitted.difference_update(fetched)

    def __repr__(self) -> str:
        state = "running" if self.is_running else "stopped"
        return f"DALIServer(inputs={self._proxy.input_names}, deterministic={self._deterministic}, {state})"


_LEAF_TYPES = (str, bytes, bytearray, int, float, complex, bool, type(None), torch.Tensor, type, range)


def _replace_refs(obj: Any, server_id: str, resolve, memo: dict[int, Any]) -> Any:
    """``obj`` with each ``DALIOutputBatchRef`` of ``server_id`` replaced by ``resolve(ref)``."""
    if isinstance(obj, DALIOutputBatchRef):
        return resolve(obj) if obj.server_id == server_id else obj
    if isinstance(obj, DALIOutputSampleRef) and obj.server_id == server_id:
        raise TypeError(
            f"produce_data got an uncollated sample placeholder {obj!r}: the proxy's outputs must go through "
            "torch's default_collate (a DataLoader with automatic batching, i.e. batch_size not None)")
    if isinstance(obj, _LEAF_TYPES) or inspect.ismodule(obj) or inspect.isroutine(obj):
        return obj
    key = id(obj)
    if key in memo:
        return memo[key]
    memo[key] = obj  # a cycle back to this object keeps the original
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            obj[i] = _replace_refs(item, server_id, resolve, memo)
    elif isinstance(obj, dict):
        for k, item in obj.items():
            obj[k] = _replace_refs(item, server_id, resolve, memo)
    elif isinstance(obj, tuple):
        items = [_replace_refs(item, server_id, resolve, memo) for item in obj]
        if any(new is not old for new, old in zip(items, obj)):
            memo[key] = type(obj)._make(items) if hasattr(obj, "_fields") else type(obj)(items)
    elif hasattr(obj, "__dict__"):
        attributes = vars(obj)
        for k, item in attributes.items():
            attributes[k] = _replace_refs(item, server_id, resolve, memo)
    return memo[key]


# =============================================================================================
# The DataLoader.


class DataLoader(torch.utils.data.DataLoader):
    """A ``torch.utils.data.DataLoader`` that returns a ``DALIServer``'s outputs in place of its
    placeholders.

    Its iterator starts the server thread at the first batch when it is not running (and then stops
    it at the end of the epoch or when the iterator is discarded), and calls
    ``server.produce_data`` on every batch. Meant for ``num_workers > 0``; also works with 0.

    Args:
      dali_server: the ``DALIServer`` whose ``proxy`` the dataset calls.
      *args, **kwargs: those of ``torch.utils.data.DataLoader``. Worker processes must use the
        platform's default start method (the server's request queue was made for it).

    Raises:
      TypeError: ``dali_server`` is not a DALIServer.
      ValueError: ``multiprocessing_context`` asks for another start method than the server's queue.
    """

    def __init__(self, dali_server: DALIServer, *args: Any, **kwargs: Any):
        if not isinstance(dali_server, DALIServer):
            raise TypeError(f"Expected a DALIServer, got: {dali_server!r}")
        super().__init__(*args, **kwargs)
        context = self.multiprocessing_context
        if self.num_workers > 0 and context is not None:
            method = context.get_start_method()
            if method != dali_server._proxy.channel.start_method:
                raise ValueError(
                    f"DataLoader: multiprocessing_context uses {method!r} but the DALIServer's request queue "
                    f"was made for {dali_server._proxy.channel.start_method!r} workers; leave "
                    "multiprocessing_context unset or create the server with the same default start method")
        self._dali_server = dali_server

    def _get_iterator(self):
        if self.num_workers == 0:
            return _ServedSingleProcessIter(self)
        return _ServedMultiProcessIter(self)


class _ServedIterMixin:
    """Starts the server on demand, replaces placeholders, stops a server it started.

    After a batch fails in the pipeline the iterator shuts down (workers and the server it
    started) at once, so nothing waits for garbage collection; later calls raise again.
    """

    def _attach_server(self, loader: DataLoader) -> None:
        self._dali_server = loader._dali_server
        self._started_server = False
        self._pipeline_error: BaseException | None = None

    def _next_data(self):
        if self._pipeline_error is not None:
            raise RuntimeError("this DataLoader iterator stopped after a pipeline error (see the cause)") \
                from self._pipeline_error
        server = self._dali_server
        if not server.is_running:
            server.start_thread()
            self._started_server = True
        try:
            data = super()._next_data()
        except StopIteration:
            self._stop_started_server()
            raise
        try:
            return server.produce_data(data)
        except Exception as e:
            self._pipeline_error = e
            self._shut_down()
            raise

    def _shut_down(self) -> None:
        self._stop_started_server()

    def _stop_started_server(self) -> None:
        if getattr(self, "_started_server", False):
            self._started_server = False
            self._dali_server.stop_thread()


class _ServedSingleProcessIter(_ServedIterMixin, _SingleProcessDataLoaderIter):
    def __init__(self, loader: DataLoader):
        self._attach_server(loader)
        super().__init__(loader)

    def __del__(self) -> None:
        self._stop_started_server()


class _ServedMultiProcessIter(_ServedIterMixin, _MultiProcessingDataLoaderIter):
    def __init__(self, loader: DataLoader):
        self._attach_server(loader)
        super().__init__(loader)

    def _shut_down(self) -> None:
        self._shutdown_workers()

    def _shutdown_workers(self) -> None:
        # Workers first: the server keeps reading requests while they finish theirs.
        try:
            super()._shutdown_workers()
        finally:
            self._stop_started_server()
