"""A ResNet-style training input pipeline with TrivialAugment Wide, through data_iterator over the
8 simulated devices: sharded global batches, and the augmentation is per sample."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

from jaxdali import fn, types  # noqa: E402
from jaxdali.auto_aug import trivial_augment  # noqa: E402
from jaxdali.plugin.jax import data_iterator  # noqa: E402


def test_trivial_augment_wide_training_pipeline_on_8_devices(flowers_root):
    devices = jax.devices()
    assert len(devices) == 8
    sharding = NamedSharding(Mesh(devices, ("batch",)), PartitionSpec("batch"))

    @data_iterator(output_map=["images", "labels", "plain"], reader_name="Reader", sharding=sharding)
    def loader(root, shard_id, num_shards):
        jpegs, labels = fn.readers.file(file_root=root, shard_id=shard_id, num_shards=num_shards,
                                        random_shuffle=True, pad_last_batch=True, name="Reader", seed=3)
        images = fn.decoders.image_random_crop(jpegs, seed=5)
        images = fn.resize(images, size=[32, 32])
        plain = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                         mean=[124.0, 116.0, 104.0], std=[58.0, 57.0, 57.0])
        augmented = trivial_augment.trivial_augment_wide(images, seed=7)
        images = fn.crop_mirror_normalize(augmented, dtype=types.FLOAT, output_layout="CHW",
                                          mean=[124.0, 116.0, 104.0], std=[58.0, 57.0, 57.0])
        return images, labels, plain

    it = loader(root=flowers_root, batch_size=32, num_threads=2, seed=0, enable_conditionals=True)
    batches = [next(it) for _ in range(2)]
    for batch in batches:
        assert batch["images"].shape == (32, 3, 32, 32) and batch["images"].dtype == np.float32
        assert batch["images"].sharding == sharding
        assert [s.data.shape[0] for s in batch["images"].addressable_shards] == [4] * 8
    images = np.concatenate([np.asarray(b["images"]) for b in batches])
    plain = np.concatenate([np.asarray(b["plain"]) for b in batches])
    changed = [not np.allclose(i, p) for i, p in zip(images, plain)]
    assert sum(changed) >= 40  # most samples augmented (identity and near-neutral bins leave a few)

    @jax.jit
    def step(x):
        return jax.numpy.mean(x, axis=(1, 2, 3))

    assert step(batches[0]["images"]).shape == (32,)
