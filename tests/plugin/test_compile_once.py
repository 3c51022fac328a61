"""A batch after the first compiles nothing: the device stage and the assembly into ``jax.Array``s
reuse what the first batch compiled, through the JAX iterator and through ``data_iterator`` over
several devices, across an epoch boundary too (``tests/ops/test_device_stage.py`` checks the same
for ``Pipeline.run``).

Compilations are counted with ``jax.monitoring``: every XLA backend compilation reports its duration.
"""

from __future__ import annotations

import glob
import pathlib

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

from jaxdali import fn, pipeline_def, types  # noqa: E402
from jaxdali.plugin.jax import DALIGenericIterator, data_iterator  # noqa: E402
from tests.compilations import count_compilations  # noqa: E402

FLOWERS = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data" / "flowers"
PHOTOS = sorted(glob.glob(str(FLOWERS / "tulips" / "*.jpg")))[:12]
DEVICES = 4
pytestmark = pytest.mark.skipif(len(PHOTOS) < 12 or len(jax.devices()) < DEVICES,
                                reason=f"needs the shared photos under {FLOWERS} and {DEVICES} JAX devices")




def graph(shard_id=0, num_shards=1):
    """Real photos decoded and resized on the host, then augmented on the device (``.gpu()``) with
    per-sample random arguments, so that every batch has new values for the same programs."""
    jpegs, labels = fn.readers.file(files=PHOTOS, labels=list(range(len(PHOTOS))), shard_id=shard_id,
                                    num_shards=num_shards, random_shuffle=True, name="Reader")
    images = fn.resize(fn.decoders.image(jpegs), resize_x=48, resize_y=40)
    images = fn.hsv(images.gpu(), hue=fn.random.uniform(range=(-20, 20)))
    images = fn.crop_mirror_normalize(images, crop=(32, 32), crop_pos_x=fn.random.uniform(range=(0, 1)),
                                      mirror=fn.random.coin_flip(), mean=[128.0] * 3, std=[64.0] * 3,
                                      output_layout="HWC", dtype=types.FLOAT16)
    return images, labels


def _batches_after_the_first(iterator, count: int) -> tuple[int, list[np.ndarray]]:
    """Compilations made while ``count`` batches after the first are read (an epoch ends among
    them), and the images of those batches."""
    next(iterator)
    images = []
    with count_compilations() as later:
        while len(images) < count:
            for batch in iterator:
                images.append(np.asarray(batch["images"]))
                if len(images) == count:
                    break
    return later[0], images


def test_jax_iterator_second_batch_compiles_nothing():
    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=3)
    def pipe():
        return graph()

    with count_compilations() as first:
        it = DALIGenericIterator(pipe(), ["images", "labels"], reader_name="Reader", auto_reset=True)
    try:
        later, images = _batches_after_the_first(it, 5)  # 3 batches per epoch: crosses the epoch end
    finally:
        it.close()
    assert first[0] >= 1  # the first batch did compile its device programs
    assert later == 0
    assert images[0].shape == (4, 32, 32, 3) and not np.array_equal(images[0], images[1])


def test_data_iterator_over_several_devices_second_batch_compiles_nothing():
    mesh = Mesh(np.array(jax.devices()[:DEVICES]), ("batch",))
    loader = data_iterator(graph, output_map=["images", "labels"], reader_name="Reader", auto_reset=True,
                           sharding=NamedSharding(mesh, PartitionSpec("batch")))
    with count_compilations() as first:
        it = loader(batch_size=2 * DEVICES, num_threads=1, seed=3)
    try:
        later, images = _batches_after_the_first(it, 4)  # 12 photos, 4 devices, 2 each: 2 batches per epoch
    finally:
        it.close()
    assert first[0] >= 1
    assert later == 0
    assert images[0].shape == (2 * DEVICES, 32, 32, 3)
