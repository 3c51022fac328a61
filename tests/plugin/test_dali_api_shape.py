"""What code written against DALI's module layout and docs relies on: ``jaxdali.backend``,
``plugin.jax.integration`` and iterator decorators that document the iterator's own arguments."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import pytest

import jaxdali
import jaxdali.plugin.jax as dax
from jaxdali.plugin.jax import DALIGenericIterator, data_iterator
from jaxdali.plugin.jax.clu import DALIGenericPeekableIterator, peekable_data_iterator


@pytest.mark.parametrize("module", ["jaxdali.backend", "jaxdali.backend_impl"])
def test_backend_names_the_tensor_classes(module):
    import importlib

    backend = importlib.import_module(module)
    assert (backend.TensorCPU, backend.TensorGPU, backend.TensorListCPU, backend.TensorListGPU) == (
        jaxdali.TensorCPU, jaxdali.TensorGPU, jaxdali.TensorListCPU, jaxdali.TensorListGPU)


def test_feed_ndarray_copies_a_backend_impl_tensor_into_a_torch_tensor():
    # What DALI's test_fw_iterators does with nvidia.dali.backend_impl.TensorCPU, for each dtype.
    torch = pytest.importorskip("torch")
    import numpy as np

    from jaxdali.backend_impl import TensorCPU
    from jaxdali.plugin.pytorch import feed_ndarray

    for dtype, torch_dtype in ((np.float32, torch.float32), (np.float16, torch.float16), (np.uint8, torch.uint8),
                               (np.bool_, torch.bool), (np.int64, torch.int64)):
        arr = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
        out = torch.empty(arr.shape, dtype=torch_dtype)
        feed_ndarray(TensorCPU(arr, "NHWC"), out)
        np.testing.assert_array_equal(out.numpy(), arr)


def test_integration_names_the_device_of_an_array():
    array = jax.device_put(jnp.arange(3), jax.devices()[-1])
    assert dax.integration._jax_device(array) == jax.devices()[-1]


def test_integration_refuses_an_array_on_several_devices():
    if len(jax.devices()) < 2:
        pytest.skip("needs two JAX devices")
    mesh = jax.sharding.Mesh(jax.devices()[:2], ("d",))
    spread = jax.device_put(jnp.arange(4), jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d")))
    with pytest.raises(ValueError, match="lives on 2 devices"):
        dax.integration._jax_device(spread)


def _section(doc: str, start: str, stop: str | None) -> str:
    after = doc.split(start, 1)[1]
    return after.split(stop, 1)[0] if stop else after


@pytest.mark.parametrize("decorator, iterator", [(data_iterator, DALIGenericIterator),
                                                 (peekable_data_iterator, DALIGenericPeekableIterator)])
def test_decorator_documents_the_iterator_arguments_in_the_same_words(decorator, iterator):
    decorator_args = inspect.getfullargspec(decorator).args
    iterator_args = inspect.getfullargspec(iterator.__init__).args
    assert [a for a in decorator_args if a not in ("pipeline_fn", "devices")] == iterator_args[2:]
    # From the first mention of output_map to the first of sharding, word for word.
    assert (_section(inspect.getdoc(decorator), "output_map", "sharding")
            == _section(inspect.getdoc(iterator), "output_map", "sharding"))


def test_peekable_iterator_documents_the_plain_iterator_arguments():
    assert (_section(inspect.getdoc(DALIGenericPeekableIterator), "output_map", None)
            == _section(inspect.getdoc(DALIGenericIterator), "output_map", None))
    assert "peek()" in inspect.getdoc(DALIGenericPeekableIterator)
