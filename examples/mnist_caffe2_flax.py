"""DALI's JAX/Flax MNIST example on jaxdali: the data pipeline is DALI's, only the imports changed.

Data: DALI_extra's Caffe2 MNIST LMDBs when ``DALI_EXTRA_PATH`` is set (``db/MNIST/training`` and
``db/MNIST/testing``); otherwise the script writes two small Caffe2 LMDBs from scikit-learn's real
handwritten digits (28x28 PNGs in TensorProtos, the layout of DALI_extra's MNIST) into a temporary folder.

Run: python examples/mnist_caffe2_flax.py [--epochs 5]
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn
from flax.training import train_state

# The only change from the DALI example: these four imports.
from jaxdali import pipeline_def  # from nvidia.dali import pipeline_def
import jaxdali.fn as fn  # import nvidia.dali.fn as fn
import jaxdali.types as types  # import nvidia.dali.types as types
from jaxdali.plugin import jax as dax  # from nvidia.dali.plugin import jax as dax

batch_size = 200
image_size = 28
num_classes = 10


@pipeline_def(device_id=0, batch_size=batch_size, num_threads=4, seed=0)
def mnist_pipeline(data_path, random_shuffle):
    jpegs, labels = fn.readers.caffe2(
        path=data_path,
        random_shuffle=random_shuffle,
        name="mnist_caffe2_reader")
    images = fn.decoders.image(
        jpegs, device='mixed', output_type=types.GRAY)
    images = fn.crop_mirror_normalize(
        images, dtype=types.FLOAT, std=[255.], output_layout="CHW")
    images = fn.reshape(images, shape=[-1])  # Flatten the output image

    labels = labels.gpu()

    if random_shuffle:
        labels = fn.one_hot(labels, num_classes=num_classes)

    return images, labels


# -- data when DALI_extra is not at hand ----------------------------------------------------------------------

def write_digits_lmdbs(folder: str) -> tuple[str, str]:
    """Caffe2 LMDBs of scikit-learn's digits, upscaled to 28x28 PNGs: 1400 to train, 200 to test (whole
    batches of 200, as DALI_extra's 60000 and 10000 are)."""
    import lmdb
    from PIL import Image
    from sklearn.datasets import load_digits

    from jaxdali.ops.readers.caffe import encode_tensor, encode_tensor_protos

    digits = load_digits()
    paths = []
    for name, part in (("training", slice(0, 1400)), ("testing", slice(1400, 1600))):
        path = os.path.join(folder, name)
        env = lmdb.open(path, map_size=1 << 28)
        with env.begin(write=True) as txn:
            for i, (pixels, label) in enumerate(zip(digits.images[part], digits.target[part])):
                png = io.BytesIO()
                Image.fromarray((pixels * (255 / 16)).astype(np.uint8)).resize((28, 28), Image.BILINEAR).save(
                    png, format="PNG")
                value = encode_tensor_protos([encode_tensor(4, strings=[png.getvalue()]),  # STRING: encoded image
                                              encode_tensor(2, ints=[int(label)])])  # INT32: the label
                txn.put(f"{i:08d}".encode(), value)
        env.close()
        paths.append(path)
    return paths[0], paths[1]


# -- model and training (plain Flax) --------------------------------------------------------------------------

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        for width in (784, 1024, 1024):
            x = nn.relu(nn.Dense(width)(x))
        return nn.Dense(num_classes)(x)


@jax.jit
def train_step(state, batch):
    def loss(params):
        logits = state.apply_fn({"params": params}, batch["images"])
        return optax.softmax_cross_entropy(logits=logits, labels=batch["labels"]).mean()

    return state.apply_gradients(grads=jax.grad(loss)(state.params))


def accuracy(state, iterator) -> float:
    correct = 0
    for batch in iterator:
        logits = state.apply_fn({"params": state.params}, batch["images"])
        correct += int(jnp.sum(batch["labels"].ravel() == jnp.argmax(logits, axis=-1)))
    return correct / iterator.size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--learning-rate", type=float, default=0.02, help="DALI's example uses 0.1 on the 60000 MNIST digits")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        if "DALI_EXTRA_PATH" in os.environ:
            training_data_path = os.path.join(os.environ["DALI_EXTRA_PATH"], "db/MNIST/training/")
            validation_data_path = os.path.join(os.environ["DALI_EXTRA_PATH"], "db/MNIST/testing/")
        else:
            training_data_path, validation_data_path = write_digits_lmdbs(folder)

        training_pipeline = mnist_pipeline(data_path=training_data_path, random_shuffle=True)
        validation_pipeline = mnist_pipeline(data_path=validation_data_path, random_shuffle=False)
        training_iterator = dax.DALIGenericIterator(
            training_pipeline, output_map=["images", "labels"], reader_name="mnist_caffe2_reader", auto_reset=True)
        validation_iterator = dax.DALIGenericIterator(
            validation_pipeline, output_map=["images", "labels"], reader_name="mnist_caffe2_reader",
            auto_reset=True)
        print(f"{len(training_iterator)} training and {len(validation_iterator)} validation batches per epoch")

        model = MLP()
        params = model.init(jax.random.PRNGKey(0), jnp.ones([image_size * image_size]))["params"]
        state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(args.learning_rate, 0.9))
        for epoch in range(args.epochs):
            for batch in training_iterator:
                state = train_step(state, batch)
            print(f"epoch {epoch}: validation accuracy {accuracy(state, validation_iterator):.4f}")


if __name__ == "__main__":
    main()
