"""Runtime side of operators: the ``Operator`` base class, argument values and the per-iteration context."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from jaxdali.ops import rng

if TYPE_CHECKING:
    from jaxdali.ops.error_policy import SkipLog
    from jaxdali.ops.graph import OpNode
    from jaxdali.tensors import TensorListCPU

__all__ = ["Operator", "BuildContext", "RunContext", "ArgValues"]


@dataclasses.dataclass(frozen=True)
class BuildContext:
    """What an operator may know about its pipeline when it is built."""

    max_batch_size: int
    num_threads: int
    seed: int
    pipeline_name: str = ""
    py_num_workers: int = 1
    py_start_method: str = "fork"
    #: ``Pipeline(py_callback_pickler=...)``: how spawned workers receive ``external_source`` callbacks.
    py_callback_pickler: Any = None
    #: ``Pipeline(device_id=...)``: index of the local JAX device the pipeline's device data goes to (None: 0).
    device_id: int | None = None
    #: The pipeline records state for ``checkpoint()`` (``enable_checkpointing``, or restoring one).
    checkpointing: bool = False


@dataclasses.dataclass
class RunContext:
    """One iteration of a pipeline as seen by its operators.

    Attributes:
      iteration: index of this batch since the pipeline started (never resets; drives random numbers).
      epoch: external-source epoch (``Pipeline.reset()`` count).
      iteration_in_epoch: index of this batch within the external-source epoch.
      batch_size: samples in this iteration (may be below ``max_batch_size`` for external sources).
      max_batch_size: the pipeline's batch size.
      parallel_for: runs ``fn(start, stop)`` over chunks of ``range(n)`` on the shared worker pool.
      replaced: rows replaced in this iteration under ``error_policy="replace"``: row -> the row it copies.
    """

    iteration: int
    epoch: int
    iteration_in_epoch: int
    batch_size: int
    max_batch_size: int
    parallel_for: Callable[[Callable[[int, int], None], int], None]
    replaced: dict[int, int] = dataclasses.field(default_factory=dict)
    #: Replacements the runner has not applied to the iteration's batches yet.
    pending_replacements: dict[int, int] = dataclasses.field(default_factory=dict)

    def replace_samples(self, rows: Mapping[int, int]) -> None:
        """Makes each row ``r`` a copy of row ``rows[r]`` in every batch of this iteration once the
        calling operator returns (its own outputs included: it may leave those rows unset), and
        marks the rows as not real (``replaced_rows`` of the outputs)."""
        self.replaced.update(rows)
        self.pending_replacements.update(rows)

    def sample_keys(self, seed: int) -> np.ndarray:
        """Per-sample random keys for an operator seeded with ``seed`` (see ``jaxdali.ops.rng``)."""
        return rng.sample_keys(seed, self.iteration, self.batch_size)


class ArgValues(Mapping[str, Any]):
    """An operator's arguments for one iteration: constants plus per-sample argument inputs."""

    def __init__(self, op: str, constants: Mapping[str, Any], per_sample: Mapping[str, "TensorListCPU"],
                 batch_size: int):
        self._op = op
        self._constants = constants
        self._per_sample = per_sample
        self._n = batch_size

    def __getitem__(self, name: str) -> Any:
        if name in self._per_sample:
            raise KeyError(f"fn.{self._op}: argument '{name}' is per-sample here; use per_sample('{name}')")
        return self._constants[name]

    def __iter__(self):
        return iter(set(self._constants) | set(self._per_sample))

    def __len__(self) -> int:
        return len(set(self._constants) | set(self._per_sample))

    @property
    def batch_size(self) -> int:
        return self._n

    def is_per_sample(self, name: str) -> bool:
        return name in self._per_sample

    def given(self, name: str) -> bool:
        """Whether the argument was set (as a constant or per sample)."""
        return name in self._per_sample or self._constants.get(name) is not None

    def per_sample(self, name: str, dtype: Any = np.float32, shape: Sequence[int] = ()) -> np.ndarray:
        """The argument for every sample, shape ``(batch_size, *shape)``; constants are broadcast.

        A per-sample input whose samples hold ``prod(shape)`` elements is reshaped to ``shape``, so a
        (1,)-shaped sample works as a scalar.
        """
        shape = tuple(shape)
        if name in self._per_sample:
            tl = self._per_sample[name]
            if len(tl) != self._n:
                raise ValueError(
                    f"fn.{self._op}: argument input '{name}' has {len(tl)} samples, but the batch has {self._n}")
            try:
                dense = tl.dense() if self._n else None
                if dense is not None:  # one reshape of the batch, not one per sample
                    arr = np.asarray(dense).reshape((self._n,) + shape)
                else:
                    arr = np.stack([np.asarray(s).reshape(shape) for s in tl.samples()]) if self._n else \
                        np.zeros((0,) + shape)
            except ValueError:
                got = sorted({tuple(np.shape(s)) for s in tl.samples()})
                raise ValueError(
                    f"fn.{self._op}: argument input '{name}' must have samples of shape {shape} "
                    f"(or the same number of elements), got shapes {got}") from None
            return arr.astype(dtype, copy=False)
        value = self._constants.get(name)
        if value is None:
            raise KeyError(f"fn.{self._op}: argument '{name}' is not set")
        arr = np.asarray(value, dtype=dtype)
        if arr.size == 1 and shape:
            arr = np.full(shape, arr.reshape(()), dtype=dtype)
        return np.broadcast_to(arr.reshape(shape), (self._n,) + shape)

    def sample_value(self, name: str, i: int) -> Any:
        """The value for sample ``i``: the constant, or that sample's array."""
        if name in self._per_sample:
            return np.asarray(self._per_sample[name].at(i))
        return self._constants.get(name)


class Operator:
    """Base class of operator implementations; one instance per operator node, built by ``Pipeline.build``.

    Subclasses implement ``run`` (host) and optionally ``run_jax`` (fused device stage). Stateful
    operators (readers, external sources) implement ``state``/``restore`` with plain JSON data.

    Everything the pipeline's runner may ask of an operator is declared here, with a default that
    means "not offered" (docs/architecture.md, "Layers and the operator contract"):

    * device stage: ``run_jax``, ``check_device_args``, ``output_layouts``, ``device_offload``,
      ``offload_to_cpu_devices``, ``dense_device_inputs``;
    * windows (a producer computes only what its only reader crops): ``output_shapes`` and
      ``run_windowed`` on the producer, ``input_windows`` on the reader;
    * sample by sample (a producer's samples are consumed as they are computed): ``sample_source`` on
      the producer, ``run_fed`` on its only reader;
    * state: ``state``, ``restore``, ``check_restored_position``, ``can_reshard``, ``resume_info``;
    * sources: ``ends_epochs``, ``takes_fed_data``, ``feed``, ``reader_meta``, ``start_epoch``;
    * ``skip_log`` (``error_policy="replace"``), ``row_wise``, ``cancel``, ``close``.

    A hook typed ``Callable | None`` is offered by defining a method of that name; the runner decides
    at build time, from these declarations, what runs where (``jaxdali.pipeline.plan``).
    """

    def __init__(self, node: "OpNode", build: BuildContext):
        self.node = node
        self.name = node.display_name
        self.args = node.args
        self.build_ctx = build
        seed = node.args.get("seed")
        self.seed = int(seed) if seed is not None and seed >= 0 else rng.derive_seed(build.seed, node.seed_index)

    def run(self, ctx: RunContext, inputs: list, args: ArgValues) -> Any:
        """Computes one batch; returns a TensorList or a list of them (one per output)."""
        raise NotImplementedError(f"{self.name} has no host implementation")

    #: A device implementation: ``run_jax(inputs: list[jax.Array], args: JaxArgs) -> list[jax.Array]``.
    run_jax: Callable | None = None

    #: May run in the device stage of a device-output pipeline when it is a host operator whose results
    #: only feed outputs (``run_jax`` must give ``run``'s values bit for bit).
    device_offload: bool = False

    #: With ``device_offload``: whether it also moves to the device stage when the device is a CPU (host
    #: memory, so nothing is saved on the transfer); False when the host implementation is the faster.
    offload_to_cpu_devices: bool = True

    #: ``dense_device_inputs(ctx, inputs, args) -> list[TensorListCPU] | None``: a dense stand-in for
    #: ragged inputs, so that an offloaded operator still runs in the device stage (None: run on the host).
    dense_device_inputs: Callable | None = None

    #: ``run_windowed(ctx, inputs, args, windows) -> outputs``: ``run``, computing only the window
    #: ``windows[i] = (anchor, shape)`` of each output sample (all of it when ``windows`` is None).
    run_windowed: Callable | None = None

    #: ``input_windows(shapes, layout, args) -> list[(anchor, shape)] | None``: the window of each input
    #: sample this operator reads, when it gives the same results from the windows alone (None: it
    #: needs the whole samples this time).
    input_windows: Callable | None = None

    #: ``sample_source(ctx, inputs, args) -> SampleSource | None``: this batch's output as samples computed
    #: when its only reader asks for them (``jaxdali.ops.sample_source``); None: ``run`` it as usual.
    sample_source: Callable | None = None

    #: ``run_fed(ctx, source, args, windows) -> outputs``: ``run_windowed`` of a one-input operator whose
    #: input is a ``SampleSource``, consuming each sample as it is computed.
    run_fed: Callable | None = None

    #: Whether the source may end an epoch (``StopIteration``); readers end epochs through their metadata.
    ends_epochs: bool = False

    #: Whether the operator takes batches through ``feed`` (``Pipeline.feed_input``).
    takes_fed_data: bool = False

    #: Whether a stateful source resumes a checkpoint taken on another shard layout (readers).
    can_reshard: bool = False

    #: The samples replaced under ``error_policy="replace"``; None for operators without that policy.
    skip_log: "SkipLog | None" = None

    #: Output row i is a function of input row i, the arguments of row i and row i of
    #: ``ctx.sample_keys`` only (no batch-wide statistics, no row replacements): the runner may then
    #: compute the batches of several pipelines with the same graph in one call
    #: (``jaxdali.pipeline.group``), each row's values unchanged.
    row_wise: bool = False

    #: The output is the input, unchanged (``node.gpu()``/``node.cpu()`` transfers): on a pipeline whose device
    #: is a CPU the plan looks through it (a decoder still feeds the resize after ``.gpu()``).
    passthrough: bool = False

    def check_device_args(self, args: ArgValues) -> None:
        """Validates per-sample argument values on the host before the device program is recorded
        (the traced program cannot raise on bad values)."""

    def output_shapes(self, inputs: list, args: ArgValues) -> tuple[list[tuple[int, ...]], str] | None:
        """(per-sample shapes, layout) of this batch's output before it is computed, for
        ``run_windowed``; None when unknown (the whole output is computed)."""
        return None

    def output_layouts(self, input_layouts: list[str]) -> list[str]:
        """Layouts of the device implementation's outputs (default: the first input's layout)."""
        return [input_layouts[0] if input_layouts else ""] * len(self.node.outputs)

    def state(self) -> dict | None:
        """Plain JSON-able state after the last produced batch; None for stateless operators."""
        return None

    def restore(self, state: dict) -> None:
        """Sets the state saved by ``state``."""

    def check_restored_position(self, iteration: int) -> None:
        """After ``restore``: raises CheckpointError when the restored state cannot belong to a
        pipeline that has produced ``iteration`` batches."""

    def resume_info(self) -> dict | None:
        """For iterators, after a restore on another shard layout (``can_reshard``): the residual epoch
        being finished (``{"residual": samples, "next_epoch": n}``), else None."""
        return None

    def reader_meta(self) -> dict | None:
        """Reader metadata (``Pipeline.reader_meta``); None for operators that are no reader."""
        return None

    def feed(self, data: Any, layout: str | None) -> None:
        """Queues one batch given to ``Pipeline.feed_input``; only where ``takes_fed_data``."""
        raise RuntimeError(f"{self.name} takes no fed data")

    def start_epoch(self, epoch: int) -> None:
        """Called by ``Pipeline.reset()`` when a new external-source epoch starts."""

    def cancel(self) -> None:
        """Makes a ``run`` in progress on another thread stop waiting (for fed data, worker
        processes, ...) and raise; called when the pipeline closes, before its producer threads are
        joined and before ``close``. Operators that never wait need nothing here."""

    def close(self) -> None:
        """Releases resources (processes, files)."""
