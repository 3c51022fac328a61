"""What the runner decides once, when a pipeline is built: the order of the operators, when each
intermediate batch is dropped, which producers compute only the windows their reader crops, and which
host operators may run in the device stage. Pure functions of the graph and the operators' declared
hooks (``jaxdali.ops.operator.Operator``); the runner follows the frozen result for every batch.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Callable, Mapping, Sequence

from jaxdali.ops.graph import DataNode, OpNode
from jaxdali.ops.operator import Operator

__all__ = ["RunPlan", "OutputMode", "HOST_OUTPUTS", "plan_run"]


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """How every batch of one built pipeline runs.

    Attributes:
      steps: (node, operator) in run order: the sources and the operators that compute their
        argument inputs first (graph order), then the argument generators (no data input, e.g.
        fn.random.uniform), then the others (graph order).
      num_sources: how many of ``steps`` make the ordered first part of an iteration.
      release_before: per step (plus two), the value keys (``id`` of a DataNode) no later step reads
        and that are no output: they are dropped before that step runs.
      windowed: producer node id -> (reader node, reader operator): host producers whose only reader
        crops one window of each sample, so that they compute just those windows (``run_windowed``
        and ``input_windows``).
      offloadable: ids of the host operator nodes that run in the fused device stage when the
        outputs are delivered on a device.
      fed: ids of the host producers whose only reader consumes their samples as they are computed
        (``sample_source`` on the producer, ``run_fed`` on the reader, e.g. decoder -> resize).
      offloadable_to_cpu: ``offloadable`` when the device is a CPU (a subset: without the operators whose
        host implementation is the faster there, ``Operator.offload_to_cpu_devices``).
      on_host: ids of the nodes run as host operators: those placed on "cpu", and, in a pipeline whose
        device is a CPU (no GPU in this process), the "mixed" and "gpu" ones with a host implementation
        and the ``.gpu()``/``.cpu()`` passthroughs (the values are the same; the outputs placed on "gpu"
        are still delivered as device batches).
    """

    steps: tuple[tuple[OpNode, Operator], ...]
    num_sources: int
    release_before: tuple[tuple[int, ...], ...]
    windowed: Mapping[int, tuple[OpNode, Operator]]
    offloadable: frozenset[int]
    fed: frozenset[int] = frozenset()
    offloadable_to_cpu: frozenset[int] = frozenset()
    on_host: frozenset[int] = frozenset()


@dataclasses.dataclass(frozen=True)
class OutputMode:
    """Where a batch's outputs go, fixed for the batch when it begins.

    Attributes:
      device: the JAX device that receives every dense output; None: host outputs.
      offloaded: ids of the host operator nodes recorded into the device stage for this batch.
      finish: called by the producer thread with the placed outputs; what it returns (one entry per
        output, or None) reaches the framework iterator as ``PipelineBatch.prepared``.
      defer: leave the device program and the placement to the iterator (``PendingOutputs``).
    """

    device: object = None
    offloaded: frozenset[int] = frozenset()
    finish: Callable[[list], tuple | None] | None = None
    defer: bool = False


#: Outputs stay in host memory and every host operator runs on the host.
HOST_OUTPUTS = OutputMode()


def plan_run(ops: Sequence[tuple[OpNode, Operator]], outputs: Sequence[DataNode], cpu_device: bool = False) -> RunPlan:
    """The plan for the built operators ``ops`` (graph order) and the pipeline ``outputs``; ``cpu_device``: the
    pipeline's device is a CPU, so its "mixed" and "gpu" operators run on the host where they can."""
    steps, num_sources = _order(ops)
    on_host = frozenset(id(node) for node, op in steps
                        if node.device == "cpu" or (cpu_device and ("cpu" in node.schema.devices or op.passthrough)))
    offloadable = _offloadable(steps, outputs, on_host)
    # ``fed`` is planned against the larger set: a producer whose reader runs on the host after all is only
    # not fed, never fed wrongly.
    return RunPlan(steps=steps, num_sources=num_sources, release_before=_release_schedule(steps, num_sources, outputs),
                   windowed=types.MappingProxyType(window_pairs(steps, outputs, on_host)), offloadable=offloadable,
                   fed=_fed(steps, outputs, offloadable, on_host),
                   offloadable_to_cpu=_offloadable(steps, outputs, on_host, cpu=True), on_host=on_host)


def _order(ops: Sequence[tuple[OpNode, Operator]]) -> tuple[tuple[tuple[OpNode, Operator], ...], int]:
    # The ordered first part of an iteration runs the sources and the operators that compute their
    # argument inputs (e.g. a random ROI for fn.readers.numpy), in graph order.
    feeding: set[int] = set()
    for n, _ in reversed(ops):
        if n.schema.is_source or id(n) in feeding:
            feeding.update(id(inp.source) for inp in list(n.inputs) + list(n.arg_inputs.values()))
    sources = [(n, o) for n, o in ops if n.schema.is_source or id(n) in feeding]
    others = [(n, o) for n, o in ops if not (n.schema.is_source or id(n) in feeding)]
    # Then the argument generators (no data input, arguments from the steps before, outside conditionals,
    # e.g. fn.random.uniform): a producer that computes only its reader's windows (resize) then finds the
    # reader's arguments (crop positions) computed, in whichever order the graph was written.
    ready = {id(n) for n, _ in sources}
    for n, _ in others:
        if not n.inputs and n.batch_node is None and all(id(a.source) in ready for a in n.arg_inputs.values()):
            ready.add(id(n))
    others = [(n, o) for n, o in others if id(n) in ready] + [(n, o) for n, o in others if id(n) not in ready]
    return tuple(sources + others), len(sources)


def _release_schedule(steps: Sequence[tuple[OpNode, Operator]], num_sources: int,
                      outputs: Sequence[DataNode]) -> tuple[tuple[int, ...], ...]:
    # Values no later operator reads (and that are no output) are dropped before operator k runs,
    # so a batch's intermediates (decoded images, ...) do not all live until the batch is done.
    last_use: dict[int, int] = {}
    for k, (node, _) in enumerate(steps):
        for out in node.outputs:
            last_use.setdefault(id(out), k)
        for inp in list(node.inputs) + list(node.arg_inputs.values()):
            last_use[id(inp)] = k
        if node.batch_node is not None:  # a conditional branch's size is read when the operator runs
            last_use[id(node.batch_node)] = k
    keep = {id(n) for n in outputs}
    release: list[list[int]] = [[] for _ in range(len(steps) + 2)]
    for key, k in last_use.items():
        if key not in keep:
            # Source outputs stay until the batch-size check before the first operator.
            release[max(k + 1, num_sources + 1)].append(key)
    return tuple(tuple(keys) for keys in release)


def window_pairs(steps: Sequence[tuple[OpNode, Operator]], outputs: Sequence[DataNode],
                 on_host: frozenset[int]) -> dict:
    """Host operators whose only reader crops one window of each sample: producer node id ->
    (consumer node, consumer operator). The producer then computes just those windows
    (``run_windowed``), e.g. resize followed by crop_mirror_normalize with a crop: the reader gets
    samples equal to its windows, so its results are unchanged (``input_windows``)."""
    pairs = {}
    for node, op in steps:
        if op.run_windowed is None:
            continue
        reader = _only_reader(node, steps, outputs, on_host)
        if reader is not None and reader[1].input_windows is not None:
            pairs[id(node)] = reader
    return pairs


def _only_reader(node: OpNode, steps: Sequence[tuple[OpNode, Operator]], outputs: Sequence[DataNode],
                 on_host: frozenset[int]) -> tuple[OpNode, Operator] | None:
    """(reader, its operator) when ``node`` is a host operator (``on_host``) with one output, no pipeline
    output, read by one host operator as its only input (not as an argument); otherwise None. A host
    passthrough between them (``.gpu()`` on a CPU device) is looked through."""
    if id(node) not in on_host or len(node.outputs) != 1:
        return None
    out = node.outputs[0]
    while True:
        # Nodes are compared by identity: ``==`` on a DataNode builds a graph node.
        if any(n is out for n in outputs):
            return None
        uses = [(reader, op) for reader, op in steps
                for inp in (*reader.inputs, *reader.arg_inputs.values()) if inp is out]
        if len(uses) != 1:
            return None
        reader, reader_op = uses[0]
        if len(reader.inputs) != 1 or reader.inputs[0] is not out or id(reader) not in on_host:
            return None
        if not reader_op.passthrough or reader.batch_node is not None or len(reader.outputs) != 1:
            return reader, reader_op
        out = reader.outputs[0]


def _fed(steps: Sequence[tuple[OpNode, Operator]], outputs: Sequence[DataNode],
         offloadable: frozenset[int], on_host: frozenset[int]) -> frozenset[int]:
    """Producers whose samples their only reader consumes one by one (``sample_source`` -> ``run_fed``).
    Outside conditionals only: a branch's batch is a subset of rows."""
    fed = set()
    for node, op in steps:
        if op.sample_source is None or node.batch_node is not None:
            continue
        reader = _only_reader(node, steps, outputs, on_host)
        if reader is None or reader[1].run_fed is None or reader[0].batch_node is not None \
                or id(reader[0]) in offloadable or any(n.batch_node is node.outputs[0] for n, _ in steps):
            continue
        fed.add(id(node))
    return frozenset(fed)


def _offloadable(steps: Sequence[tuple[OpNode, Operator]], outputs: Sequence[DataNode], on_host: frozenset[int],
                 cpu: bool = False) -> frozenset[int]:
    """Host operators that may run in the device stage: they declare ``device_offload`` (and, for a CPU
    device, ``offload_to_cpu_devices``), have a JAX implementation, and every consumer of their outputs
    is a pipeline output or such an operator reading it as data (arguments are read on the host, so
    their producers stay there)."""
    consumers: dict[int, list] = {}
    for node, _ in steps:
        for inp in node.inputs:
            consumers.setdefault(id(inp), []).append((node, True))
        for inp in node.arg_inputs.values():
            consumers.setdefault(id(inp), []).append((node, False))
    output_ids = {id(n) for n in outputs}
    chosen: set[int] = set()
    for node, op in reversed(steps):
        if id(node) not in on_host or node.schema.is_source or not op.device_offload or op.run_jax is None \
                or (cpu and not op.offload_to_cpu_devices):
            continue
        ok = all(id(out) in output_ids or consumers.get(id(out)) for out in node.outputs)
        for out in node.outputs:
            for consumer, as_data in consumers.get(id(out), []):
                ok = ok and as_data and id(consumer) in chosen
        if ok:
            chosen.add(id(node))
    return frozenset(chosen)
