"""``DALIGenericIterator`` for JAX: pipeline outputs as ``dict[str, jax.Array]``."""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import numpy as np

from jaxdali.pipeline.batch import PipelineBatch
from jaxdali.pipeline.pipeline import host_group, share_host_threads
from jaxdali.plugin.driver import _DaliBaseIterator
from jaxdali.plugin.epoch_counter import LastBatchPolicy
from jaxdali.tensors import TensorListGPU
from jaxdali.plugin.jax import assembly
from jaxdali.plugin.jax.device_group import DeviceGroup

__all__ = ["DALIGenericIterator", "default_num_threads_value"]

PARTIAL_MSG = "JAX iterator does not support partial last batch policy."  # E3
SHARDING_TYPE_MSG = "`sharding` should be an instance of `jax.sharding.Sharding`"  # E5
DISTINCT_NAMES_MSG = "output_map names should be distinct"  # E2


def default_num_threads_value() -> int:
    """Worker threads the ``data_iterator`` decorator gives a pipeline when ``num_threads`` is not set."""
    return 4


def _pipeline_device(pipe) -> Any:
    if pipe.device_id is None:
        return None
    import jax

    local = jax.local_devices()
    if pipe.device_id >= len(local):
        raise RuntimeError(f"pipeline device_id={pipe.device_id} names local JAX device {pipe.device_id}, but this "
                           f"process has {len(local)}: {local}")
    return local[pipe.device_id]


class DALIGenericIterator(_DaliBaseIterator):
    """Iterates over pipelines and returns each batch as ``{name: jax.Array}``.

    Args:
      pipelines: a Pipeline or a list of them (same ``batch_size``); the iterator builds them.
      output_map: names of the consecutive pipeline outputs (may be shorter than the outputs).
      size: samples per epoch summed over the pipelines (size mode; -1: until a source ends).
        Mutually exclusive with ``reader_name``.
      reader_name: name of a reader whose metadata defines the epoch (recommended).
      auto_reset: reset automatically at the end of an epoch (False/None/"no" or True/"yes").
      last_batch_padded: size mode only: whether the reader pads its last batch.
      last_batch_policy: ``LastBatchPolicy.FILL`` (default) or ``DROP`` (PARTIAL needs ragged
        batches, which JAX arrays are not).
      prepare_first_batch: fetch the first batch in the constructor.
      sharding: a ``jax.sharding.Sharding`` for every output, or a dict ``{output name: Sharding}``.
        Each output becomes one global array of ``D * batch_size`` rows (``D`` = devices in the
        sharding), built with ``jax.make_array_from_single_device_arrays``; the sharding may also
        split other axes or replicate rows (see ``jaxdali.plugin.jax.assembly``).
      pmap_compatible: with no sharding, return a leading device axis even for one pipeline.
        With several pipelines the axis is always there.

    Output placement: a pipeline's device outputs live on its JAX device (``device_id``); its CPU
    outputs are placed there too. ``device_id=None`` pipelines give arrays on JAX's default device,
    or, with a sharding, on the sharding's devices in row order; one such pipeline with a sharding
    over one device then runs in device-output mode on that device, exactly as with its ``device_id``
    (same values, the same work as ``data_iterator``).

    .. note::
       Beyond DALI: per-output shardings (DALI issue #5535), shardings other than "split the
       batch over all devices", and ``is_nonpadding`` on every iterator.

    Example::

        it = DALIGenericIterator(pipe, ["images", "labels"], reader_name="Reader",
                                 sharding=NamedSharding(mesh, PartitionSpec("batch")))
        for batch in it:
            loss = train_step(state, batch["images"], batch["labels"])
    """

    def __init__(self, pipelines, output_map: Sequence[str], size: int = -1, reader_name: str | None = None,
                 auto_reset: bool | str | None = False, last_batch_padded: bool = False,
                 last_batch_policy: LastBatchPolicy = LastBatchPolicy.FILL, prepare_first_batch: bool = True,
                 sharding=None, pmap_compatible: bool | None = None):
        output_map = list(output_map)
        if len(set(output_map)) != len(output_map):
            raise AssertionError(DISTINCT_NAMES_MSG)
        if last_batch_policy == LastBatchPolicy.PARTIAL:
            raise AssertionError(PARTIAL_MSG)
        self.output_map = output_map
        self._shardings = _check_sharding(sharding, output_map)
        self._sharding = sharding
        self._pmap_compatible = bool(pmap_compatible)
        self._devices: list | None = None
        self._checked_shardings: set = set()  # shardings the pipelines' devices were checked against
        self._direct: dict[str, tuple] = {}  # output name -> global shape, where shards are whole batches
        self._next_seconds = 0.0
        self._next_calls = 0
        pipes = list(pipelines) if isinstance(pipelines, (list, tuple)) else [pipelines]
        if pipelines is not None:
            share_host_threads(pipes)  # one pipeline per device: their host work runs as one pipeline's
        self._group = _device_group(pipes) if pipelines is not None else None
        for pipe in pipes if pipelines is not None else []:
            # Device-output mode: outputs are jax.Arrays on the pipeline's device when next() takes them,
            # and trailing per-pixel operators run in the fused device stage (same values).
            device = _pipeline_device(pipe)
            if device is None and len(pipes) == 1:
                # A CPU-only pipeline whose outputs all go to one device: that device, as with a device_id.
                targets = {d for sh in self._shardings.values() for d in sh.device_set}
                device = next(iter(targets)) if len(targets) == 1 else None
            if device is not None:
                single = len(pipes) == 1 and self._shardings and all(
                    set(sh.device_set) == {device} for sh in self._shardings.values())
                pipe.set_output_device(device, _global_arrays(output_map, self._shardings) if single else None,
                                       defer=self._group is not None)
        host = host_group(pipes) if self._group is not None else None
        if host is not None:  # the group's device program runs on the producer thread, ahead of next()
            host.set_round_hook(self._group.resolve)
        super().__init__(pipelines, size=size, reader_name=reader_name, auto_reset=auto_reset,
                         last_batch_padded=last_batch_padded, last_batch_policy=last_batch_policy,
                         prepare_first_batch=prepare_first_batch)
        self._queue_start = [p.queue_statistics() for p in self._pipes]

    def __next__(self) -> dict:
        start = time.perf_counter()
        try:
            return self._next_batch()
        finally:
            self._next_seconds += time.perf_counter() - start
            self._next_calls += 1

    def stats(self) -> dict:
        """Where the time goes, since the iterator was created.

        Returns a dict: ``batches`` (``next()`` calls), ``next_s`` (total time inside ``next()``),
        ``consumer_wait_s`` (the part of it spent waiting for the pipelines' data),
        ``mean_queue_occupancy`` (finished batches a request found waiting, averaged over pipelines),
        ``producer_idle_s`` (time the pipelines' producers waited for the consumer, summed), and
        ``bottleneck``: ``"loader"`` when requests usually find no batch ready, else
        ``"consumer"`` (the training step). Per-pipeline figures: ``Pipeline.queue_statistics()``.
        """
        now = [p.queue_statistics() for p in self._pipes]
        deltas = [{k: n[k] - s.get(k, 0) for k in ("consumer_requests", "consumer_wait_s", "producer_idle_s",
                                                       "consumer_empty_requests")}
                  | {"occupancy": n["mean_queue_occupancy"] * n["consumer_requests"]
                     - s.get("mean_queue_occupancy", 0.0) * s.get("consumer_requests", 0)}
                  for n, s in zip(now, self._queue_start)]
        requests = sum(d["consumer_requests"] for d in deltas)
        empty = sum(d["consumer_empty_requests"] for d in deltas)
        return {
            "batches": self._next_calls,
            "next_s": self._next_seconds,
            "consumer_wait_s": sum(d["consumer_wait_s"] for d in deltas),
            "mean_queue_occupancy": sum(d["occupancy"] for d in deltas) / requests if requests else 0.0,
            "producer_idle_s": sum(d["producer_idle_s"] for d in deltas),
            "bottleneck": "loader" if requests and empty * 2 > requests else "consumer",
        }

    # -- assembly ----------------------------------------------------------------------------------------
    def _assemble_batch(self, batches: list[PipelineBatch], rows) -> dict:
        if self._group is not None:
            batches = self._group.resolve(batches)
        batch = {}
        prepared = batches[0].prepared if len(batches) == 1 else None
        for i, name in enumerate(self.output_map):
            per_pipeline = [b.outputs[i] for b in batches]
            batch[name] = self._assemble(name, per_pipeline, prepared[i] if prepared is not None else None)
        return batch

    def _assemble(self, name: str, per_pipeline: list, prepared: Any = None) -> Any:
        """One output as a ``jax.Array``; ``prepared``: what ``_global_arrays`` made of it, if anything."""
        sharding = self._shardings.get(name)
        if sharding is not None:
            # Made by the producer for this sharding (see _global_arrays), whose only device is the
            # pipeline's: nothing to check or assemble.
            if prepared is not None and prepared[0] is sharding:
                return prepared[1]
            devices = self._devices_for(sharding, per_pipeline)
            direct = self._direct.get(name)
            if direct is not None:
                # Device-output pipelines: the batches are the shards, already on their devices.
                result = assembly.direct_global_array(per_pipeline, devices, sharding, direct)
                if result is not None:
                    return result
            result = assembly.assemble_sharded(dict(zip(devices, per_pipeline)), sharding, self.batch_size)
            if assembly.shards_are_batches(sharding, devices, result.shape, self.batch_size):
                self._direct[name] = result.shape
            return result
        devices = self._devices_for(None, per_pipeline)
        if len(per_pipeline) > 1 or self._pmap_compatible:
            shapes = {assembly.host_shape(b) for b in per_pipeline}
            if len(shapes) > 1:
                raise AssertionError(assembly.SHAPES_DIFFER_MSG)
            return assembly.stack_pipelines(per_pipeline, devices)
        return assembly.device_array(per_pipeline[0], devices[0])

    def _devices_for(self, sharding, per_pipeline: list) -> list:
        if self._devices is None:
            self._devices = [_pipeline_device(p) for p in self._pipes]
        if sharding in self._checked_shardings:
            return self._devices
        if sharding is None or all(d is not None for d in self._devices):
            if sharding is not None:
                _check_on_sharding(self._devices, sharding)
                self._checked_shardings.add(sharding)
            return self._devices
        if any(d is not None for d in self._devices):
            raise ValueError("with a sharding, either every pipeline has a device_id or none has; got device_ids "
                             f"{[p.device_id for p in self._pipes]}")
        # CPU-only pipelines: give them the sharding's addressable devices in row order.
        shape = (len(sharding.device_set) * self.batch_size,) + tuple(assembly.host_shape(per_pipeline[0])[1:])
        layout = assembly.row_blocks(sharding, shape, self.batch_size)
        ordered = [d for _, _, owners in layout.blocks for d in owners if d in sharding.addressable_devices]
        if len(ordered) != len(self._pipes):
            raise ValueError(f"the sharding has {len(ordered)} addressable devices but the iterator wraps "
                             f"{len(self._pipes)} pipelines; build one pipeline per addressable device")
        return ordered

    # -- padding mask ---------------------------------------------------------------------------------------
    @property
    def is_nonpadding(self):
        """Which rows of the last returned batch are real samples (False: reader padding, or a bad
        sample that an operator's ``error_policy="replace"`` replaced with a copy of a good one).

        A NumPy bool array of ``NP * batch_size`` entries; with a sharding, a ``jax.Array`` whose rows
        are placed like the outputs' rows, so ``jnp.sum(mask)`` in a jitted evaluation step counts each
        sample exactly once across shards. With a ``NamedSharding`` it lives on the outputs' own mesh,
        sharded like their batch axis (``PartitionSpec(spec[0])``), so ``shard_map`` specs and sharding
        constraints written for the data's batch axis apply to it unchanged. Reader mode only.
        """
        mask = np.asarray(self._nonpadding_mask(), dtype=bool)
        if not self._shardings:
            return mask
        sharding = next(iter(self._shardings.values()))
        bs = self.batch_size
        pieces = [mask[j * bs:(j + 1) * bs] for j in range(len(self._pipes))]
        devices = self._devices_for(sharding, [mask[:bs]] * len(self._pipes))
        shape = (len(sharding.device_set) * bs,)
        rows_like_outputs = assembly.batch_axis_sharding(sharding, shape, bs)
        return assembly.assemble_sharded(dict(zip(devices, pieces)), rows_like_outputs, bs)


def _device_group(pipes: list) -> DeviceGroup | None:
    """One device program for the pipelines' batches, when there are several, each on its own device."""
    if len(pipes) < 2:
        return None
    devices = [_pipeline_device(p) for p in pipes]
    if any(d is None for d in devices) or len(set(devices)) != len(devices):
        return None
    return DeviceGroup(devices)


def _global_arrays(output_map: list[str], shardings: dict):
    """A producer-side finisher for one pipeline whose device is the only device of every sharding:
    it makes each output's global ``jax.Array`` on the producer thread; the batch carries them as
    ``PipelineBatch.prepared`` (``(sharding, array)`` per output, None where it made none), so
    ``next()`` returns them without assembling anything."""

    def finish(outputs: list) -> tuple:
        prepared = []
        for name, out in zip(output_map, outputs):
            sharding = shardings.get(name)
            made = None
            if sharding is not None and isinstance(out, TensorListGPU) and out.is_dense_tensor():
                arr = out.jax_array()
                if len(arr.devices()) == 1:
                    made = (sharding, assembly.global_array(arr.shape, sharding, [arr]))
            prepared.append(made)
        return tuple(prepared)

    return finish


def _check_sharding(sharding, output_map: list[str]) -> dict:
    from jax.sharding import Sharding

    if sharding is None:
        return {}
    if isinstance(sharding, Sharding):
        return {name: sharding for name in output_map}
    if isinstance(sharding, Mapping):
        unknown = sorted(set(sharding) - set(output_map))
        missing = sorted(set(output_map) - set(sharding))
        if unknown or missing:
            raise ValueError(f"the sharding dict must have one entry per output name {output_map}; "
                             f"unknown names: {unknown}, missing names: {missing}")
        for name, s in sharding.items():
            if not isinstance(s, Sharding):
                raise AssertionError(f"{SHARDING_TYPE_MSG} (output {name!r} got {type(s).__name__})")
        device_sets = {frozenset(s.device_set) for s in sharding.values()}
        if len(device_sets) > 1:
            raise ValueError("all per-output shardings must span the same devices")
        return dict(sharding)
    raise AssertionError(SHARDING_TYPE_MSG)


def _check_on_sharding(devices: list, sharding) -> None:
    if len(set(devices)) != len(devices):
        raise AssertionError(assembly.DEVICES_PARTLY_SHARED_MSG)
    outside = [d for d in devices if d not in sharding.device_set]
    if outside:
        raise ValueError(f"pipelines on devices {outside} are not among the sharding's devices "
                         f"{sorted(sharding.device_set, key=lambda d: d.id)}")
