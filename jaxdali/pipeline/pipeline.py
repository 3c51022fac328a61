"""``Pipeline``: graph definition scope, build, the run APIs, reader metadata and checkpoints."""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Any, Sequence


from jaxdali import pickling
from jaxdali.ops.readers.shared_listing import shared_listings
from jaxdali.ops.operator import BuildContext, Operator
from jaxdali.core import checkpoint as state_codec
from jaxdali.pipeline.batch import PipelineBatch
from jaxdali.pipeline.executor import HostSlots, Prefetcher, worker_pool
from jaxdali.pipeline.group import GroupMember, GroupPart, PipelineGroup, form_group
from jaxdali.ops.graph import DataNode, Graph, GraphScope, constant_node, current_graph, default_constant_array, reachable_ops
from jaxdali.pipeline.runner import GraphRunner
from jaxdali.types import PipelineAPIType, to_dali_type

__all__ = ["Pipeline", "IteratorAPI"]

_log = logging.getLogger("jaxdali")

_UNKNOWN_READER = 'Assert on "meta" failed: Operator {}  not found or does not expose valid metadata.'


class Pipeline:
    """A DALI-style data pipeline: a graph of operators run batch by batch with prefetching.

    Define the graph inside ``with pipe:`` and ``pipe.set_outputs(...)``, or (more commonly) with the
    ``@pipeline_def`` decorator. Driving styles: ``run()``; ``schedule_run()``/``share_outputs()``/
    ``release_outputs()``/``outputs()``; or a framework iterator. A pipeline keeps the first style
    it is used with ("Mixing pipeline API type" otherwise).

    Args:
      batch_size: maximum number of samples per batch (required, > 0).
      num_threads: worker threads for per-sample host work (default: the number of CPU cores).
      device_id: index of the local JAX device that ``.gpu()`` data and ``device="gpu"`` operators
        use. None (default): no device unless the graph needs one, then the first local device.
      seed: base seed of all random operators; None picks a random seed.
      exec_pipelined, exec_async: when both are True (default), the pipeline computes
        ``prefetch_queue_depth`` batches ahead on a producer thread; otherwise one at a time.
      prefetch_queue_depth: batches computed ahead (int, or DALI's dict ``{"cpu_size": n, "gpu_size": m}``
        whose ``cpu_size`` is used).
      enable_checkpointing: record state so that ``checkpoint()`` works.
      checkpoint: bytes from ``checkpoint()``; the pipeline resumes exactly where it was taken.
      py_num_workers, py_start_method: process pool for ``external_source(parallel=True)``.
      py_callback_pickler: how the sources of parallel external sources reach workers started with
        ``"spawn"``/``"forkserver"``: None (default) pickles lambdas, local functions and closures by
        value (``jaxdali.pickling``); or an object with ``dumps``/``loads`` such as the ``cloudpickle``
        module, optionally as ``(pickler, dumps_kwargs, loads_kwargs)``.
      output_dtype, output_ndim, output_layout: per-output contracts checked for every batch (a
        single value applies to all outputs).
      bytes_per_sample, set_affinity, max_streams, default_cuda_stream_priority, enable_memory_stats,
        exec_dynamic, experimental_exec_dynamic, stream_policy, concurrency:
        accepted for compatibility; they do not change results.

    .. note::
       Outputs stay valid after ``release_outputs()`` (as with DALI's dynamic executor).
    """

    def __init__(self, batch_size: int | None = None, num_threads: int | None = None, device_id: int | None = None,
                 seed: int | None = None, exec_pipelined: bool = True, prefetch_queue_depth: int | dict = 2,
                 exec_async: bool = True, bytes_per_sample: int = 0, set_affinity: bool = False,
                 max_streams: int | None = None, default_cuda_stream_priority: int | None = None, *,
                 enable_memory_stats: bool = False, enable_checkpointing: bool = False,
                 checkpoint: bytes | str | None = None, py_num_workers: int = 1, py_start_method: str = "fork",
                 py_callback_pickler: Any = None, output_dtype: Any = None, output_ndim: Any = None,
                 output_layout: Any = None, exec_dynamic: bool | None = None,
                 experimental_exec_dynamic: bool | None = None, stream_policy: Any = None, concurrency: Any = None):
        if batch_size is None or isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size <= 0:
            raise ValueError(f"Pipeline: batch_size must be a positive integer, got {batch_size!r}")
        if num_threads is None or num_threads < 1:
            num_threads = os.cpu_count() or 1
        if isinstance(prefetch_queue_depth, dict):
            depth = prefetch_queue_depth.get("cpu_size")
            if depth is None:
                raise ValueError(f"Pipeline: prefetch_queue_depth dict needs 'cpu_size', got {prefetch_queue_depth}")
        else:
            depth = prefetch_queue_depth
        if isinstance(depth, bool) or int(depth) != depth or depth < 1:
            raise ValueError(f"Pipeline: prefetch_queue_depth must be a positive integer, got {prefetch_queue_depth!r}")
        if device_id is not None and (int(device_id) != device_id):
            raise ValueError(f"Pipeline: device_id must be an integer or None, got {device_id!r}")
        if py_start_method not in ("fork", "spawn", "forkserver"):
            raise ValueError(f"Pipeline: py_start_method must be 'fork', 'spawn' or 'forkserver', got {py_start_method!r}")
        self._max_batch_size = int(batch_size)
        self._num_threads = int(num_threads)
        self._device_id = None if device_id is None or device_id < 0 else int(device_id)
        self._requested_seed = seed
        self._seed = None if seed is None or seed < 0 else int(seed)
        self._exec_pipelined = bool(exec_pipelined)
        self._exec_async = bool(exec_async)
        self._prefetch_queue_depth = prefetch_queue_depth
        self._depth = int(depth) if (exec_pipelined and exec_async) else 1
        self._exec_dynamic = exec_dynamic if exec_dynamic is not None else experimental_exec_dynamic
        self._enable_checkpointing = bool(enable_checkpointing)
        self._checkpoint_in = checkpoint
        self._py_num_workers = int(py_num_workers)
        self._py_start_method = py_start_method
        pickling.resolve_pickler(py_callback_pickler)  # a bad value fails here, not in the first batch
        self._py_callback_pickler = py_callback_pickler
        self._output_contract = (output_dtype, output_ndim, output_layout)

        self._graph = Graph(owner=self)
        self._outputs: list[DataNode] | None = None
        self._built = False
        self._build_lock = threading.RLock()
        self._runner: GraphRunner | None = None
        self._prefetcher: Prefetcher | GroupMember | None = None
        self._group_part: GroupPart | None = None
        self._built_ops: dict[str, Operator] = {}
        self._api_type: PipelineAPIType | None = None
        self._need_prefetch = True
        self._last_iter = False
        self._sticky_error: BaseException | None = None
        self._consumed_state: dict | None = None
        self._fingerprint: dict | None = None
        self._restored = False
        self._restored_iterator_data: Any = None
        self._restored_iteration = 0
        self._finalizer: weakref.finalize | None = None
        self._sources_end_epochs = False
        self._closed = False

    # -- graph definition -------------------------------------------------------------------------------
    def __enter__(self) -> "Pipeline":
        GraphScope(self._graph).__enter__()
        return self

    def __exit__(self, *exc) -> None:
        GraphScope(self._graph).__exit__(*exc)

    @staticmethod
    def current() -> "Pipeline | None":
        """The pipeline whose graph is being defined on this thread (inside ``with pipe:``)."""
        graph = current_graph()
        return None if graph is None else graph.owner

    def set_outputs(self, *outputs: Any) -> None:
        """Declares the pipeline outputs (DataNodes or constants)."""
        nodes = []
        with GraphScope(self._graph):
            for i, out in enumerate(outputs):
                if isinstance(out, DataNode):
                    nodes.append(out)
                elif isinstance(out, (list, tuple)) and any(isinstance(x, DataNode) for x in out):
                    raise TypeError(f"Pipeline output {i} is a {type(out).__name__} containing DataNodes; "
                                    "return the nodes as separate outputs (a flat tuple)")
                else:
                    arr = default_constant_array(out)
                    if arr.dtype == object:
                        raise TypeError(f"Pipeline output {i} must be a DataNode or a constant, got {out!r}")
                    nodes.append(constant_node(arr))
        self._outputs = nodes

    def define_graph(self):
        """Override in a subclass to define the graph (DALI's legacy style); returns the outputs."""
        raise NotImplementedError

    # -- build ------------------------------------------------------------------------------------------
    def build(self) -> None:
        """Validates the graph and prepares the operators. Idempotent; every run API calls it."""
        if self._built:  # set last, once everything is built: no lock needed to see it
            return
        with self._build_lock:
            if self._built:
                return
            if self._outputs is None:
                if type(self).define_graph is not Pipeline.define_graph:
                    with self:
                        outs = self.define_graph()
                    self.set_outputs(*(outs if isinstance(outs, (list, tuple)) else (outs,)))
                else:
                    raise RuntimeError("Pipeline has no outputs: define the graph with @pipeline_def, "
                                       "set_outputs() or define_graph()")
            checkpoint = None
            if self._checkpoint_in is not None:
                checkpoint = state_codec.decode(self._checkpoint_in)
                self._seed = int(checkpoint["pipeline"]["seed"])
            if self._seed is None:
                from jaxdali.ops import rng

                self._seed = rng.random_seed()
            ops = reachable_ops(self._outputs, [op for op in self._graph.ops if op.preserve])
            if self._enable_checkpointing or checkpoint is not None:
                # Only checkpoints use it, and it costs seconds when an argument lists a million files.
                self._fingerprint = state_codec.fingerprint(
                    self._max_batch_size, [op.fingerprint() for op in ops], [o.name for o in self._outputs])
            if checkpoint is not None:
                diff = state_codec.describe_differences(checkpoint["fingerprint"], self._fingerprint)
                if diff:
                    raise state_codec.CheckpointError(
                        "the checkpoint was taken from a different pipeline; it cannot be restored here:\n" + diff)
            ctx = BuildContext(max_batch_size=self._max_batch_size, num_threads=self._num_threads, seed=self._seed,
                               pipeline_name=self._display_name(), py_num_workers=self._py_num_workers,
                               py_start_method=self._py_start_method,
                               py_callback_pickler=self._py_callback_pickler, device_id=self._device_id,
                               checkpointing=self._enable_checkpointing or checkpoint is not None)
            built = []
            try:
                for node in ops:
                    built.append((node, node.schema.impl(node, ctx)))
            except BaseException:
                for _, op in built:
                    op.close()
                raise
            self._built_ops = {node.name: op for node, op in built}
            self._sources_end_epochs = any(op.ends_epochs for _, op in built)
            pool = worker_pool()
            pool.ensure(self._num_threads)
            runner = GraphRunner(built, self._outputs, pool, self._num_threads, self._max_batch_size,
                                 self._device_id, self._display_name())
            if checkpoint is not None:
                try:
                    self._restore(runner, checkpoint)
                except BaseException:
                    runner.close()
                    raise
                self._restored = True
                self._restored_iterator_data = checkpoint.get("iterator")
                self._restored_iteration = int(checkpoint["pipeline"]["runner"]["iteration"])
                self._last_iter = bool(checkpoint["pipeline"].get("last_iter", False))
            self._consumed_state = runner.snapshot()
            contract = self._output_contract
            n_outputs = len(self._outputs)

            def produce():
                batch, snapshot = runner.run_iteration()
                _check_output_contract(batch.outputs, contract, n_outputs)
                return batch, snapshot

            def finish(job, done=frozenset()):
                batch, snapshot = runner.finish_iteration(job, done)
                _check_output_contract(batch.outputs, contract, n_outputs)
                return batch, snapshot

            # Two batches in flight when two can be queued and there are threads to share: the next
            # batch begins (sources, in order) while the previous one is finished (executor.Prefetcher).
            producers = 2 if self._depth >= 2 and self._num_threads >= 2 else 1
            runner.overlap(producers)
            prefetcher = Prefetcher(produce, self._display_name(), runner.begin_iteration, finish, producers,
                                    cancel=runner.cancel, on_stop=runner.close)
            self._runner, self._prefetcher = runner, prefetcher
            self._group_part = GroupPart(runner, finish, self._display_name(), producers)
            # Neither the producers nor anything they hold refer to this object, so dropping the last
            # reference stops them at once, with no garbage collection. The finalizer may run inside a
            # collection on any thread, even one holding locks that the producers wait for, so it only
            # signals them to stop (join=False); the last one to leave closes the operators.
            self._finalizer = weakref.finalize(self, _stop_producers, prefetcher)
            self._graph.freeze()
            self._built = True

    def _restore(self, runner: GraphRunner, checkpoint: dict) -> None:
        runner.restore(checkpoint["pipeline"]["runner"])
        resumed = self.resumed_readers()
        if resumed:
            # Readers re-shard what is left of the epoch; an external source's state is an iteration
            # index of the old layout, which has no meaning on the new one.
            fixed = [f"{name!r} (fn.{op.node.schema.name})" for name, op in self._built_ops.items()
                     if op.node.schema.is_source and not op.can_reshard]
            if fixed:
                raise state_codec.ReshardError(
                    f"the readers {sorted(resumed)} resume on another shard layout, but the source(s) "
                    f"{', '.join(fixed)} cannot: restore this checkpoint on the layout it was taken on")
        saved_batch = checkpoint["fingerprint"]["batch_size"]
        if saved_batch != self._max_batch_size and not resumed:
            raise state_codec.CheckpointError(
                "the checkpoint was taken from a different pipeline; it cannot be restored here:\n"
                f"  - batch size: in checkpoint {saved_batch}, in pipeline {self._max_batch_size}")

    def resumed_readers(self) -> dict[str, dict]:
        """Readers finishing an epoch that a checkpoint from another shard layout left unfinished:
        ``{name: {"residual": samples left in that epoch (all shards), "next_epoch": ...}}``."""
        infos = {name: op.resume_info() for name, op in self._built_ops.items()}
        return {name: info for name, info in infos.items() if info is not None}

    def _display_name(self) -> str:
        return f"pipeline-{id(self):x}"

    # -- API style lock ---------------------------------------------------------------------------------
    def _use_api(self, api: PipelineAPIType) -> None:
        if self._api_type is None:
            self._api_type = api
        elif self._api_type != api:
            raise RuntimeError(f"Mixing pipeline API type. Currently used: {self._api_type}, "
                               f"but trying to use {api}")

    # -- running ----------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed; build a new pipeline (from a checkpoint to continue)")

    def _schedule(self, runs: int | None = None) -> None:
        self.build()
        self._check_open()
        if self._last_iter or self._sticky_error is not None:
            return
        if runs is None:
            runs = self._depth if self._need_prefetch else 1
        self._need_prefetch = False
        self._prefetcher.schedule(runs)

    def _share(self, schedule_next: bool = False) -> PipelineBatch:
        """The next batch; with ``schedule_next``, also ``_schedule()`` once it is known to be
        a batch (in the same lock round trip as the fetch where no prefetch is due)."""
        if not self._built:
            self.build()
        self._check_open()
        if self._sticky_error is not None:
            raise RuntimeError("the pipeline stopped after an earlier error (see the cause)") from self._sticky_error
        if self._last_iter and self._prefetcher.queued() == 0:
            raise StopIteration
        credit = schedule_next and not self._need_prefetch and not self._last_iter
        item = self._prefetcher.get(credit)
        if schedule_next and not credit and not (item.end or item.error):
            self._schedule()
        if item.end:
            self._last_iter = True
            raise StopIteration
        if item.error is not None:
            # Nothing more can be produced after an error: stop the producers now, so that no thread
            # outlives this object's usefulness, whatever refers to the error and its traceback.
            self._prefetcher.close(join=False)
            self._sticky_error = item.error
            raise item.error
        self._consumed_state = item.state
        return item.outputs

    def schedule_run(self, *, runs: int | None = None) -> None:
        """Starts computing the next batch (the first call of an epoch prefetches ``prefetch_queue_depth``).

        Args:
          runs: (jaxdali only) schedule exactly this many iterations instead, e.g. 1 when each run
            needs data fed just before it.
        """
        self._use_api(PipelineAPIType.SCHEDULED)
        if runs is not None and (isinstance(runs, bool) or int(runs) != runs or runs < 1):
            raise ValueError(f"schedule_run: runs must be a positive integer, got {runs!r}")
        self._schedule(runs)

    def share_outputs(self) -> tuple:
        """Waits for the next scheduled batch and returns its outputs (one TensorList per output)."""
        self._use_api(PipelineAPIType.SCHEDULED)
        return self._share().outputs

    def release_outputs(self) -> None:
        """Hands the last shared batch back (its arrays remain valid)."""
        self._use_api(PipelineAPIType.SCHEDULED)

    def outputs(self) -> tuple:
        """``release_outputs()`` followed by ``share_outputs()``."""
        self._use_api(PipelineAPIType.SCHEDULED)
        return self._share().outputs

    def run(self, **pipeline_inputs: Any) -> tuple:
        """Runs one iteration and returns its outputs; keyword arguments feed named external sources.

        Feeding through ``run`` needs ``prefetch_queue_depth=1`` (or ``exec_pipelined=False``), because
        the pipeline must not run ahead of the data it has been given.
        """
        self._use_api(PipelineAPIType.BASIC)
        if pipeline_inputs:
            if self._depth != 1:
                raise RuntimeError(
                    "Pipeline.run() with inputs requires prefetch_queue_depth=1 or exec_pipelined=False, "
                    f"got prefetch_queue_depth={self._prefetch_queue_depth!r}")
            for name, data in pipeline_inputs.items():
                self.feed_input(name, data)
        self._schedule()
        return self._share().outputs

    def reset(self) -> None:
        """Starts a new epoch after an external source ended the previous one (no effect otherwise).

        As in DALI, the end counts once a scheduled run has hit it, even if batches computed before it
        have not been taken yet: those stay queued and come first in the new epoch.
        """
        self.build()
        self._check_open()
        if not self._last_iter:
            if not self._sources_end_epochs:
                return
            # DALI's scheduling call runs the sources itself, so it knows at once that one ended; here
            # the producer finds out on its own thread: let it finish the runs already scheduled.
            self._prefetcher.wait_idle()
            if not self._prefetcher.ended():
                return
        else:
            self._prefetcher.wait_idle()
        self._runner.start_epoch()
        self._consumed_state = self._runner.snapshot()
        self._last_iter = False
        self._need_prefetch = True
        self._prefetcher.resume()

    def empty(self) -> bool:
        """True when no batch is queued, running or scheduled."""
        return not self._built or self._prefetcher.pending() == 0

    def feed_input(self, data_node: str | DataNode, data: Any, layout: str | None = None, cuda_stream: Any = None,
                   use_copy_kernel: bool = False) -> None:
        """Pushes one batch into the external source named ``data_node`` (a name or its DataNode).

        ``data`` is an array with a leading batch axis, or a list of per-sample arrays (NumPy, torch,
        JAX, DLPack-capable objects).
        """
        self.build()
        self._check_open()
        name = data_node.source.name if isinstance(data_node, DataNode) else data_node
        op = self._built_ops.get(name)
        if op is None or not (op.takes_fed_data or op.node.schema.name == "external_source"):
            raise RuntimeError(f"feed_input: the pipeline has no external source named {name!r}; "
                               f"its fed external sources are {self.external_source_names()}")
        op.feed(data, layout)
        self._prefetcher.wakeup()

    # -- metadata ---------------------------------------------------------------------------------------
    def reader_meta(self, name: str | None = None) -> dict:
        """Reader metadata (epoch_size, epoch_size_padded, number_of_shards, shard_id, pad_last_batch,
        stick_to_shard) for the reader ``name``, or a dict of them for all readers."""
        self.build()
        metas = {n: op.reader_meta() for n, op in self._built_ops.items()}
        readers = {n: meta for n, meta in metas.items() if meta is not None}
        if name is None:
            return readers
        if name not in readers:
            raise RuntimeError(_UNKNOWN_READER.format(name))
        return readers[name]

    def epoch_size(self, name: str | None = None) -> int | dict:
        """``epoch_size_padded`` of the reader ``name`` (or a dict over all readers)."""
        meta = self.reader_meta(name)
        if name is None:
            return {k: v["epoch_size_padded"] for k, v in meta.items()}
        return meta["epoch_size_padded"]

    def skipped_samples(self) -> list[dict]:
        """(jaxdali only) The samples replaced under ``error_policy="replace"`` since the pipeline was
        built, each once, in the order they were first met (prefetched batches included):
        ``[{"operator": name, "source": file (or "sample i of iteration k"), "error": message}]``."""
        if not self._built:
            return []
        return [entry for op in self._built_ops.values() if op.skip_log is not None
                for entry in op.skip_log.entries()]

    def executor_statistics(self) -> dict:
        """Seconds spent in each operator since the pipeline started, by operator name.

        Two more entries make the sum equal the producer threads' busy time: ``"(device stage)"``,
        dispatching the fused device program and placing outputs on the device, and ``"(executor)"``,
        the rest (scheduling, batch assembly, checks). With two batches in flight (``num_threads >= 2``
        and ``prefetch_queue_depth >= 2``) both producers' time is counted. An operator that computes its
        input's samples as it reads them (a decoder feeding ``resize``, see ``fused_operators``) is charged
        with both operators' work.
        """
        runner = self._runner
        if runner is None:
            return {}
        stats = dict(runner.op_seconds)
        stats["(device stage)"] = runner.device_seconds
        stats["(executor)"] = max(0.0, runner.busy_seconds - sum(stats.values()))
        return stats

    def fused_operators(self) -> dict[str, str]:
        """``{reader: producer}`` for the operators that so far computed their input's samples as they read
        them (a decoder feeding ``resize``): ``executor_statistics`` charges the reader with both."""
        return dict(self._runner.fed_by) if self._runner is not None else {}

    def queue_statistics(self) -> dict:
        """How the prefetch queue is used: who waits for whom (see ``jaxdali.pipeline.executor.QueueStats``).

        Returns a dict: ``batches`` (produced), ``producer_busy_s``, ``producer_idle_s`` (waiting for
        the consumer), ``consumer_requests``, ``consumer_wait_s`` (waiting for data),
        ``consumer_empty_requests``, ``mean_queue_occupancy`` (finished batches a request found) and
        ``queued`` (now), plus ``queue_depth``.
        """
        if self._runner is None:
            return {}
        q = self._prefetcher.statistics()
        return {"batches": self._runner.batches, "producer_busy_s": self._runner.busy_seconds,
                "producer_idle_s": q.producer_idle_seconds, "consumer_requests": q.gets,
                "consumer_wait_s": q.consumer_wait_seconds, "consumer_empty_requests": q.empty_gets,
                "mean_queue_occupancy": q.occupancy_sum / q.gets if q.gets else 0.0, "queued": q.queued,
                "queue_depth": self._depth}

    def _share_host_threads(self, slots: HostSlots, pipelines: int) -> None:
        """See ``share_host_threads``."""
        self.build()
        self._runner.overlap(pipelines * self._prefetcher.producers)
        self._prefetcher.share_slots(slots)

    def _join_group(self, member: GroupMember) -> None:
        """Takes batches from ``member`` (a ``PipelineGroup``'s) instead of this pipeline's own producer,
        which never started."""
        self._finalizer.detach()
        self._prefetcher.abandon()
        self._prefetcher = member
        self._finalizer = weakref.finalize(self, _stop_producers, member)

    def set_output_device(self, device, finish=None, defer: bool = False) -> None:
        """Device-output mode, set by framework iterators (the JAX iterator does it for pipelines with a
        ``device_id``): every dense output becomes a ``jax.Array`` on ``device``, placed by the producer
        thread, and trailing per-pixel host operators with a JAX implementation whose results only
        feed outputs run in the fused device stage, with identical values (DESIGN "uint8 leaves the
        host"). ``finish(outputs)``, if given, runs on the producer thread after placement; what it
        returns reaches framework iterators as the batch's ``PipelineBatch.prepared``. Applies
        to batches computed after the call; ``None`` returns to host outputs. Pipelines driven by
        ``run()`` keep host outputs unless this is called. ``defer``: the iterator runs the device
        stage itself (``PipelineBatch.prepared`` is the batch's ``PendingOutputs``); ignored when
        the pipeline checks its outputs (``output_dtype``, ``output_ndim``, ``output_layout``).
        """
        self.build()
        checked = any(c is not None for c in self._output_contract)
        self._runner.set_output_device(device, finish, defer and not checked)

    # -- checkpoints ------------------------------------------------------------------------------------
    def checkpoint(self, filename: str | os.PathLike | None = None) -> bytes:
        """The state after the last batch handed out (not what was prefetched), as bytes.

        Pass it as ``checkpoint=`` to a pipeline with the same definition to continue exactly there.
        """
        data = self._checkpoint_bytes(None)
        if filename is not None:
            with open(filename, "wb") as f:
                f.write(data)
        return data

    def _checkpoint_bytes(self, iterator_data: Any) -> bytes:
        if not self._enable_checkpointing:
            raise RuntimeError("Checkpointing is not enabled for this pipeline: construct it with "
                               "enable_checkpointing=True")
        self.build()
        pipeline_state = {"seed": self._seed, "runner": self._consumed_state, "last_iter": self._last_iter}
        return state_codec.encode(self._fingerprint, pipeline_state, iterator_data)

    @property
    def is_restored_from_checkpoint(self) -> bool:
        self.build()
        return self._restored

    def iterator_api(self) -> "IteratorAPI":
        """The interface framework iterators drive; locks the pipeline into the ITERATOR API style."""
        self._use_api(PipelineAPIType.ITERATOR)
        self.build()
        return IteratorAPI(self)

    # -- lifecycle --------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stops the producer threads (waiting for them), then closes the operators (worker processes,
        files) and drops the queued batches. Idempotent; also right after an error.

        Later ``run()``/``share_outputs()`` calls, and iterators over this pipeline, raise
        RuntimeError; ``checkpoint()`` still describes the last batch handed out, so a new pipeline
        built with it continues exactly there. ``with contextlib.closing(pipe):`` closes it at the end
        of a block (``with pipe:`` is DALI's graph-definition scope).
        """
        self._closed = True
        self._sticky_error = None  # its traceback refers to this object's frames
        if self._finalizer is not None and self._finalizer.detach() is not None:
            try:
                self._prefetcher.close(join=True)
            except TimeoutError as e:
                _log.warning("%s", e)

    def start_py_workers(self) -> None:
        """Builds the pipeline, which starts the processes of parallel external sources."""
        self.build()

    # -- properties -------------------------------------------------------------------------------------
    @property
    def max_batch_size(self) -> int:
        return self._max_batch_size

    @property
    def batch_size(self) -> int:
        """Deprecated alias of ``max_batch_size``."""
        return self._max_batch_size

    @property
    def num_threads(self) -> int:
        return self._num_threads

    @property
    def device_id(self) -> int | None:
        return self._device_id

    @property
    def seed(self) -> int | None:
        return self._seed if self._seed is not None else self._requested_seed

    @property
    def exec_pipelined(self) -> bool:
        return self._exec_pipelined

    @property
    def exec_async(self) -> bool:
        return self._exec_async

    @property
    def exec_dynamic(self) -> bool:
        return bool(self._exec_dynamic)

    @property
    def prefetch_queue_depth(self) -> int | dict:
        return self._prefetch_queue_depth

    @property
    def queue_depth(self) -> int:
        """Batches computed ahead: ``prefetch_queue_depth`` when pipelined and async, else 1."""
        return self._depth

    @property
    def enable_checkpointing(self) -> bool:
        return self._enable_checkpointing

    @property
    def num_outputs(self) -> int:
        self.build()
        return len(self._outputs)

    @property
    def output_names(self) -> list[str]:
        self.build()
        return [o.name for o in self._outputs]

    def external_source_names(self) -> list[str]:
        """Names of the external sources that take ``feed_input`` data (no ``source``), in graph order."""
        self.build()
        return [n for n, o in self._built_ops.items() if o.takes_fed_data]

    def __repr__(self) -> str:
        return (f"Pipeline(batch_size={self._max_batch_size}, num_threads={self._num_threads}, "
                f"device_id={self._device_id}, seed={self.seed}, prefetch_queue_depth={self._prefetch_queue_depth})")


class IteratorAPI:
    """What framework iterators (``jaxdali.plugin``) use to drive a pipeline."""

    def __init__(self, pipe: Pipeline):
        self._pipe = pipe

    def schedule_run(self) -> None:
        self._pipe._schedule()

    def share_and_schedule(self) -> PipelineBatch:
        """The next batch (outputs, rows not real, what the finisher prepared), with the next run
        scheduled."""
        return self._pipe._share(schedule_next=True)

    def set_output_device(self, device, finish=None, defer: bool = False) -> None:
        """See ``Pipeline.set_output_device``."""
        self._pipe.set_output_device(device, finish, defer)

    def reset(self) -> None:
        self._pipe.reset()

    def empty(self) -> bool:
        return self._pipe.empty()

    def checkpoint(self, iterator_data: Any) -> bytes:
        return self._pipe._checkpoint_bytes(iterator_data)

    @property
    def restored_iterator_data(self) -> Any:
        return self._pipe._restored_iterator_data

    @property
    def is_restored_from_checkpoint(self) -> bool:
        return self._pipe._restored

    @property
    def restored_iteration(self) -> int:
        return self._pipe._restored_iteration

    def reader_resume(self, name: str) -> dict | None:
        """Residual-epoch info of reader ``name`` after a re-sharded restore (see ``Pipeline.resumed_readers``)."""
        return self._pipe.resumed_readers().get(name)


def _stop_producers(prefetcher: Prefetcher) -> None:
    prefetcher.close(join=False)


def _check_output_contract(outputs: Sequence, contract: tuple, n_outputs: int) -> None:
    dtypes, ndims, layouts = contract
    for kind, expected in (("dtype", dtypes), ("ndim", ndims), ("layout", layouts)):
        if expected is None:
            continue
        per_output = list(expected) if isinstance(expected, (list, tuple)) else [expected] * n_outputs
        if len(per_output) != n_outputs:
            raise ValueError(f"Pipeline output_{kind} lists {len(per_output)} values for {n_outputs} outputs")
        for i, (out, want) in enumerate(zip(outputs, per_output)):
            if want is None:
                continue
            if kind == "dtype":
                got = out.dtype
                if got != to_dali_type(want):
                    raise TypeError(f"Pipeline output {i}: expected dtype {to_dali_type(want)!r}, got {got!r}")
            elif kind == "ndim":
                if out.ndim() != want:
                    raise ValueError(f"Pipeline output {i}: expected ndim {want}, got {out.ndim()}")
            elif out.layout() != want:
                raise ValueError(f"Pipeline output {i}: expected layout {want!r}, got {out.layout()!r}")


def host_group(pipelines: Sequence[Pipeline]) -> PipelineGroup | None:
    """The ``PipelineGroup`` that computes the batches of all of ``pipelines``, if they form one."""
    members = [getattr(pipe, "_prefetcher", None) for pipe in pipelines]
    if not members or not all(isinstance(m, GroupMember) for m in members):
        return None
    group = members[0].group
    return group if all(m.group is group for m in members) and len(group.members) == len(members) else None


def share_host_threads(pipelines: Sequence[Pipeline]) -> None:
    """Schedules the host work of an iterator's pipelines (one per device) as one pipeline's.

    Pipelines of one definition whose operators after the sources are ``row_wise`` form a
    ``PipelineGroup`` (``jaxdali.pipeline.group``): one pipeline's producers compute every pipeline's
    batch of a round together. Otherwise a batch of any of them is computed only while holding one of ``num_threads`` shared slots, and
    spreads its per-sample work over ``num_threads // (pipelines x producers)`` threads (at least one).
    Without it, every pipeline's producers compute at once on cores sized for one pipeline's
    ``num_threads``: more batches alive (memory) and threads contending for cores and the GIL.
    What each pipeline computes, and in which order, is unchanged; only when and on which thread.
    Builds the pipelines (their readers list the data set once, ``shared_listing``); call before the
    first batch is scheduled.
    """
    if len(pipelines) < 2:
        return
    with shared_listings():
        for pipe in pipelines:
            pipe.build()
    unstarted = all(isinstance(pipe._prefetcher, Prefetcher) and pipe._prefetcher.unstarted() for pipe in pipelines)
    members = form_group([pipe._group_part for pipe in pipelines]) if unstarted else None
    if members is not None:
        for pipe, member in zip(pipelines, members):
            pipe._join_group(member)
        return
    slots = HostSlots(max(pipe.num_threads for pipe in pipelines))
    for pipe in pipelines:
        pipe._share_host_threads(slots, len(pipelines))
