"""A pipeline written for a GPU (``device="mixed"`` decoders, ``device="gpu"`` operators) on a machine whose
JAX device is a CPU: its operators run as host operators (``RunPlan.on_host``), with the host's fusions, and
give the values and the output types they give when their JAX implementations run there."""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import config, fn, pipeline_def, types
from jaxdali.tensors import TensorListCPU, TensorListGPU


def graph(root: str, device: str):
    """``device``: "cpu" (all on the host), "gpu" (a mixed decoder, gpu operators after it), or "to_gpu" (a
    host decoder, then ``.gpu()``)."""
    jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="Reader")
    images = fn.decoders.image(jpegs, device="mixed" if device == "gpu" else "cpu", output_type=types.RGB)
    if device == "to_gpu":
        images = images.gpu()
    images = fn.resize(images, resize_shorter=64)
    images = fn.crop_mirror_normalize(images, crop=(56, 56), dtype=types.FLOAT, mean=[120.0] * 3, std=[60.0] * 3,
                                      mirror=fn.random.coin_flip())
    return images, labels


def run(root: str, device: str, batches: int = 2):
    """The outputs of ``batches`` iterations, their types, and the plan of the pipeline."""
    pipe = pipeline_def(graph, batch_size=6, num_threads=2, device_id=0, seed=3)(root, device)
    pipe.build()
    try:
        outs = [pipe.run() for _ in range(batches)]
        return ([[np.asarray(o.as_cpu().as_array()) for o in out] for out in outs], [type(o) for o in outs[0]],
                pipe._runner.plan)
    finally:
        pipe.close()


@pytest.mark.parametrize("device", ["gpu", "to_gpu"])
def test_gpu_ops_run_on_the_host_fused_and_deliver_device_batches(device, flowers_root):
    values, kinds, plan = run(flowers_root, device)
    reference, reference_kinds, _ = run(flowers_root, "cpu")
    assert kinds == [TensorListGPU, TensorListCPU] and reference_kinds == [TensorListCPU, TensorListCPU]
    assert {id(node) for node, _ in plan.steps} == plan.on_host
    names = {id(node): node.schema.name for node, _ in plan.steps}
    assert [names[i] for i in plan.fed] == ["decoders.image"]
    assert [names[i] for i in plan.windowed] == ["resize"]
    for a, b in zip(values, reference, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


def test_the_jax_implementations_give_the_same_values(flowers_root, gpu_ops_as_jax):
    values, kinds, plan = run(flowers_root, "gpu")
    assert config.get("gpu_ops_on_cpu_device") == "jax"
    assert kinds == [TensorListGPU, TensorListCPU]
    assert not plan.fed and all(node.device == "cpu" for node, _ in plan.steps if id(node) in plan.on_host)
    reference, _, _ = run(flowers_root, "cpu")
    for a, b in zip(values, reference, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("value", ["host", "jax"])
def test_the_option_is_read_when_the_pipeline_is_built(value, flowers_root):
    saved = config.get("gpu_ops_on_cpu_device")
    config.update("gpu_ops_on_cpu_device", value)
    try:
        _, _, plan = run(flowers_root, "gpu", batches=1)
    finally:
        config.update("gpu_ops_on_cpu_device", saved)
    assert bool(plan.fed) == (value == "host")
