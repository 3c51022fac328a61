"""The JAX iterator's output recycling (device_stage.OutputRecycler): the fused device program writes a
batch into the memory of an earlier batch that nothing holds any more, and never into one that is held."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from jaxdali import fn, pipeline_def, types  # noqa: E402
from jaxdali.core import options  # noqa: E402
from jaxdali.plugin.jax import DALIGenericIterator  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:Please set `reader_name`"),  # size= is given on purpose
              pytest.mark.usefixtures("device_stage_on_cpu")]

BS, SIDE = 8, 128  # a float32 CHW batch of 1.5 MiB: large enough to be recycled


@pipeline_def(batch_size=BS, num_threads=2, prefetch_queue_depth=2)
def frames(shard_id=0):
    # Sample k of iteration i of shard s is filled with (i * BS + k + 100 * s) % 251.
    def batch(i):
        values = (i * BS + np.arange(BS) + 100 * shard_id) % 251
        return np.broadcast_to(values[:, None, None, None], (BS, SIDE, SIDE, 3)).astype(np.uint8)

    images = fn.external_source(source=batch, batch=True, layout="HWC")
    return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=[0.0], std=[1.0])


def expected(iteration: int, shard_id: int = 0) -> np.ndarray:
    values = (iteration * BS + np.arange(BS) + 100 * shard_id) % 251
    return np.broadcast_to(values[:, None, None, None], (BS, 3, SIDE, SIDE)).astype(np.float32)


def iterator(devices):
    pipes = [frames(shard_id=s, device_id=d.id) for s, d in enumerate(devices)]
    sharding = NamedSharding(Mesh(np.array(devices), ("batch",)), P("batch"))
    return DALIGenericIterator(pipes, ["x"], sharding=sharding, size=10**6), pipes


def shard_pointers(array) -> tuple[int, ...]:
    return tuple(s.data.unsafe_buffer_pointer() for s in array.addressable_shards)


def test_dropped_batches_are_reused_and_every_batch_is_right():
    it, pipes = iterator(jax.devices()[:1])
    assert pipes[0]._runner.offloaded_ops  # the normalisation runs in the device program
    pointers = []
    for i in range(12):
        batch = next(it)["x"]
        np.testing.assert_array_equal(np.array(batch), expected(i))
        pointers.append(shard_pointers(batch))
        del batch
    assert len(set(pointers)) < 12  # later batches were written where earlier ones were


@pytest.mark.parametrize("ndev", [1, 8])
def test_batches_kept_in_any_form_are_never_overwritten(ndev):
    if len(jax.devices()) < ndev:
        pytest.skip(f"needs {ndev} devices")
    devices = jax.devices()[:ndev]
    it, _ = iterator(devices)
    kept_arrays, kept_views, pending = {}, {}, {}
    total = jax.jit(lambda x: x.sum())
    for i in range(16):
        batch = next(it)["x"]
        if i % 4 == 0:
            kept_arrays[i] = batch  # the global array
        elif i % 4 == 1:
            kept_views[i] = np.asarray(batch.addressable_shards[0].data)  # a NumPy view, array dropped
        elif i % 4 == 2:
            pending[i] = total(batch)  # dispatched asynchronously, batch dropped right away
        del batch
    for i, array in kept_arrays.items():
        got = np.array(array).reshape(ndev, BS, 3, SIDE, SIDE)
        for s in range(ndev):
            np.testing.assert_array_equal(got[s], expected(i, s))
    for i, view in kept_views.items():
        np.testing.assert_array_equal(view, expected(i, 0))
    for i, result in pending.items():
        want = sum(expected(i, s).sum(dtype=np.float64) for s in range(ndev))
        assert float(result) == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("ndev", [1, 8])
def test_batches_the_consumer_donates_are_not_lent_again(ndev):
    """A training step that donates its batch (``donate_argnums``) deletes the batch's memory: the program
    must not be lent it afterwards (it raised "Array has been deleted" on the next batch)."""
    if len(jax.devices()) < ndev:
        pytest.skip(f"needs {ndev} devices")
    it, _ = iterator(jax.devices()[:ndev])
    step = jax.jit(lambda x: x + 1.0, donate_argnums=0)
    results = []
    for i in range(12):
        out = step(next(it)["x"])
        results.append((out, np.concatenate([expected(i, s) for s in range(ndev)]) + 1.0))
    for out, want in results:
        np.testing.assert_array_equal(np.asarray(out), want)


def test_recycling_can_be_switched_off(monkeypatch):
    monkeypatch.setitem(options._values, "recycle_device_outputs", False)
    it, pipes = iterator(jax.devices()[:1])
    for i in range(4):
        np.testing.assert_array_equal(np.array(next(it)["x"]), expected(i))
    assert pipes[0]._runner._recycler is None


def test_derived_arrays_keep_their_sources_from_being_lent():
    from jaxdali.pipeline.device_stage import OutputRecycler, note_derived

    recycler = OutputRecycler()
    array = jnp.zeros((512, 1024), jnp.float32)  # 2 MiB
    recycler.track([array], inputs=[])
    derived = jax.make_array_from_single_device_arrays(array.shape, array.sharding, [array])
    note_derived([array], derived)
    assert recycler.take(array.shape, array.dtype) is None  # held by this test
    del array
    assert recycler.take((512, 1024), jnp.float32) is None  # the derived array still shares it
    del derived
    assert recycler.take((512, 1024), jnp.float32) is not None
    assert recycler.take((512, 1024), jnp.float32) is None  # lent once
