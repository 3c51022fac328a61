"""Runs one iteration of a built graph: sources, host operators and the device stage, in order.

Device-output mode (``set_output_device``, chosen by framework iterators through
``Pipeline.set_output_device``): every dense output is delivered as a ``jax.Array`` on the given
device, placed by the producer thread, and the trailing per-pixel host operators that have a JAX
implementation and whose results only feed pipeline outputs (or other such operators) are recorded
into the fused device stage instead of running on the host (DESIGN "uint8 leaves the host"). Their
device implementations give the host's values bit for bit (tests/ops/test_device_stage.py), so the
mode changes where the work runs, never the data. An operator whose inputs are not dense on a given
batch runs on the host as usual, unless it can make them dense cheaply (``dense_device_inputs``,
e.g. crop_mirror_normalize cutting its windows out of a ragged batch).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Sequence

import numpy as np

from jaxdali.core import options
from jaxdali.ops.operator import ArgValues, Operator, RunContext
from jaxdali.ops.sample_source import SampleSource
from jaxdali.pipeline.batch import PipelineBatch
from jaxdali.pipeline.device_stage import (DeviceProgram, DeviceValue, OutputRecycler, PendingOutputs, jax_device,
                                           place_on_device)
from jaxdali.pipeline.executor import Cancelled, WorkerPool
from jaxdali.pipeline.plan import HOST_OUTPUTS, OutputMode, plan_run
from jaxdali.ops.graph import DataNode, OpNode
from jaxdali.core.checkpoint import CheckpointError
from jaxdali.tensors import TensorListCPU, TensorListGPU

__all__ = ["GraphRunner"]


class _Job:
    """One iteration between ``begin_iteration`` and ``finish_iteration``."""

    __slots__ = ("ctx", "mode", "values", "program", "snapshot")

    def __init__(self, ctx: RunContext, mode: OutputMode):
        self.ctx = ctx
        self.mode = mode  # fixed for the batch
        self.values: dict[int, Any] = {}
        self.program: DeviceProgram | None = None
        self.snapshot: dict | None = None


class GraphRunner:
    """Executes a pipeline's operators for one batch at a time and tracks the pipeline state.

    State (all plain data): ``iteration`` (batches produced since the start, drives random numbers),
    ``epoch`` and ``iteration_in_epoch`` (external-source epochs), and each stateful operator's state.
    """

    def __init__(self, ops: Sequence[tuple[OpNode, Operator]], outputs: Sequence[DataNode], pool: WorkerPool,
                 num_threads: int, max_batch_size: int, device_id: int | None, pipeline_name: str):
        self.plan = plan_run(ops, outputs, _cpu_device(ops, device_id))
        self._ops = self.plan.steps
        self._num_sources = self.plan.num_sources
        self._outputs = list(outputs)
        self._pool = pool
        self._num_threads = num_threads
        self._job_threads = num_threads
        self._stats_lock = threading.Lock()
        self._max_batch_size = max_batch_size
        self._device_id = device_id
        self._device = None
        self._program_cache: dict = {}
        self._recycler: OutputRecycler | None = None
        self._name = pipeline_name
        self._cancelled = threading.Event()  # set by cancel(): work in progress ends early
        self.iteration = 0
        self.epoch = 0
        self.iteration_in_epoch = 0
        self.op_seconds: dict[str, float] = {n.name: 0.0 for n, _ in self._ops}
        #: Operators that computed their input's samples as they read them (decode -> resize), by name:
        #: ``{reader: producer}``. The reader's ``op_seconds`` include the producer's work.
        self.fed_by: dict[str, str] = {}
        #: Seconds spent dispatching the fused device program and placing outputs on the device.
        self.device_seconds = 0.0
        #: Seconds spent in ``run_iteration`` (the producer's busy time) and batches produced.
        self.busy_seconds = 0.0
        self.batches = 0
        # Read once per iteration, replaced as a whole by set_output_device.
        self._output_mode = HOST_OUTPUTS

    # -- device-output mode ---------------------------------------------------------------------------
    def set_output_device(self, device, finish=None, defer: bool = False) -> None:
        """Delivers outputs on ``device`` and moves trailing per-pixel operators there (None: host outputs).

        ``finish(outputs)``, when given, is called by the producer thread on every batch's outputs
        list once they are placed; what it returns reaches the iterator as ``PipelineBatch.prepared``
        (the JAX iterator builds global arrays ahead of ``next()`` this way). With ``defer``, the
        device program neither runs nor are host outputs placed: the batch's outputs are
        placeholders and ``PipelineBatch.prepared`` is its ``PendingOutputs``, which the iterator runs
        together with its other pipelines' (one program for the group). Takes effect from the next
        iteration the producer starts.
        """
        if device is None:
            self._output_mode = HOST_OUTPUTS
            return
        self._device = device
        if options.get("recycle_device_outputs"):
            self._recycler = OutputRecycler()
        on_cpu = getattr(device, "platform", None) == "cpu"
        self._output_mode = OutputMode(device, self.plan.offloadable_to_cpu if on_cpu else self.plan.offloadable,
                                       finish, defer)

    @property
    def offloaded_ops(self) -> list[str]:
        """Names of the host operators that run in the device stage in device-output mode."""
        return [n.name for n, _ in self._ops if id(n) in self._output_mode.offloaded]

    def _windows_for(self, node: OpNode, op: Operator, inputs: list, args: ArgValues, values: dict,
                     program, batch_size: int):
        """The windows ``node``'s only reader will read of each output sample, or None."""
        reader, reader_op = self.plan.windowed[id(node)]
        if not all(id(n) in values for n in reader.arg_inputs.values()):
            return None  # the reader's arguments are computed later in this iteration
        shapes = op.output_shapes(inputs, args)
        if shapes is None:
            return None
        reader_args = {k: self._host_value(values, n, program) for k, n in reader.arg_inputs.items()}
        return reader_op.input_windows(shapes[0], shapes[1],
                                       ArgValues(reader.schema.name, reader.args, reader_args, batch_size))

    # -- state --------------------------------------------------------------------------------------
    def snapshot(self) -> dict:
        ops = {}
        for node, op in self._ops:
            s = op.state()
            if s is not None:
                ops[node.name] = s
        return {"iteration": self.iteration, "epoch": self.epoch, "iteration_in_epoch": self.iteration_in_epoch,
                "ops": ops}

    def restore(self, snapshot: dict) -> None:
        """Sets the state of ``snapshot`` (validated by ``state.decode``); every stateful operator must
        have its state there, and nothing else may (CheckpointError naming the operator)."""
        self.iteration = snapshot["iteration"]
        self.epoch = snapshot["epoch"]
        self.iteration_in_epoch = snapshot["iteration_in_epoch"]
        states = snapshot["ops"]
        stateful = {node.name: (node, op) for node, op in self._ops if op.state() is not None}
        for name in sorted(set(stateful) - set(states)):
            raise CheckpointError(f"checkpoint field 'pipeline.runner.ops.{name}' is missing: it holds the state of "
                                  f"{stateful[name][0].display_name}")
        for name in sorted(set(states) - set(stateful)):
            raise CheckpointError(f"checkpoint field 'pipeline.runner.ops.{name}' names no stateful operator of "
                                  f"this pipeline")
        for name, (node, op) in stateful.items():
            try:
                op.restore(states[name])
            except CheckpointError:
                raise
            except (KeyError, TypeError, ValueError, OverflowError) as e:
                raise CheckpointError(f"checkpoint field 'pipeline.runner.ops.{name}': the state of "
                                      f"{node.display_name} cannot be restored ({type(e).__name__}: {e})") from None
            op.check_restored_position(self.iteration)

    def start_epoch(self) -> None:
        self.epoch += 1
        self.iteration_in_epoch = 0
        for _, op in self._ops:
            op.start_epoch(self.epoch)

    def cancel(self) -> None:
        """Makes the iterations in progress on other threads end soon: no further operator or chunk
        of per-sample work starts (they raise ``Cancelled``), and operators waiting for data stop
        waiting (``Operator.cancel``). Called when the pipeline closes, before ``close``."""
        self._cancelled.set()
        for _, op in self._ops:
            op.cancel()

    def close(self) -> None:
        """Closes the operators (once no iteration runs any more)."""
        for _, op in self._ops:
            op.close()

    def device(self):
        if self._device is None:
            self._device = jax_device(self._device_id)
        return self._device

    # -- one iteration --------------------------------------------------------------------------------
    def run_iteration(self) -> tuple[PipelineBatch, dict]:
        """Produces one batch; returns (outputs, state after it). Raises StopIteration at end of data."""
        return self.finish_iteration(self.begin_iteration())

    def begin_iteration(self) -> "_Job":
        """The first, ordered part of an iteration: runs the sources (all of the pipeline's state lives
        there), checks the batch size and advances the counters. Batches must begin one at a time,
        in order; ``finish_iteration`` of one batch may overlap the next batch's begin and finish."""
        start = time.perf_counter()
        try:
            ctx = RunContext(iteration=self.iteration, epoch=self.epoch, iteration_in_epoch=self.iteration_in_epoch,
                             batch_size=self._max_batch_size, max_batch_size=self._max_batch_size,
                             parallel_for=self._parallel_for)
            job = _Job(ctx, self._output_mode)
            for k in range(self._num_sources):
                self._step(k, job)
            ctx.batch_size = self._uniform_batch_size(job.values)
            self.iteration += 1
            self.iteration_in_epoch += 1
            job.snapshot = self.snapshot()
            return job
        finally:
            self._add_time("busy", time.perf_counter() - start)

    def finish_iteration(self, job: "_Job", done: frozenset[int] = frozenset()) -> tuple[PipelineBatch, dict]:
        """The rest of the iteration begun as ``job``: the operators after the sources (pure
        functions of their inputs) but the steps ``done`` already (``jaxdali.pipeline.group``), then
        the outputs; returns (the batch, state after it)."""
        start = time.perf_counter()
        try:
            for k in range(self._num_sources, len(self._ops)):
                if k not in done:
                    self._step(k, job)
            placed = time.perf_counter()
            replaced = tuple(sorted(job.ctx.replaced))
            pending = self._collect_outputs(job.values, job.program, job.mode.device, replaced)
            if job.mode.defer:
                # The iterator runs the device stages of its pipelines' batches together.
                outputs, prepared = pending.placeholders(job.ctx.batch_size), pending
            else:
                outputs = pending.resolve()
                prepared = job.mode.finish(outputs) if job.mode.finish is not None else None
            self._add_time("device", time.perf_counter() - placed)
            with self._stats_lock:
                self.batches += 1
            return PipelineBatch(tuple(outputs), replaced, prepared), job.snapshot
        finally:
            self._add_time("busy", time.perf_counter() - start)

    def _add_time(self, what: str, seconds: float, op: str | None = None) -> None:
        with self._stats_lock:  # batches may be produced by two threads at once
            if what == "busy":
                self.busy_seconds += seconds
            elif what == "device":
                self.device_seconds += seconds
            else:
                self.op_seconds[op] += seconds

    def _step(self, k: int, job: "_Job") -> None:
        """Runs operator ``k`` of the iteration ``job``; its outputs carry the source info of its first
        data input that has one (as DALI's operators pass each sample's ``source_info()`` on)."""
        if self._cancelled.is_set():
            raise Cancelled(f"pipeline {self._name!r} was closed")
        self._run_step(k, job)
        node = self._ops[k][0]
        info = next((i for i in (getattr(job.values.get(id(n)), "source_info", None) for n in node.inputs)
                     if i is not None), None)
        if info is not None:
            for out_node in node.outputs:
                value = job.values.get(id(out_node))
                if getattr(value, "source_info", False) is None:  # a batch that has none yet
                    value.source_info = info
                    if isinstance(value, DeviceValue) and value.host is not None:  # a host result, placed later
                        value.host.source_info = info
        if job.ctx.pending_replacements:
            self._apply_replacements(job)

    def _apply_replacements(self, job: "_Job") -> None:
        """Makes the rows an operator replaced (``RunContext.replace_samples``) copies of their
        replacements in every batch of the iteration, so each row stays one consistent sample."""
        rows = np.arange(job.ctx.batch_size)
        for row, source in job.ctx.pending_replacements.items():
            rows[row] = source
        job.ctx.pending_replacements.clear()
        for key, value in list(job.values.items()):
            if isinstance(value, SampleSource):  # not computed yet: computed now, to copy its rows
                value = value.materialize()
            if isinstance(value, DeviceValue) and value.samples is not None:  # stays on the device
                job.values[key] = DeviceValue(samples=[value.samples[k] for k in rows], layout=value.layout,
                                              source_info=_rows_of(value.source_info, rows))
            elif isinstance(value, DeviceValue):
                host = self._to_host(value, job.program)
                job.values[key] = DeviceValue(host=TensorListCPU([host.samples()[k] for k in rows], host.layout(),
                                                                 _rows_of(host.source_info, rows)))
            elif isinstance(value, TensorListCPU):
                samples = value.samples()
                job.values[key] = TensorListCPU([samples[k] for k in rows], value.layout(),
                                                _rows_of(value.source_info, rows))

    def _run_step(self, k: int, job: "_Job") -> None:
        """Runs operator ``k`` of the iteration ``job`` (on the host, or records it on the device)."""
        node, op = self._ops[k]
        values, ctx = job.values, job.ctx
        if node.batch_node is not None:  # inside a branch of a conditional: the branch's samples only
            ctx = dataclasses.replace(ctx, batch_size=len(values[id(node.batch_node)]), replaced={},
                                      pending_replacements={})
        for key in self.plan.release_before[k]:
            values.pop(key, None)
        if node.batch_node is not None and ctx.batch_size == 0:  # a branch no sample took: nothing to run
            for out_node in node.outputs:
                empty = TensorListCPU([])
                values[id(out_node)] = DeviceValue(host=empty) if out_node.device == "gpu" else empty
            return
        on_host = id(node) in self.plan.on_host
        if on_host and id(node) in job.mode.offloaded:
            if job.program is None:
                job.program = DeviceProgram(self.device(), self._program_cache, alias_owned=True)
            if self._offload(node, op, values, job.program, ctx):
                return
        if on_host:
            inputs = [self._host_value(values, n, job.program) for n in node.inputs]
        elif node.device == "mixed":
            inputs = [values[id(n)] for n in node.inputs]
        else:
            if job.program is None:
                job.program = DeviceProgram(self.device(), self._program_cache,
                                            alias_owned=job.mode.device is not None)
            if self._record_on_device(node, op, [values[id(n)] for n in node.inputs], values, job.program,
                                      ctx.batch_size):
                return
            inputs = [self._host_value(values, n, job.program) for n in node.inputs]
        arg_inputs = {k2: self._host_value(values, n, job.program) for k2, n in node.arg_inputs.items()}
        args = ArgValues(node.schema.name, node.args, arg_inputs, ctx.batch_size)
        start = time.perf_counter()
        # A producer of plan.fed left its samples to be computed as this operator consumes them.
        source = inputs[0] if inputs and isinstance(inputs[0], SampleSource) and not op.passthrough else None
        try:
            windows = None
            if id(node) in self.plan.windowed:
                windows = self._windows_for(node, op, [source.batch] if source is not None else inputs, args, values,
                                            job.program, ctx.batch_size)
            result = None
            if source is not None:
                self.fed_by[node.name] = source.producer
                result = op.run_fed(ctx, source, args, windows)
            elif id(node) in self.plan.fed:
                result = op.sample_source(ctx, inputs, args)
                if result is not None:
                    result.origin, result.producer = node.display_name, node.name
            if result is None:
                result = op.run(ctx, inputs, args) if windows is None else op.run_windowed(ctx, inputs, args, windows)
        except StopIteration:
            raise
        except Exception as e:
            fed_by = f" (computing the samples of {source.origin} as it reads them)" if source is not None else ""
            e.add_note(f"jaxdali: raised by {node.display_name}{fed_by} in pipeline {self._name!r}, "
                       f"iteration {ctx.iteration}")
            raise
        self._add_time("op", time.perf_counter() - start, node.name)
        if node.batch_node is not None and ctx.replaced:
            raise RuntimeError(f"{node.display_name} replaced bad samples (error_policy='replace') inside a branch of "
                               "a conditional, where rows cannot be replaced yet; use error_policy='raise' there, or "
                               "decode before the `if`")
        results = result if isinstance(result, (list, tuple)) else [result]
        for out_node, value in zip(node.outputs, results):
            # A fed producer's samples go to its reader on the host as they are (plan.fed).
            gpu = out_node.device == "gpu" and not isinstance(value, SampleSource)
            values[id(out_node)] = DeviceValue.of(value) if gpu else value

    def _parallel_for(self, fn, n: int) -> None:
        self._pool.parallel_for(fn, n, self._job_threads, self._cancelled)

    def overlap(self, batches: int) -> None:
        """``batches`` iterations will run at once (see ``executor.Prefetcher``): each one spreads its
        per-sample work over ``num_threads // batches`` threads, so the total stays ``num_threads``."""
        self._job_threads = max(1, self._num_threads // max(1, batches))

    def _uniform_batch_size(self, values: dict) -> int:
        sizes = {}
        for node, _ in self._ops[: self._num_sources]:
            for out in node.outputs:
                v = values.get(id(out))
                if v is not None:
                    sizes[node.display_name] = len(v)
        distinct = set(sizes.values())
        if len(distinct) > 1:
            raise RuntimeError(f"Batch size has to be uniform across one iteration; the sources produced {sizes}")
        return distinct.pop() if distinct else self._max_batch_size

    def _offload(self, node: OpNode, op: Operator, values: dict, program: DeviceProgram, ctx: RunContext) -> bool:
        """Records a host operator into the device program (device-output mode); False: run it on the host."""
        start = time.perf_counter()
        data = [values[id(n)] for n in node.inputs]
        if not all(isinstance(v, DeviceValue) or v.is_dense_tensor() for v in data):
            prepare = op.dense_device_inputs
            if prepare is None or any(isinstance(v, DeviceValue) for v in data):
                return False
            arg_inputs = {k2: self._host_value(values, n, program) for k2, n in node.arg_inputs.items()}
            try:
                dense = prepare(ctx, data, ArgValues(node.schema.name, node.args, arg_inputs, ctx.batch_size))
            except Exception as e:
                e.add_note(f"jaxdali: raised by {node.display_name} in pipeline {self._name!r}, "
                           f"iteration {ctx.iteration}")
                raise
            if dense is None:
                return False
            data = dense
        data = [v if isinstance(v, DeviceValue) else DeviceValue(host=v) for v in data]
        self._add_time("op", time.perf_counter() - start, node.name)  # preparing; recording adds its own time
        return self._record_on_device(node, op, data, values, program, ctx.batch_size)

    def _record_on_device(self, node: OpNode, op: Operator, data: list, values: dict, program: DeviceProgram,
                          batch_size: int) -> bool:
        """Records ``op`` into the device program if it has a JAX implementation and dense inputs."""
        if op.run_jax is None:
            return False
        if not all(isinstance(v, DeviceValue) and v.is_dense() for v in data):
            return False
        start = time.perf_counter()
        input_refs = [self._device_ref(v, program) for v in data]
        host_args = {name: self._host_value(values, n, program) for name, n in node.arg_inputs.items()}
        if any(h.dense() is None for h in host_args.values()):
            return False
        op.check_device_args(ArgValues(node.schema.name, node.args, host_args, batch_size))
        arg_refs = {name: program.leaf(h.dense()) for name, h in host_args.items()}
        refs = program.record(op, batch_size, input_refs, arg_refs, len(node.outputs))
        layouts = op.output_layouts([v.layout for v in data])
        for out_node, ref, layout in zip(node.outputs, refs, layouts):
            values[id(out_node)] = DeviceValue(ref=ref, layout=layout)
        self._add_time("op", time.perf_counter() - start, node.name)
        return True

    @staticmethod
    def _device_ref(value: DeviceValue, program: DeviceProgram) -> int:
        if value.ref is None:
            array = value.device_array()
            value.ref = program.leaf(value.host.dense() if array is None else array)
        return value.ref

    def _host_value(self, values: dict, n: DataNode, program: DeviceProgram | None) -> TensorListCPU:
        """A node's batch in host memory (device results are copied back when a host op needs them)."""
        v = values[id(n)]
        return v if not isinstance(v, DeviceValue) else self._to_host(v, program)

    @staticmethod
    def _to_host(v: DeviceValue, program: DeviceProgram | None) -> TensorListCPU:
        if v.host is not None:
            return v.host
        if v.samples is not None:
            v.host = TensorListCPU([np.asarray(s) for s in v.samples], v.layout, v.source_info)
            return v.host
        array = v.array if v.array is not None else program.run([v.ref])[v.ref]
        v.host = TensorListCPU(np.asarray(array), v.layout, v.source_info)
        return v.host

    def _collect_outputs(self, values: dict, program: DeviceProgram | None, output_device,
                         replaced: tuple[int, ...]) -> PendingOutputs:
        """The batch's outputs, before the device program runs and host outputs are placed."""
        entries = []
        for n in self._outputs:
            v = values[id(n)]
            if not isinstance(v, DeviceValue):
                # Device-output mode: dense host outputs are placed on the device; ragged ones stay on
                # the host (framework iterators reject them with DALI's message). An operator's own
                # output buffer is given to JAX without a copy (owned_empty).
                dense = output_device is not None and isinstance(v, TensorListCPU) and v.is_dense_tensor()
                entries.append(("place", v, True, _output_name(n)) if dense else ("done", v))
            elif v.samples is not None:
                entries.append(("done", TensorListGPU(v.samples, v.layout, v.source_info)))
            elif v.array is not None:
                entries.append(("done", TensorListGPU(v.array, v.layout, v.source_info)))
            elif v.ref is not None:
                entries.append(("ref", v.ref, v.layout, v.source_info))
            else:
                entries.append(("done", place_on_device(v.host, self.device(), what=_output_name(n))))
        recycler = self._recycler if output_device is not None else None
        return PendingOutputs(program, entries, output_device, recycler, replaced)


def _cpu_device(ops: Sequence[tuple[OpNode, Operator]], device_id: int | None) -> bool:
    """Whether a pipeline with "mixed" or "gpu" operators has a CPU for its device (no GPU in this process:
    they then run on the host, ``RunPlan.on_host``, unless config ``gpu_ops_on_cpu_device`` is 'jax'). False for
    host-only pipelines: JAX is not needed."""
    if all(node.device == "cpu" for node, _ in ops) or options.get("gpu_ops_on_cpu_device") != "host":
        return False
    return getattr(jax_device(device_id), "platform", None) == "cpu"


def _output_name(node: DataNode) -> str:
    """How errors name a pipeline output: by the operator that produced it."""
    return f"output {node.index} of fn.{node.source.schema.name} (instance '{node.source.name}')"


def _rows_of(source_info: list | None, rows: np.ndarray) -> list | None:
    return None if source_info is None else [source_info[k] for k in rows]
