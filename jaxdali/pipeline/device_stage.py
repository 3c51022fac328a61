"""The device stage: ``.gpu()`` data and ``device="gpu"`` operators on the pipeline's JAX device.

Within one iteration, consecutive device operators that have a JAX implementation and dense inputs
are recorded into a small program instead of running at once. The program is compiled with
``jax.jit`` once per structure (XLA caches per input shapes) and runs when its results are needed,
so one transfer of the host data (usually uint8) feeds one fused computation. Operators that
change shapes per sample (decoders, resize, crops) have no JAX implementation: their "gpu" output
stays in host memory until it becomes dense or reaches the pipeline output, where it is placed on
the device.
"""

from __future__ import annotations

import logging
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from jaxdali.core.buffers import is_owned
from jaxdali.tensors import TensorListCPU, TensorListGPU

if TYPE_CHECKING:
    from jaxdali.ops.operator import Operator

__all__ = ["DeviceValue", "DeviceProgram", "JaxArgValues", "OutputRecycler", "PendingOutputs", "PendingValue",
           "jax_device", "narrow_for_jax", "note_derived", "note_parts", "place_on_device"]

_log = logging.getLogger("jaxdali")


def jax_device(device_id: int | None):
    """The JAX device that ``device_id`` names: the ``device_id``-th local device (0 when unset)."""
    import jax

    devices = jax.local_devices()
    index = 0 if device_id is None or device_id < 0 else device_id
    if index >= len(devices):
        raise RuntimeError(
            f"device_id={device_id} names local JAX device {index}, but this process has {len(devices)} "
            f"local devices: {devices}")
    return devices[index]


def narrow_for_jax(array: np.ndarray, what: str = "data") -> np.ndarray:
    """``array`` as JAX will hold it: with x64 disabled (JAX's default), 64-bit types become 32-bit.

    Integers that do not fit 32 bits raise instead of wrapping silently; float64 rounds to float32.
    """
    if array.dtype.itemsize != 8 or array.dtype.kind not in "iuf":
        return array
    import jax

    if jax.config.jax_enable_x64:
        return array
    if array.dtype.kind == "f":
        return array.astype(np.float32)
    target = np.dtype(np.int32 if array.dtype.kind == "i" else np.uint32)
    if array.size:
        info = np.iinfo(target)
        lo, hi = array.min(), array.max()
        if lo < info.min or hi > info.max:
            raise OverflowError(
                f"{what}: {array.dtype} values in [{lo}, {hi}] do not fit {target}, and JAX holds 64-bit integers "
                "as 32-bit unless x64 is enabled (jax.config.update('jax_enable_x64', True))")
    return array.astype(target)


class DeviceValue:
    """A batch placed (logically) on the device: host data not yet moved, a pending program value,
    a materialised ``jax.Array``, or ``samples`` of different shapes already on the device (one
    ``jax.Array`` each, e.g. images decoded on the GPU)."""

    __slots__ = ("host", "ref", "array", "samples", "layout", "source_info")

    def __init__(self, host: TensorListCPU | None = None, ref: int | None = None, array: Any = None,
                 layout: str = "", samples: list | None = None, source_info: list | None = None):
        self.host = host
        self.ref = ref
        self.array = array
        self.samples = samples
        self.layout = host.layout() if host is not None else layout
        self.source_info = host.source_info if host is not None else source_info

    @classmethod
    def of(cls, batch: TensorListCPU | TensorListGPU) -> "DeviceValue":
        """An operator's output for the device stage: host batches wait to be moved; device batches stay
        where they are (dense as one array, ragged as their samples)."""
        if isinstance(batch, TensorListCPU):
            return cls(host=batch)
        # Samples stay apart until a device program needs them stacked (rows an operator failed on are
        # None until the runner fills them with their replacements).
        return cls(samples=batch.samples(), layout=batch.layout(), source_info=batch.source_info)

    def is_dense(self) -> bool:
        if self.samples is not None:
            return len({None if s is None else tuple(s.shape) + (s.dtype,) for s in self.samples}) == 1 \
                and self.samples[0] is not None
        return self.host is None or self.host.is_dense_tensor()

    def device_array(self):
        """The dense batch as one ``jax.Array`` when it is on the device already (samples stacked there)."""
        if self.array is None and self.samples is not None:
            import jax.numpy as jnp

            self.array = jnp.stack(self.samples)
        return self.array

    def __len__(self) -> int:
        if self.host is not None:
            return len(self.host)
        if self.samples is not None:
            return len(self.samples)
        if self.array is not None:
            return len(self.array)
        raise TypeError("length of a pending device value is not known on the host")


class JaxArgValues:
    """Arguments of a device operator inside the traced program (mirrors ``ArgValues``)."""

    def __init__(self, op: str, constants: Mapping[str, Any], per_sample: Mapping[str, Any], batch_size: int):
        self._op = op
        self._constants = constants
        self._per_sample = per_sample
        self._n = batch_size

    def __getitem__(self, name: str) -> Any:
        return self._constants[name]

    @property
    def batch_size(self) -> int:
        return self._n

    def get(self, name: str, default: Any = None) -> Any:
        return self._constants.get(name, default)

    def is_per_sample(self, name: str) -> bool:
        return name in self._per_sample

    def given(self, name: str) -> bool:
        return name in self._per_sample or self._constants.get(name) is not None

    def per_sample(self, name: str, dtype: Any = np.float32, shape: Sequence[int] = ()):
        import jax.numpy as jnp

        shape = tuple(shape)
        if name in self._per_sample:
            return jnp.reshape(self._per_sample[name], (self._n,) + shape).astype(dtype)
        value = jnp.asarray(np.asarray(self._constants[name], dtype=dtype))
        if value.size == 1 and shape:
            value = jnp.full(shape, value.reshape(()), dtype=dtype)
        return jnp.broadcast_to(value.reshape(shape), (self._n,) + shape)


_FIRST_CALL_LOCK = threading.RLock()  # re-entrant: a program may call back into Python


class DeviceProgram:
    """Device operators recorded during one iteration, run as one jitted function."""

    def __init__(self, device, cache: dict, alias_owned: bool = False):
        self._device = device
        self._cache = cache
        # Device-output mode: operator-owned batches (``owned_empty``) never reach the user as NumPy
        # arrays, so the program may read them in place instead of copying them to the device.
        self._alias_owned = alias_owned
        self._leaves: list[np.ndarray] = []
        self._steps: list[tuple] = []
        self._num_values = 0
        self._results: dict[int, Any] = {}

    def leaf(self, array: np.ndarray) -> int:
        """Registers host data that the program reads; returns its value reference."""
        import jax

        # Device arrays stay where they are (JAX holds no 64-bit types to narrow).
        self._leaves.append(array if isinstance(array, jax.Array) else narrow_for_jax(np.asarray(array), "device data"))
        ref = self._new_values(1)[0]
        self._steps.append(("leaf", len(self._leaves) - 1, ref))
        return ref

    def record(self, op: "Operator", batch_size: int, input_refs: Sequence[int], arg_refs: Mapping[str, int],
               num_outputs: int) -> list[int]:
        outs = self._new_values(num_outputs)
        self._steps.append(("op", op, batch_size, tuple(input_refs), tuple(sorted(arg_refs.items())), tuple(outs)))
        return outs

    def _new_values(self, n: int) -> list[int]:
        refs = list(range(self._num_values, self._num_values + n))
        self._num_values += n
        return refs

    def empty(self) -> bool:
        return not any(step[0] == "op" for step in self._steps) and not self._leaves

    @property
    def steps(self) -> tuple:
        """The recorded steps: ``("leaf", leaf index, ref)`` or ``("op", op, batch size, input refs,
        argument refs, output refs)``."""
        return tuple(self._steps)

    @property
    def leaves(self) -> tuple:
        """The host (or device) data the steps read, by leaf index."""
        return tuple(self._leaves)

    def structure(self, wanted: Sequence[int]) -> tuple:
        """What identifies the program that computes ``wanted`` (operators by graph node id)."""
        return tuple((s[0], s[1].node.id, s[2], s[3], s[4], s[5]) if s[0] == "op" else s
                     for s in self._steps) + (tuple(wanted),)

    def replay(self, wanted: Sequence[int]):
        """The recorded steps as a function of the leaves that returns the ``wanted`` values."""
        return _replay_fn(list(self._steps), tuple(wanted))

    def run(self, wanted: Sequence[int], recycler: "OutputRecycler | None" = None) -> dict[int, Any]:
        """Executes the recorded steps; returns the jax arrays of the ``wanted`` references.

        With a ``recycler`` (final outputs in device-output mode), large results are written into the
        memory of earlier outputs that nothing holds any more, and are tracked for reuse in turn.
        """
        import jax

        wanted = tuple(sorted(set(wanted)))
        missing = tuple(r for r in wanted if r not in self._results)
        if not missing:
            return {r: self._results[r] for r in wanted}
        structure = self.structure(missing)
        if self._alias_owned and any(is_owned(leaf) for leaf in self._leaves):
            leaves = [jax.device_put(leaf, self._device, may_alias=is_owned(leaf)) for leaf in self._leaves]
        else:
            leaves = jax.device_put(self._leaves, self._device)
        reused = self._reusable_outputs(structure, leaves, recycler) if recycler is not None else ()
        key = (structure, tuple(i for i, _ in reused))
        args = (*leaves, *(buffer for _, buffer in reused))
        fn = self._cache.get(key)
        if fn is not None:
            results = fn(*args)
        else:
            # The first call compiles; a second producer thread of the pipeline waits for it instead of
            # compiling the same program again.
            with _FIRST_CALL_LOCK:
                fn = self._cache.get(key)
                if fn is None:
                    program = _replay_fn(list(self._steps), missing)
                    if reused:
                        # The donated buffers are unused inputs: XLA aliases each to the output of its shape.
                        first = len(leaves)
                        fn = jax.jit(lambda *args: program(*args[:first]), keep_unused=True,
                                     donate_argnums=tuple(range(first, first + len(reused))))
                    else:
                        fn = jax.jit(program)
                results = fn(*args)
                self._cache[key] = fn
        if recycler is not None:
            recycler.track(results, leaves)
        self._results.update(zip(missing, results))
        return {r: self._results[r] for r in wanted}

    def _reusable_outputs(self, structure: tuple, leaves: list, recycler: "OutputRecycler") -> list[tuple[int, Any]]:
        """(output index, free buffer of its shape and dtype) for the large outputs the recycler can serve."""
        import jax

        key = ("shapes", structure, tuple((leaf.shape, leaf.dtype) for leaf in leaves))
        shapes = self._cache.get(key)
        if shapes is None:
            program = _replay_fn(list(self._steps), structure[-1])
            shapes = [(out.shape, out.dtype) for out in jax.eval_shape(program, *leaves)]
            self._cache[key] = shapes
        reused = []
        for i, (shape, dtype) in enumerate(shapes):
            buffer = recycler.take(shape, dtype)
            if buffer is not None:
                reused.append((i, buffer))
        return reused


class OutputRecycler:
    """Lends the device program the memory of its earlier outputs once nothing else holds them.

    A fresh output buffer is mapped and zeroed page by page by the kernel as the program first writes it:
    for a float32 batch of 64 × 224 × 224 × 3 that costs about three times the normalisation that fills
    it. Writing into a donated earlier output costs nothing of the kind.

    An output is free when this recycler holds the only reference to it and every array built from it
    (``note_derived``: the iterators' global arrays) is gone. The runtime makes the rest safe: a donation
    waits for computations still reading the buffer, and a buffer with a NumPy or DLPack view alive is
    not donated but copied. Only outputs of ``MIN_BYTES`` or more are tracked, at most ``limit`` at a time
    (the oldest are forgotten: a consumer that keeps every batch just gets fresh buffers).
    """

    MIN_BYTES = 1 << 20

    def __init__(self, limit: int = 8):
        self._limit = limit
        self._lock = threading.Lock()
        self._entries: list[_Tracked] = []

    def take(self, shape: tuple, dtype) -> Any:
        """A free tracked array of ``shape`` and ``dtype`` (now the caller's, to donate), or None."""
        with self._lock:
            # An output whose memory the consumer donated to its own computation (a jitted step with
            # donate_argnums) is deleted: it has nothing left to lend.
            for entry in [e for e in self._entries if e.array.is_deleted()]:
                self._entries.remove(entry)
                _forget(entry)
            for k, entry in enumerate(self._entries):
                if entry.array.shape == shape and entry.array.dtype == dtype and entry.is_free():
                    del self._entries[k]
                    _forget(entry)
                    return entry.array
        return None

    def track(self, arrays: Sequence[Any], inputs: Sequence[Any]) -> None:
        """Watches the large ``arrays`` that the program allocated (not inputs passed through)."""
        skip = {id(a) for a in inputs}
        with self._lock:
            for array in arrays:
                if id(array) in skip or array.nbytes < self.MIN_BYTES:
                    continue
                skip.add(id(array))
                entry = _Tracked(array)
                self._entries.append(entry)
                with _REGISTRY_LOCK:
                    _REGISTRY[id(array)] = (None, entry)
            while len(self._entries) > self._limit:
                _forget(self._entries.pop(0))


class _Tracked:
    __slots__ = ("array", "derived")

    def __init__(self, array):
        self.array = array
        self.derived: list[weakref.ref] = []

    def is_free(self) -> bool:
        # 2: this entry's reference and getrefcount's own argument.
        return sys.getrefcount(self.array) == 2 and all(ref() is None for ref in self.derived)


# id(array) -> (weak reference to it, or None for the tracked array itself; its entry), for note_derived.
_REGISTRY: dict[int, tuple[weakref.ref | None, _Tracked]] = {}
_REGISTRY_LOCK = threading.RLock()  # re-entrant: a weakref callback may run while it is held


def _forget(entry: _Tracked) -> None:
    with _REGISTRY_LOCK:
        found = _REGISTRY.get(id(entry.array))
        if found is not None and found[1] is entry:
            del _REGISTRY[id(entry.array)]


def _entry_of(array: Any) -> _Tracked | None:
    """The tracked entry whose memory ``array`` shares (call with the lock held)."""
    found = _REGISTRY.get(id(array))
    if found is None:
        return None
    ref, entry = found
    return entry if (entry.array is array if ref is None else ref() is array) else None


def note_derived(sources: Sequence[Any], derived: Any) -> Any:
    """Records that ``derived`` (e.g. a global array made of ``sources`` as its shards) shares the memory
    of ``sources``, so no recycler lends it out while ``derived`` lives. Arrays made in turn from
    ``derived`` count too. Returns ``derived``."""
    with _REGISTRY_LOCK:
        for source in sources:
            entry = _entry_of(source)
            if entry is not None:
                entry.derived.append(_register(derived, entry))
    return derived


def note_parts(whole: Any, parts: Sequence[Any]) -> None:
    """Records that ``parts`` (the per-device shards of ``whole``, which ``whole`` itself holds) share
    its memory: arrays made from them count as made from ``whole`` (``note_derived``)."""
    with _REGISTRY_LOCK:
        entry = _entry_of(whole)
        if entry is not None:
            for part in parts:
                _register(part, entry)


def _register(array: Any, entry: _Tracked) -> weakref.ref:
    """Maps ``array`` to ``entry`` for as long as it lives (call with the lock held)."""
    key = id(array)

    # The registry is bound here: at interpreter exit the module's globals may be gone before the callback.
    def unregister(ref, key=key, registry=_REGISTRY, lock=_REGISTRY_LOCK):
        with lock:
            if registry.get(key, (None,))[0] is ref:
                del registry[key]

    ref = weakref.ref(array, unregister)
    _REGISTRY[key] = (ref, entry)
    return ref


def _replay_fn(steps: list[tuple], wanted: tuple[int, ...]):
    def program(*leaves):
        values: dict[int, Any] = {}
        for step in steps:
            if step[0] == "leaf":
                values[step[2]] = leaves[step[1]]
                continue
            _, op, batch_size, input_refs, arg_refs, outs = step
            inputs = [values[r] for r in input_refs]
            per_sample = {name: values[r] for name, r in arg_refs}
            args = JaxArgValues(op.node.schema.name, op.args, per_sample, batch_size)
            results = op.run_jax(inputs, args)
            if not isinstance(results, (list, tuple)):
                results = [results]
            for r, v in zip(outs, results):
                values[r] = v
        return tuple(values[r] for r in wanted)

    return program


def place_on_device(host: TensorListCPU, device, may_alias: bool = False,
                    what: str = "device output") -> TensorListGPU:
    """Moves a host batch to the device: one transfer when dense, one per sample otherwise.

    ``may_alias``: a dense ``owned_empty`` buffer may become the device array's memory (no copy on a
    CPU device); the caller guarantees nothing else holds it. ``what`` names the batch in errors.
    """
    import jax

    dense = host.dense()
    if dense is not None:
        alias = may_alias and is_owned(dense) and narrow_for_jax(dense) is dense
        placed = jax.device_put(narrow_for_jax(dense, what), device, may_alias=alias)
    else:
        placed = jax.device_put([narrow_for_jax(s, what) for s in host.samples()], device)
    return TensorListGPU(placed, host.layout(), host.source_info)


class PendingValue:
    """An output of a batch whose device program has not run yet (``PendingOutputs``): its length and
    layout are known on the host, its values are not."""

    __slots__ = ("_length", "_layout", "replaced_rows")

    def __init__(self, length: int, layout: str):
        self._length = length
        self._layout = layout
        self.replaced_rows: tuple[int, ...] = ()

    def __len__(self) -> int:
        return self._length

    def layout(self) -> str:
        return self._layout


class PendingOutputs:
    """A batch's outputs in device-output mode before the device stage has run, so that an iterator
    can run the stages of its pipelines' batches together (``OutputMode.defer``).

    ``entries`` has one tuple per output: ``("ref", ref, layout, source_info)``, a value of
    ``program``; ``("place", host batch, may_alias, what)``, a dense host batch to place on
    ``device``; or ``("done", output)``. ``resolve()`` does what the pipeline does without deferring.
    """

    __slots__ = ("program", "entries", "device", "recycler", "replaced_rows")

    def __init__(self, program: DeviceProgram | None, entries: list[tuple], device, recycler: OutputRecycler | None,
                 replaced_rows: tuple[int, ...]):
        self.program = program
        self.entries = entries
        self.device = device
        self.recycler = recycler
        self.replaced_rows = replaced_rows

    def wanted(self) -> tuple[int, ...]:
        """The program values the outputs need, ascending."""
        return tuple(sorted({e[1] for e in self.entries if e[0] == "ref"}))

    def placeholders(self, batch_size: int) -> list:
        """What stands for each output until the stage runs (lengths for the iterator's checks)."""
        return [PendingValue(batch_size, e[2]) if e[0] == "ref" else e[1] for e in self.entries]

    def resolve(self) -> list:
        """Runs this batch's device stage alone, on its own device; returns the outputs."""
        wanted = self.wanted()
        results = self.program.run(wanted, self.recycler) if wanted else {}
        return self.finish(lambda ref: results[ref],
                           lambda i, host, may_alias, what: place_on_device(host, self.device, may_alias, what))

    def finish(self, value_of, place) -> list:
        """The outputs, with ``value_of(ref)`` the program's array for a ``ref`` entry and
        ``place(i, host, may_alias, what)`` the placed ``TensorListGPU`` for the ``place`` entry of output
        ``i``."""
        outputs = []
        for i, entry in enumerate(self.entries):
            if entry[0] == "ref":
                out = TensorListGPU(value_of(entry[1]), entry[2], entry[3])
            elif entry[0] == "place":
                out = place(i, *entry[1:])
            else:
                out = entry[1]
            if self.replaced_rows:
                out.replaced_rows = self.replaced_rows
            outputs.append(out)
        return outputs
