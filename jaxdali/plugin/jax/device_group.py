"""One device program for the pipelines of one iterator (one pipeline per local device).

Each pipeline records its batch's device stage (``PendingOutputs``: the uint8 rows, the per-sample
arguments, the per-pixel operators) without running it. The iterator hands the batches it takes
together to ``DeviceGroup.resolve``, which places every pipeline's leaves on its device in one
transfer call and runs the recorded program once for all of them, as a ``shard_map`` over the
pipelines' devices: each device computes exactly what its own pipeline's program would on its own
batch (same operators, same batch size, same arguments), in one compilation and one dispatch per
global batch instead of one per device. Batches whose programs differ between pipelines (a sample
that was not dense in one of them, other operator arguments) run their own programs as before.
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

from jaxdali.core import options
from jaxdali.core.buffers import is_owned
from jaxdali.pipeline.batch import PipelineBatch
from jaxdali.pipeline.device_stage import OutputRecycler, PendingOutputs, narrow_for_jax, note_parts
from jaxdali.plugin.jax.assembly import from_host_parts
from jaxdali.tensors import TensorListGPU

__all__ = ["DeviceGroup"]

#: The axis of the group's mesh: one entry per pipeline, in pipeline order.
AXIS = "device"


class DeviceGroup:
    """Runs the deferred device stages of one batch of every pipeline as one SPMD program.

    Args:
      devices: the pipelines' local devices, in pipeline order, all distinct.
    """

    def __init__(self, devices: Sequence[Any]):
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        self._devices = list(devices)
        self._sharding = NamedSharding(Mesh(np.array(self._devices, dtype=object), (AXIS,)), PartitionSpec(AXIS))
        self._programs: dict = {}  # program structure, donated outputs -> jitted function
        self._out_shapes: dict = {}  # program structure, leaf shapes -> output shapes and dtypes
        self._same_op: dict = {}  # (id(op of pipeline 0), id(op of pipeline k)) -> whether they compute the same
        self._recycler = OutputRecycler() if options.get("recycle_device_outputs") else None
        self._lock = threading.Lock()
        self._on_cpu = all(d.platform == "cpu" for d in self._devices)

    def resolve(self, batches: list[PipelineBatch]) -> list[PipelineBatch]:
        """The batches with their outputs computed and placed (``PipelineBatch.prepared`` consumed)."""
        stages = [b.prepared for b in batches]
        if not any(isinstance(s, PendingOutputs) for s in stages):
            return batches
        keep = None
        with self._lock:  # one program run at a time: the recycler lends each buffer once
            if all(isinstance(s, PendingOutputs) for s in stages) and self._groupable(stages):
                outputs, keep = self._run_together(stages)
            else:  # e.g. a pipeline that checks its outputs does not defer: each runs its own
                outputs = [s.resolve() if isinstance(s, PendingOutputs) else b.outputs for s, b in zip(stages, batches)]
        # ``prepared`` holds the program's whole outputs until the iterator has made its arrays of their
        # shards (which then keep them): until then no later program (the producer thread runs them ahead
        # of next()) may be lent their memory.
        return [PipelineBatch(tuple(out), b.replaced_rows, keep) for out, b in zip(outputs, batches)]

    # -- whether one program serves every pipeline ------------------------------------------------------
    def _groupable(self, stages: list[PendingOutputs]) -> bool:
        import jax

        if [s.device for s in stages] != self._devices:
            return False
        first = stages[0]
        kinds = [_entry_kind(e) for e in first.entries]
        wanted = first.wanted()
        for stage in stages[1:]:
            if [_entry_kind(e) for e in stage.entries] != kinds or stage.wanted() != wanted:
                return False
        if not wanted:
            return True
        programs = [s.program for s in stages]
        if any(isinstance(leaf, jax.Array) for p in programs for leaf in p.leaves):
            return False  # data already on a device (decoded there): each pipeline's own program
        steps = programs[0].steps
        leaf_kinds = [(leaf.shape, leaf.dtype) for leaf in programs[0].leaves]
        for program in programs[1:]:
            if [(leaf.shape, leaf.dtype) for leaf in program.leaves] != leaf_kinds:
                return False
            other = program.steps
            if len(other) != len(steps):
                return False
            for mine, theirs in zip(steps, other):
                if mine[0] != theirs[0]:
                    return False
                if mine[0] == "leaf":
                    if mine != theirs:
                        return False
                elif mine[2:] != theirs[2:] or not self._computes_the_same(mine[1], theirs[1]):
                    return False
        return True

    def _computes_the_same(self, op, other) -> bool:
        key = (id(op), id(other))
        same = self._same_op.get(key)
        if same is None:
            same = type(op) is type(other) and op.node.schema.name == other.node.schema.name \
                and _same_arguments(op.args, other.args)
            self._same_op[key] = same
        return same

    # -- one program for the group ---------------------------------------------------------------------
    def _run_together(self, stages: list[PendingOutputs]) -> tuple[list[list], tuple]:
        """Every pipeline's outputs, and the program's whole outputs (whose shards they are)."""
        import jax

        first = stages[0]
        wanted = first.wanted()
        places = [i for i, e in enumerate(first.entries) if e[0] == "place"]
        placed = {i: self._place_output([stage.entries[i] for stage in stages]) for i in places}
        results: dict[int, Any] = {}
        wholes: tuple = ()
        if wanted:
            leaves = [self._stacked([stage.program.leaves[j] for stage in stages], [is_owned(stage.program.leaves[j])
                                                                                  for stage in stages])
                      for j in range(len(first.program.leaves))]
            results, wholes = self._run_program(first.program, wanted, leaves)
        outputs = []
        for k, stage in enumerate(stages):
            placed_here = {i: placed[i][k] for i in places}
            outputs.append(stage.finish(
                lambda ref, k=k: results[ref][k],
                lambda i, host, may_alias, what, placed_here=placed_here:
                    TensorListGPU(placed_here[i], host.layout(), host.source_info)))
        return outputs, wholes

    def _stacked(self, parts: list[np.ndarray], may_alias: list[bool], concatenate: bool = False):
        """The pipelines' host arrays (one per device, equal shapes) as one array sharded over the devices,
        each part on its pipeline's device: stacked over a new leading axis, or (``concatenate``, parts of
        at least one row) end to end along their first axis. Parts that may not be aliased are copied."""
        import jax

        first = parts[0].shape
        shape = (len(parts) * first[0],) + first[1:] if concatenate else (len(parts),) + first
        if self._on_cpu:
            views = [part if alias else part.copy() for part, alias in zip(parts, may_alias)]
            return from_host_parts(views if concatenate else [view[None] for view in views], self._sharding, shape)
        placed = jax.device_put(parts if concatenate else [part[None] for part in parts], self._devices,
                                may_alias=may_alias)
        return jax.make_array_from_single_device_arrays(shape, self._sharding, placed)

    def _place_output(self, entries: list[tuple]) -> list:
        """One dense host output of every pipeline (its ``place`` entries), each on its pipeline's device."""
        import jax

        arrays, alias = [], []
        for _, host, may_alias, what in entries:
            dense = host.dense()
            narrow = narrow_for_jax(dense, what)
            arrays.append(narrow)
            alias.append(bool(may_alias and is_owned(dense) and narrow is dense))
        if not self._on_cpu or len({(a.shape, a.dtype) for a in arrays}) != 1 or arrays[0].ndim == 0 \
                or arrays[0].shape[0] == 0:
            return jax.device_put(arrays, self._devices, may_alias=alias)
        return self._shards(self._stacked(arrays, alias, concatenate=True))

    def _shards(self, array) -> list:
        """``array``'s shard on each of the group's devices, in pipeline order."""
        position = {device: k for k, device in enumerate(self._devices)}
        shards = [None] * len(self._devices)
        for shard in array.addressable_shards:
            shards[position[shard.device]] = shard.data
        return shards

    def _run_program(self, program, wanted: tuple[int, ...], leaves: list) -> tuple[dict[int, list], tuple]:
        """Runs ``program`` on every device's leaves; returns, per wanted ref, its array on each device,
        and the program's outputs."""
        import jax

        structure = program.structure(wanted)
        shapes_key = (structure, tuple((leaf.shape, leaf.dtype) for leaf in leaves))
        shapes = self._out_shapes.get(shapes_key)
        if shapes is None:
            shapes = [(out.shape, out.dtype) for out in jax.eval_shape(self._function(program, wanted, structure, ()),
                                                                        *leaves)]
            self._out_shapes[shapes_key] = shapes
        donated = []
        if self._recycler is not None:
            for i, (shape, dtype) in enumerate(shapes):
                buffer = self._recycler.take(shape, dtype)
                if buffer is not None:
                    donated.append((i, buffer))
        fn = self._function(program, wanted, structure, tuple(i for i, _ in donated))
        outs = fn(*leaves, *(buffer for _, buffer in donated))
        if self._recycler is not None:
            self._recycler.track(outs, leaves)
        results = {}
        for ref, out in zip(wanted, outs):
            shards = self._shards(out)
            note_parts(out, shards)  # the iterator's global arrays made of them keep ``out`` from reuse
            results[ref] = shards
        return results, tuple(outs)

    def _function(self, program, wanted: tuple[int, ...], structure: tuple, donated: tuple[int, ...]):
        """The jitted group program: the pipeline's program on each device's own leaves."""
        import jax
        from jax.sharding import PartitionSpec

        key = (structure, donated)
        fn = self._programs.get(key)
        if fn is not None:
            return fn
        replay = program.replay(wanted)
        num_leaves = len(program.leaves)

        def per_device(*args):
            return replay(*(leaf[0] for leaf in args[:num_leaves]))

        spec = PartitionSpec(AXIS)
        mapped = jax.shard_map(per_device, mesh=self._sharding.mesh, in_specs=(spec,) * num_leaves,
                               out_specs=spec, check_vma=False)
        if donated:
            # The donated buffers are unused inputs: XLA aliases each to the output of its shape.
            fn = jax.jit(lambda *args: mapped(*args[:num_leaves]), keep_unused=True,
                         donate_argnums=tuple(range(num_leaves, num_leaves + len(donated))))
        else:
            fn = jax.jit(mapped)
        self._programs[key] = fn
        return fn


def _entry_kind(entry: tuple) -> tuple:
    if entry[0] == "ref":
        return ("ref", entry[1])
    if entry[0] == "place":
        dense = entry[1].dense()
        return ("place", dense.shape, dense.dtype)
    return ("done",)


def _same_arguments(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for name, value in a.items():
        other = b[name]
        if isinstance(value, np.ndarray) or isinstance(other, np.ndarray):
            if not (isinstance(value, np.ndarray) and isinstance(other, np.ndarray)
                    and value.dtype == other.dtype and np.array_equal(value, other)):
                return False
            continue
        try:
            if not bool(value == other):
                return False
        except (TypeError, ValueError):
            return False
    return True
