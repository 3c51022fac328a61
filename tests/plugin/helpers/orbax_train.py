"""A small training run fed by jaxdali, saved and restored with one Orbax CheckpointManager.

Usage: python orbax_train.py MODE CKPT_DIR FLOWERS_ROOT
  MODE=full: 6 steps without interruption; MODE=first: 3 steps then save; MODE=resume: restore, 3 steps.
Prints one JSON line: per step, a digest of the batch and the loss; and the final parameters' sum.
"""

import hashlib
import json
import os
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

from jaxdali import fn, types  # noqa: E402
from jaxdali.plugin.jax import data_iterator  # noqa: E402
from jaxdali.plugin.jax.orbax import LoaderRestore, LoaderSave  # noqa: E402

mode, ckpt_dir, root = sys.argv[1], sys.argv[2], sys.argv[3]
mesh = Mesh(jax.devices(), ("batch",))
sharding = NamedSharding(mesh, PartitionSpec("batch"))


@data_iterator(output_map=["images", "labels"], reader_name="Reader", sharding=sharding)
def loader(shard_id, num_shards):
    jpegs, labels = fn.readers.file(file_root=root, shard_id=shard_id, num_shards=num_shards, random_shuffle=True,
                                    pad_last_batch=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB)
    images = fn.resize(images, resize_x=16, resize_y=16)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="HWC", mean=[128.0] * 3,
                                      std=[64.0] * 3, mirror=fn.random.coin_flip())
    return images, labels


ITERATOR_KWARGS = dict(batch_size=16, seed=7, enable_checkpointing=True, num_threads=2)
optimizer = optax.sgd(0.1)


def init_state():
    params = {"w": jnp.zeros((16 * 16 * 3, 5)), "b": jnp.zeros(5)}
    replicated = NamedSharding(mesh, PartitionSpec())
    return jax.device_put({"params": params, "opt": optimizer.init(params)}, replicated)


@jax.jit
def train_step(state, images, labels):
    def loss_fn(params):
        logits = images.reshape(images.shape[0], -1) @ params["w"] + params["b"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels[:, 0]).mean()

    loss, grads = jax.value_and_grad(loss_fn)(state["params"])
    updates, opt = optimizer.update(grads, state["opt"], state["params"])
    return {"params": optax.apply_updates(state["params"], updates), "opt": opt}, loss


def run(state, it, steps):
    log = []
    for _ in range(steps):
        try:
            batch = next(it)
        except StopIteration:
            it.reset()
            batch = next(it)
        digest = hashlib.sha256(np.asarray(batch["images"]).tobytes() + np.asarray(batch["labels"]).tobytes())
        state, loss = train_step(state, batch["images"], batch["labels"])
        log.append([digest.hexdigest()[:16], round(float(loss), 5)])
    return state, log


options = ocp.CheckpointManagerOptions(max_to_keep=2)
with ocp.CheckpointManager(ckpt_dir, options=options) as mngr:
    if mode == "full":
        state, log = run(init_state(), loader(**ITERATOR_KWARGS), 18)
    elif mode == "first":
        it = loader(**ITERATOR_KWARGS)
        state, log = run(init_state(), it, 9)
        mngr.save(9, args=ocp.args.Composite(state=ocp.args.StandardSave(state), loader=LoaderSave(it)))
        mngr.wait_until_finished()
    else:
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, init_state())
        restored = mngr.restore(mngr.latest_step(), args=ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), loader=LoaderRestore(loader, kwargs=ITERATOR_KWARGS)))
        state, log = run(restored.state, restored.loader, 9)
print(json.dumps({"log": log, "w": float(jnp.sum(state["params"]["w"] ** 2))}))
