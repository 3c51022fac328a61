"""Data-parallel training with ``jax.pmap``: ``data_iterator(devices=...)`` gives per-device stacks.

Each batch arrives as arrays of shape (devices, per-device batch, ...), one row block per device,
which is what a pmapped step takes. A linear classifier learns scikit-learn's digits (or ``--data``)
with gradients averaged across the devices by ``jax.lax.pmean``. New code should prefer ``sharding=``
and ``jax.jit`` (see examples/train.py); this is the pmap-era equivalent.

Run: python examples/pmap.py [--data DIR] [--epochs 3]
"""

import os

if "XLA_FLAGS" not in os.environ:  # 8 simulated devices on a CPU-only machine; must precede import jax
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import argparse  # noqa: E402
import functools  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from jaxdali import fn, types  # noqa: E402
from jaxdali.datasets import digits  # noqa: E402
from jaxdali.plugin.jax import data_iterator  # noqa: E402

SIZE = 16


@data_iterator(output_map=["images", "labels"], reader_name="Reader", devices=jax.devices(), auto_reset=True)
def loader(root, shard_id, num_shards):
    jpegs, labels = fn.readers.file(file_root=root, shard_id=shard_id, num_shards=num_shards, random_shuffle=True,
                                    pad_last_batch=True, name="Reader")
    images = fn.decoders.image(jpegs, output_type=types.GRAY)
    images = fn.resize(images, resize_x=SIZE, resize_y=SIZE)
    return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="HWC", mean=[128.0], std=[64.0]), labels


@functools.partial(jax.pmap, axis_name="devices")
def train_step(params, images, labels):
    def loss_fn(p):
        logits = images.reshape(images.shape[0], -1) @ p["w"] + p["b"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels, axis=1))

    loss, grads = jax.value_and_grad(loss_fn)(params)
    grads = jax.lax.pmean(grads, "devices")
    params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    return params, jax.lax.pmean(loss, "devices")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="ImageNet-style folder (default: scikit-learn's digits)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="global batch size")
    args = parser.parse_args()
    root = args.data or digits()
    num_classes = len([d for d in os.scandir(root) if d.is_dir()])
    devices = jax.devices()
    params = {"w": jnp.zeros((SIZE * SIZE, num_classes)), "b": jnp.zeros(num_classes)}
    params = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(devices),) + x.shape), params)  # one copy per device
    it = loader(root=root, batch_size=args.batch_size, num_threads=2, seed=0)
    for epoch in range(args.epochs):
        losses = []
        for batch in it:
            images, labels = batch["images"], batch["labels"]  # (devices, per-device batch, ...)
            assert images.shape[:2] == (len(devices), args.batch_size // len(devices))
            params, loss = train_step(params, images, labels)
            losses.append(float(loss[0]))
        print(f"epoch {epoch + 1}: {len(losses)} steps on {len(devices)} devices, "
              f"mean loss {sum(losses) / len(losses):.4f}")


if __name__ == "__main__":
    main()
