"""Train a small CNN on the bundled flower photos with a jaxdali loader, Flax and Optax.

What it shows, end to end on any machine (CPU here, GPU/TPU unchanged):
  * the ResNet-style training pipeline (random-crop decode, resize, flip, normalise) and a
    validation pipeline (decode, shorter side, centre crop), written with DALI's API;
  * ``@data_iterator`` with a ``NamedSharding``: one pipeline per device, global sharded batches;
  * exact-once evaluation with ``pad_last_batch`` and the ``is_nonpadding`` mask;
  * model and loader saved together by one Orbax ``CheckpointManager``; ``--resume`` continues
    from the last checkpoint exactly where it stopped.

Run:  python examples/train_flowers.py [--epochs 3] [--data ../shared/data/flowers] [--resume]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from flax import linen as nn
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jaxdali import fn, types
from jaxdali.plugin.jax import LastBatchPolicy, data_iterator
from jaxdali.plugin.jax.orbax import LoaderRestore, LoaderSave

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "flowers"
SIZE = 64
MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def make_loaders(root: str, mesh: Mesh):
    sharding = NamedSharding(mesh, P("batch"))

    @data_iterator(output_map=["images", "labels"], reader_name="Reader", sharding=sharding,
                   last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)
    def train_loader(shard_id, num_shards):
        jpegs, labels = fn.readers.file(file_root=root, shard_id=shard_id, num_shards=num_shards,
                                        random_shuffle=True, pad_last_batch=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, output_type=types.RGB, random_area=[0.1, 1.0],
                                               random_aspect_ratio=[0.8, 1.25], num_attempts=100)
        images = fn.resize(images, resize_x=SIZE, resize_y=SIZE)
        images = fn.crop_mirror_normalize(images.gpu(), dtype=types.FLOAT, output_layout="HWC", mean=MEAN,
                                          std=STD, mirror=fn.random.coin_flip(probability=0.5))
        return images, labels.gpu()

    @data_iterator(output_map=["images", "labels"], reader_name="Reader", sharding=sharding)
    def val_loader(shard_id, num_shards):
        jpegs, labels = fn.readers.file(file_root=root, shard_id=shard_id, num_shards=num_shards,
                                        pad_last_batch=True, name="Reader")
        images = fn.decoders.image(jpegs, output_type=types.RGB)
        images = fn.resize(images, resize_shorter=SIZE + SIZE // 8)
        images = fn.crop_mirror_normalize(images.gpu(), crop=(SIZE, SIZE), dtype=types.FLOAT, output_layout="HWC",
                                          mean=MEAN, std=STD)
        return images, labels.gpu()

    return train_loader, val_loader


class SmallCNN(nn.Module):
    num_classes: int = 5

    @nn.compact
    def __call__(self, x):
        for features in (32, 64, 128):
            x = nn.Conv(features, (3, 3))(x)
            x = nn.relu(x)
            x = nn.max_pool(x, (2, 2), (2, 2))
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes)(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32, help="global batch size")
    parser.add_argument("--checkpoint-dir", default=os.path.join("/tmp", "jaxdali_flowers_ckpt"))
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    args = parser.parse_args()

    mesh = Mesh(jax.devices(), ("batch",))
    replicated = NamedSharding(mesh, P())
    train_loader, val_loader = make_loaders(args.data, mesh)
    loader_kwargs = dict(batch_size=args.batch_size, seed=0, enable_checkpointing=True,
                         num_threads=os.cpu_count())

    model = SmallCNN()
    tx = optax.adam(3e-3)
    params = model.init(jax.random.key(0), jnp.zeros((1, SIZE, SIZE, 3)))
    state = jax.device_put({"params": params, "opt": tx.init(params), "step": jnp.zeros((), jnp.int32)}, replicated)

    @jax.jit
    def train_step(state, images, labels):
        def loss_fn(p):
            logits = model.apply(p, images)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels[:, 0]).mean()

        loss, grads = jax.value_and_grad(loss_fn)(state["params"])
        updates, opt = tx.update(grads, state["opt"], state["params"])
        return {"params": optax.apply_updates(state["params"], updates), "opt": opt, "step": state["step"] + 1}, loss

    @jax.jit
    def eval_step(params, images, labels, mask):
        correct = jnp.argmax(model.apply(params, images), -1) == labels[:, 0]
        return jnp.sum(correct & mask), jnp.sum(mask)

    options = ocp.CheckpointManagerOptions(max_to_keep=2)
    with ocp.CheckpointManager(os.path.abspath(args.checkpoint_dir), options=options) as mngr:
        if args.resume and mngr.latest_step() is not None:
            abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
            restored = mngr.restore(mngr.latest_step(), args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract), loader=LoaderRestore(train_loader, kwargs=loader_kwargs)))
            state, train_it = restored.state, restored.loader
            print(f"resumed from step {int(state['step'])}")
        else:
            train_it = train_loader(**loader_kwargs)
        val_it = val_loader(batch_size=args.batch_size, num_threads=os.cpu_count())
        print(f"{len(jax.devices())} device(s); global batch {args.batch_size}; "
              f"{len(train_it)} train steps per epoch")

        for epoch in range(args.epochs):
            start, seen, losses = time.perf_counter(), 0, []
            for batch in train_it:
                state, loss = train_step(state, batch["images"], batch["labels"])
                losses.append(loss)
                seen += batch["images"].shape[0]
            train_seconds = time.perf_counter() - start
            correct = total = 0
            for batch in val_it:
                c, n = eval_step(state["params"], batch["images"], batch["labels"], val_it.is_nonpadding)
                correct, total = correct + int(c), total + int(n)
            mngr.save(int(state["step"]), args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                                  loader=LoaderSave(train_it)))
            print(f"epoch {epoch + 1}: loss {float(np.mean(jax.device_get(losses))):.3f}, "
                  f"val accuracy {correct / total:.3f} ({correct}/{total} images, each counted once), "
                  f"{seen / train_seconds:.0f} train images/s")
        mngr.wait_until_finished()


if __name__ == "__main__":
    main()
