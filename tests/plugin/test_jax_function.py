"""jaxdali.plugin.jax.fn.jax_function: a JAX function on whole batches as a pipeline operator, on the
device (fused into the device program), on the host, without outputs, with a sharding, and inside
data_iterator."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import jaxdali.plugin.jax as dax
from jaxdali import fn, pipeline_def, types
from jaxdali.plugin.jax import data_iterator
from jaxdali.plugin.jax.fn import jax_function


def flip_horizontal(images):
    return images[:, :, ::-1, :]


flip_on_device = jax_function(flip_horizontal)  # placement follows the inputs
flip_on_host = jax_function(flip_horizontal, device="cpu")


@jax_function(num_outputs=2, output_layouts=["HWC", ""])
@jax.jit
@jax.vmap
def doubled_and_total(image):
    return image * 2, jnp.sum(image.astype(jnp.float32))


def _images(flowers_root, size=(12, 16)):
    jpegs, labels = fn.readers.file(file_root=flowers_root, name="Reader")
    return fn.resize(fn.decoders.image(jpegs, output_type=types.RGB), resize_y=size[0], resize_x=size[1]), labels


def test_dax_fn_is_the_plugin_namespace():
    assert dax.fn.jax_function is jax_function


def test_on_the_device_and_on_the_host_the_function_sees_whole_batches(flowers_root):
    @pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=0)
    def pipe():
        images, _ = _images(flowers_root)
        return images, flip_on_device(images.gpu()), flip_on_host(images), \
            *doubled_and_total(images)

    p = pipe()
    for _ in range(2):
        images, on_device, on_host, doubled, total = p.run()
        ref = images.as_array()
        assert type(on_device).__name__ == "TensorListGPU" and type(on_host).__name__ == "TensorListCPU"
        np.testing.assert_array_equal(on_device.as_cpu().as_array(), ref[:, :, ::-1])
        np.testing.assert_array_equal(on_host.as_array(), ref[:, :, ::-1])
        np.testing.assert_array_equal(doubled.as_array(), ref * 2)  # uint8 wraps as in JAX
        np.testing.assert_allclose(total.as_array(), ref.reshape(4, -1).astype(np.float32).sum(1), rtol=1e-6)
        assert (on_device.layout(), on_host.layout(), doubled.layout(), total.layout()) == ("HWC", "HWC", "HWC", "")
        assert on_device[0].source_info() == images[0].source_info() != ""


def test_fused_with_other_device_operators_inside_data_iterator(flowers_root):
    @jax_function
    def brighten(x):
        return jnp.clip(x.astype(jnp.int32) + 10, 0, 255).astype(jnp.uint8)

    def graph(shard_id=0, num_shards=1):
        images, labels = _images(flowers_root)
        out = fn.crop_mirror_normalize(brighten(images.gpu()), dtype=types.FLOAT, output_layout="CHW",
                                       mean=[1.0, 2.0, 3.0], std=[2.0, 2.0, 2.0], device="gpu")
        return out, images, labels

    sharding = NamedSharding(Mesh(jax.devices()[:1], ("batch",)), PartitionSpec("batch"))
    it = data_iterator(graph, output_map=["out", "images", "labels"], reader_name="Reader", sharding=sharding)(
        batch_size=5, num_threads=2, seed=0)
    batch = next(it)
    images = np.asarray(batch["images"]).astype(np.float32)
    expected = (np.clip(images + 10, 0, 255) - [1.0, 2.0, 3.0]) / 2.0
    np.testing.assert_allclose(np.asarray(batch["out"]), expected.transpose(0, 3, 1, 2), rtol=1e-6)
    assert batch["out"].sharding == sharding


def test_without_outputs_it_runs_once_per_batch(flowers_root):
    seen = []

    @jax_function(num_outputs=0)
    def record(labels):
        seen.append(np.asarray(labels).ravel().tolist())

    @pipeline_def(batch_size=3, num_threads=1, device_id=0, prefetch_queue_depth=1)
    def pipe():
        _, labels = _images(flowers_root)
        assert record(labels) is None
        return labels

    p = pipe()
    outs = [p.run()[0].as_array().ravel().tolist() for _ in range(3)]
    assert seen == outs


def test_with_a_one_device_sharding_the_function_gets_global_arrays(flowers_root):
    sharding = NamedSharding(Mesh(jax.devices()[:1], ("batch",)), PartitionSpec("batch"))
    seen = []

    @jax_function(sharding=sharding)
    def negate(x):
        seen.append((type(x).__name__, x.sharding))
        return -x.astype(jnp.int16)

    @pipeline_def(batch_size=2, num_threads=1, device_id=0)
    def pipe():
        images, _ = _images(flowers_root)
        return images, negate(images)

    images, negated = pipe().run()
    np.testing.assert_array_equal(negated.as_array(), -images.as_array().astype(np.int16))
    assert seen[0] == ("ArrayImpl", sharding)


def test_errors_name_the_function(flowers_root):
    @jax_function(num_outputs=2)
    def one_output(x):
        return x

    @jax_function
    def drops_the_batch_axis(x):
        return x[0]

    # DALI's words (its tests match them), with the function named; RuntimeError as in DALI.
    for function, match in [(one_output, r"jax_function\('one_output'\): the function was expected to return "
                                         r"\(a tuple of\) `num_outputs=2` outputs, but returned 1"),
                            (drops_the_batch_axis, r"'drops_the_batch_axis'\): .*leftmost dimension should match "
                                                   r"the current batch size of 2, but the output at index 0 has "
                                                   r"shape of \d+ x \d+")]:
        @pipeline_def(batch_size=2, num_threads=1, device_id=0)
        def pipe():
            images, _ = _images(flowers_root)
            return function(images.gpu())

        with pytest.raises(RuntimeError, match=match):
            pipe().run()

    @pipeline_def(batch_size=2, num_threads=1, device_id=0)
    def ragged():
        jpegs, _ = fn.readers.file(file_root=flowers_root)
        return flip_on_host(fn.decoders.image(jpegs))

    with pytest.raises(RuntimeError, match=r"'flip_horizontal'\): inputs must be batches of uniform shape.*The "
                                           r"input at index 0 is a batch of samples with different shapes"):
        ragged().run()
