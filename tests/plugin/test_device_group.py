"""The device stages of an iterator's pipelines (one per device) run as one program for the group
(``jaxdali.plugin.jax.device_group``): every shard equals its pipeline run alone, the group's program
is compiled once (not once per device), and pipelines whose programs differ run their own."""

from __future__ import annotations

import glob
import pathlib

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

from jaxdali import fn, pipeline_def, types  # noqa: E402
from jaxdali.plugin.jax import DALIGenericIterator, data_iterator  # noqa: E402
from jaxdali.pipeline import device_stage  # noqa: E402
from jaxdali.plugin.jax import assembly, device_group  # noqa: E402
from jaxdali.tensors import TensorListGPU  # noqa: E402
from tests.compilations import count_compilations  # noqa: E402

FLOWERS = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data" / "flowers"
PHOTOS = sorted(glob.glob(str(FLOWERS / "daisy" / "*.jpg")))[:32]
DEVICES = 8
BATCH = 2  # per device
pytestmark = [pytest.mark.skipif(len(PHOTOS) < 32 or len(jax.devices()) < DEVICES,
                                 reason=f"needs the shared photos under {FLOWERS} and {DEVICES} JAX devices"),
              pytest.mark.usefixtures("device_stage_on_cpu")]


def graph(shard_id=0, num_shards=1, mean=128.0):
    """Real photos decoded and resized on the host; crop_mirror_normalize with random windows and flips
    runs in the device stage (device-output mode), the labels are placed as they are."""
    jpegs, labels = fn.readers.file(files=PHOTOS, labels=list(range(len(PHOTOS))), shard_id=shard_id,
                                    num_shards=num_shards, random_shuffle=True, name="Reader")
    images = fn.resize(fn.decoders.image(jpegs), resize_x=40, resize_y=36)
    images = fn.crop_mirror_normalize(images, crop=(32, 32), crop_pos_x=fn.random.uniform(range=(0, 1)),
                                      crop_pos_y=fn.random.uniform(range=(0, 1)), mirror=fn.random.coin_flip(),
                                      mean=[mean] * 3, std=[64.0] * 3, dtype=types.FLOAT)
    return images, labels


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=None)
def alone_pipe(shard_id, num_shards, mean=128.0):
    return graph(shard_id, num_shards, mean)


def _alone(shards: int, steps: int, seed: int, means=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(images, labels) of each step, each shard's pipeline run alone on the host, concatenated."""
    pipes = [alone_pipe(shard_id=k, num_shards=shards, mean=128.0 if means is None else means[k], seed=seed)
             for k in range(shards)]
    try:
        out = []
        for _ in range(steps):
            runs = [p.run() for p in pipes]
            out.append((np.concatenate([r[0].as_array() for r in runs]),
                        np.concatenate([r[1].as_array() for r in runs])))
        return out
    finally:
        for p in pipes:
            p.close()


def _take(iterator, count: int) -> list[dict]:
    """``count`` batches, across epoch ends (the iterators reset themselves)."""
    batches = []
    while len(batches) < count:
        for batch in iterator:
            batches.append(batch)
            if len(batches) == count:
                break
    return batches


def test_every_shard_of_an_8_device_run_equals_its_pipeline_alone(monkeypatch):
    together = []  # one entry per global batch that one program computed for every pipeline
    run_together = device_group.DeviceGroup._run_together
    monkeypatch.setattr(device_group.DeviceGroup, "_run_together",
                        lambda self, stages: together.append(len(stages)) or run_together(self, stages))
    sharding = NamedSharding(Mesh(jax.devices()[:DEVICES], ("batch",)), PartitionSpec("batch"))
    loader = data_iterator(graph, output_map=["images", "labels"], reader_name="Reader", auto_reset=True,
                           sharding=sharding)
    it = loader(batch_size=BATCH * DEVICES, num_threads=2, seed=11)
    steps = 3  # 2 batches per epoch: crosses an epoch boundary
    try:
        batches = _take(it, steps)
    finally:
        it.close()
    got = []
    for batch in batches:
        assert batch["images"].sharding == sharding and batch["labels"].sharding == sharding
        got.append((np.asarray(batch["images"]), np.asarray(batch["labels"])))
    # Each global batch: one program for the 8 devices (run on the producer thread, so the batches
    # prefetched past the last one taken have run theirs too).
    assert len(together) >= steps and set(together) == {DEVICES}
    for (images, labels), (want_images, want_labels) in zip(got, _alone(DEVICES, steps, seed=11)):
        assert images.shape == (BATCH * DEVICES, 3, 32, 32)
        np.testing.assert_array_equal(images, want_images)
        np.testing.assert_array_equal(labels, want_labels)


def test_the_group_compiles_its_device_program_once():
    """The first batch over 8 devices makes as many compilations as over one (the group's program
    once, not once per device); later batches make none."""

    def first_and_later(devices: int) -> tuple[int, int]:
        sharding = NamedSharding(Mesh(jax.devices()[:devices], ("batch",)), PartitionSpec("batch"))
        loader = data_iterator(graph, output_map=["images", "labels"], reader_name="Reader", auto_reset=True,
                               sharding=sharding)
        with count_compilations() as first:
            it = loader(batch_size=BATCH * devices, num_threads=2, seed=5)
        try:
            with count_compilations() as later:
                _take(it, 3)
        finally:
            it.close()
        return first[0], later[0]

    one_first, one_later = first_and_later(1)
    group_first, group_later = first_and_later(DEVICES)
    assert one_first >= 1 and group_first == one_first
    assert one_later == 0 and group_later == 0


def test_pipelines_whose_programs_differ_run_their_own_and_keep_their_values():
    """Two pipelines with different normalisation constants cannot share one program: each runs its
    own, on its own device, with its own values."""
    means = [100.0, 140.0]
    pipes = [pipeline_def(graph, batch_size=BATCH, num_threads=2, device_id=k, seed=3)(
        shard_id=k, num_shards=2, mean=means[k]) for k in range(2)]
    sharding = NamedSharding(Mesh(jax.devices()[:2], ("batch",)), PartitionSpec("batch"))
    it = DALIGenericIterator(pipes, ["images", "labels"], reader_name="Reader", sharding=sharding)
    try:
        got = [np.asarray(next(it)["images"]) for _ in range(2)]
    finally:
        it.close()
    for images, (want, _) in zip(got, _alone(2, 2, seed=3, means=means)):
        np.testing.assert_array_equal(images, want)


def test_pmap_style_devices_stack_the_group_programs_outputs():
    loader = data_iterator(graph, output_map=["images", "labels"], reader_name="Reader",
                           devices=jax.devices()[:DEVICES])
    it = loader(batch_size=BATCH * DEVICES, num_threads=2, seed=9)
    try:
        batch = next(it)
    finally:
        it.close()
    images = np.asarray(batch["images"])
    assert images.shape == (DEVICES, BATCH, 3, 32, 32)
    want, want_labels = _alone(DEVICES, 1, seed=9)[0]
    np.testing.assert_array_equal(images.reshape(want.shape), want)
    np.testing.assert_array_equal(np.asarray(batch["labels"]).reshape(want_labels.shape), want_labels)


def test_pmap_style_stack_on_cpu_devices_is_a_view_of_the_pipelines_outputs():
    """``assembly.stack_pipelines`` adds the device axis without copying each device's batch."""
    devices = jax.devices()[:DEVICES]
    arrays = [jax.device_put(np.full((BATCH, 3), k, np.float32), d) for k, d in enumerate(devices)]
    stacked = assembly.stack_pipelines([TensorListGPU(a) for a in arrays], devices)
    assert stacked.shape == (DEVICES, BATCH, 3)
    np.testing.assert_array_equal(np.asarray(stacked), np.arange(DEVICES, dtype=np.float32)[:, None, None]
                                  * np.ones((1, BATCH, 3), np.float32))
    by_device = {shard.device: shard.data for shard in stacked.addressable_shards}
    for array, device in zip(arrays, devices):
        assert by_device[device].unsafe_buffer_pointer() == array.unsafe_buffer_pointer()


def test_held_pmap_style_batches_keep_their_values_while_outputs_are_recycled(monkeypatch):
    """The stacked batches share the group program's output memory: the recycler lends none of it to
    the next batches while they are alive."""
    monkeypatch.setattr(device_stage.OutputRecycler, "MIN_BYTES", 0)  # recycle even these small outputs
    loader = data_iterator(graph, output_map=["images", "labels"], reader_name="Reader",
                           devices=jax.devices()[:DEVICES], auto_reset=True)
    it = loader(batch_size=BATCH * DEVICES, num_threads=2, seed=5)
    try:
        held = [next(it)["images"] for _ in range(2)]
        copies = [np.array(images) for images in held]
        for _ in range(3):  # more batches computed while the first two are alive
            try:
                next(it)
            except StopIteration:
                next(it)
    finally:
        it.close()
    for images, copy, (want, _) in zip(held, copies, _alone(DEVICES, 2, seed=5)):
        np.testing.assert_array_equal(copy, want.reshape(copy.shape))
        np.testing.assert_array_equal(np.asarray(images), copy)


def test_a_pipeline_that_checks_its_outputs_runs_its_own_program_beside_the_group():
    """A pipeline with ``output_dtype`` checks its outputs on the producer, so it does not defer its device
    stage; the other pipeline's deferred stage still runs, and both keep their values."""
    pipes = [pipeline_def(graph, batch_size=BATCH, num_threads=2, device_id=k, seed=4,
                          output_dtype=[types.FLOAT, types.INT32] if k == 0 else None)(shard_id=k, num_shards=2)
             for k in range(2)]
    sharding = NamedSharding(Mesh(jax.devices()[:2], ("batch",)), PartitionSpec("batch"))
    it = DALIGenericIterator(pipes, ["images", "labels"], reader_name="Reader", sharding=sharding)
    try:
        got = [np.asarray(next(it)["images"]) for _ in range(2)]
    finally:
        it.close()
    for images, (want, _) in zip(got, _alone(2, 2, seed=4)):
        np.testing.assert_array_equal(images, want)


class _Host:
    """A host output as ``PendingOutputs`` holds it (``dense()``)."""

    def __init__(self, array):
        self.array = array

    def dense(self):
        return self.array


def test_placed_outputs_go_to_their_devices_aliasing_only_operator_owned_buffers():
    """On CPU devices the group places every pipeline's host output with one call: each device gets
    its pipeline's array, in place where the pipeline owns the buffer, as a copy otherwise (the
    caller may still write to it), and outputs of different shapes are placed one by one."""
    from jaxdali.core.buffers import owned_empty

    devices = jax.devices()[:DEVICES]
    group = device_group.DeviceGroup(devices)
    owned = []
    for k in range(DEVICES):
        array = owned_empty((BATCH, 1), np.int32)
        array[:] = k
        owned.append(array)
    placed = group._place_output([("place", _Host(a), True, "labels") for a in owned])
    for k, (array, device) in enumerate(zip(placed, devices)):
        assert array.devices() == {device} and array.shape == (BATCH, 1)
        np.testing.assert_array_equal(np.asarray(array), np.full((BATCH, 1), k, np.int32))
        assert array.unsafe_buffer_pointer() == owned[k].ctypes.data

    borrowed = [np.full((BATCH, 1), k, np.int32) for k in range(DEVICES)]
    placed = group._place_output([("place", _Host(a), True, "labels") for a in borrowed])
    for array in borrowed:
        array[:] = -1
    for k, array in enumerate(placed):
        np.testing.assert_array_equal(np.asarray(array), np.full((BATCH, 1), k, np.int32))

    ragged = [np.full((k + 1,), k, np.int64) for k in range(DEVICES)]
    placed = group._place_output([("place", _Host(a), False, "labels") for a in ragged])
    for k, (array, device) in enumerate(zip(placed, devices)):
        assert array.devices() == {device} and array.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(array), np.full((k + 1,), k, np.int32))
