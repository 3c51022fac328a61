"""Pipeline outputs as TensorLists: the DALI API on host (``TensorListCPU``) and device
(``TensorListGPU``) batches, dense and ragged, and the array / DLPack interop protocols.

Expected error texts marked "DALI 2.4" are DALI's own wording, which users match on.
"""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.tensors import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU

# DALI 2.4
AS_TENSOR_ERROR = ('Assert on "IsDenseTensor()" failed: The batch must be representable as a tensor - it must '
                   'have uniform shape and be allocated in contiguous memory.')
AS_ARRAY_ERROR = ('Assert on "tl.IsDenseTensor()" failed: Cannot produce a numpy array: the tensors in the list do '
                  'not all have the same shape. Pad or crop the samples to a common shape, or check '
                  'is_dense_tensor() beforehand.')

DENSE = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
RAGGED = [np.arange(20, dtype=np.int32).reshape(4, 5), np.arange(100, 112, dtype=np.int32).reshape(3, 4)]


def outputs(device_id=None, on_device=False):
    """One run of a pipeline with a dense (from one array) and a ragged (list of samples) output."""

    @pipeline_def(batch_size=2, num_threads=1, device_id=device_id, prefetch_queue_depth=1)
    def p():
        dense = fn.external_source(source=lambda: DENSE, layout="HW")
        ragged = fn.external_source(source=lambda: RAGGED, layout="AB")
        return (dense.gpu(), ragged.gpu()) if on_device else (dense, ragged)

    pipe = p()
    try:
        return pipe.run()
    finally:
        pipe.close()


@pytest.fixture(scope="module")
def cpu_outputs():
    return outputs()


@pytest.fixture(scope="module")
def gpu_outputs():
    return outputs(device_id=0, on_device=True)


# -- host batches ----------------------------------------------------------------------------------------

def test_dense_host_batch_api(cpu_outputs):
    tl = cpu_outputs[0]
    assert isinstance(tl, TensorListCPU)
    assert len(tl) == 2
    assert tl.shape() == [(3, 4), (3, 4)]
    assert tl.dtype == types.INT16
    assert tl.layout() == "HW"
    assert tl.is_dense_tensor()
    np.testing.assert_array_equal(tl.as_array(), DENSE)
    t = tl.as_tensor()
    assert isinstance(t, TensorCPU) and t.shape() == [2, 3, 4] and t.layout() == "HW"
    np.testing.assert_array_equal(t.as_array(), DENSE)
    assert tl.as_cpu() is tl
    assert tl.as_reshaped_tensor([6, 4]).shape() == [6, 4]


def test_samples_by_index_and_at(cpu_outputs):
    tl = cpu_outputs[1]
    first, last = tl[0], tl[-1]
    assert isinstance(first, TensorCPU)
    assert (first.shape(), last.shape()) == ([4, 5], [3, 4])  # a sample's shape is a list, as in DALI
    assert (first.dtype, first.layout()) == (types.INT32, "AB")
    np.testing.assert_array_equal(np.asarray(last), RAGGED[1])
    at = tl.at(1)
    assert isinstance(at, np.ndarray)
    np.testing.assert_array_equal(at, RAGGED[1])
    assert [t.shape() for t in tl] == [[4, 5], [3, 4]]
    for bad in (2, -3):
        with pytest.raises(IndexError, match=f"sample index {bad} out of range for a batch of 2"):
            tl[bad]


def test_ragged_host_batch_cannot_become_one_array(cpu_outputs):
    tl = cpu_outputs[1]
    assert not tl.is_dense_tensor()
    assert tl.shape() == [(4, 5), (3, 4)]
    with pytest.raises(RuntimeError) as info:
        tl.as_tensor()
    assert str(info.value) == AS_TENSOR_ERROR
    with pytest.raises(RuntimeError) as info:
        tl.as_array()
    assert str(info.value) == AS_ARRAY_ERROR
    with pytest.raises(RuntimeError, match="Cannot produce a numpy array"):
        np.asarray(tl)
    assert not hasattr(tl, "__array_interface__")
    with pytest.raises(RuntimeError, match="representable as a tensor"):
        tl.__dlpack__()


def test_samples_of_equal_shape_form_a_dense_batch():
    tl = TensorListCPU([np.zeros((2, 2), np.float32), np.ones((2, 2), np.float32)], "HW")
    assert tl.is_dense_tensor()
    np.testing.assert_array_equal(tl.as_array(), [np.zeros((2, 2)), np.ones((2, 2))])
    assert tl.as_tensor().shape() == [2, 2, 2]


def test_array_interface_of_batch_and_sample(cpu_outputs):
    tl = cpu_outputs[0]
    iface = tl.__array_interface__
    assert iface["shape"] == (2, 3, 4) and np.dtype(iface["typestr"]) == np.int16
    np.testing.assert_array_equal(np.asarray(tl), DENSE)
    sample = tl[1]
    assert sample.__array_interface__["shape"] == (3, 4)
    np.testing.assert_array_equal(np.asarray(sample), DENSE[1])
    np.testing.assert_array_equal(np.asarray(cpu_outputs[1][0]), RAGGED[0])


def test_array_interface_of_a_strided_view_stays_valid():
    # The interface is a raw pointer: it must point at memory the tensor keeps alive, not at a temporary
    # contiguous copy that is freed as soon as the property returns.
    base = np.arange(40, dtype=np.int64).reshape(8, 5)
    sample = np.asarray(TensorCPU(base[:, 1]))
    batch = np.asarray(TensorListCPU(base[:, ::2]))
    for _ in range(3):
        [np.full(8, -1, np.int64) for _ in range(200)]  # reuse freed memory if anything was freed
    assert sample.tolist() == base[:, 1].tolist()
    assert batch.tolist() == base[:, ::2].tolist()


def test_host_batch_converts_to_every_numpy_dtype():
    for dtype, dali in [(np.uint8, types.UINT8), (np.int64, types.INT64), (np.float16, types.FLOAT16),
                        (np.float64, types.FLOAT64), (np.bool_, types.BOOL)]:
        tl = TensorListCPU(np.zeros((2, 1), dtype))
        assert tl.dtype == dali and tl[0].dtype == dali and tl.np_dtype == np.dtype(dtype)



# -- ndim() ----------------------------------------------------------------------------------------------------
# In DALI 2.4 ``ndim`` is a method on TensorList* and Tensor*, not a property: ``tl.ndim()`` is the rank of
# each sample, ``tl[i].ndim()`` and ``tl.as_tensor().ndim()`` the rank of that tensor. The values below were
# checked against nvidia.dali 2.4 (CPU pipeline, device_id=None).

def _one_batch(batch):
    @pipeline_def(batch_size=max(len(batch), 1), num_threads=1, device_id=None, prefetch_queue_depth=1)
    def p():
        return fn.external_source(source=lambda: batch, batch=True)

    pipe = p()
    try:
        (tl,) = pipe.run()
    finally:
        pipe.close()
    return tl


def test_ndim_is_a_method_of_batches_and_tensors():
    dense = _one_batch([np.zeros((2, 3, 4), np.float32)] * 2)
    assert (dense.ndim(), dense[0].ndim(), dense[-1].ndim()) == (3, 3, 3)
    assert dense.as_tensor().ndim() == 4  # the sample axis counts in the tensor of the whole batch
    ragged = _one_batch([np.zeros((2, 3, 4), np.float32), np.zeros((5, 1, 2), np.float32)])
    assert not ragged.is_dense_tensor()
    assert (ragged.ndim(), ragged[0].ndim(), ragged[1].ndim()) == (3, 3, 3)
    scalars = _one_batch([np.array(1, np.int32), np.array(2, np.int32)])
    assert (scalars.ndim(), scalars[0].ndim(), scalars.as_tensor().ndim()) == (0, 0, 1)
    vectors = _one_batch([np.zeros(3, np.int32), np.zeros(1, np.int32)])
    assert (vectors.ndim(), vectors[1].ndim()) == (1, 1)
    assert (TensorCPU(np.zeros((2, 3))).ndim(), TensorCPU(np.array(5.0)).ndim()) == (2, 0)


def test_ndim_of_empty_batches():
    assert TensorListCPU([]).ndim() == 0
    assert TensorListCPU(np.zeros((0, 3, 4), np.float32)).ndim() == 2  # the array's sample rank, as in DALI
    assert TensorListCPU(np.zeros((0,), np.uint8)).ndim() == 0
    assert TensorListGPU([]).ndim() == 0


# -- DLPack ----------------------------------------------------------------------------------------------------

def test_dlpack_round_trip_with_numpy(cpu_outputs):
    tl = cpu_outputs[0]
    whole = np.from_dlpack(tl)
    np.testing.assert_array_equal(whole, DENSE)
    assert np.shares_memory(whole, tl.as_array())  # zero-copy
    np.testing.assert_array_equal(np.from_dlpack(tl[1]), DENSE[1])
    np.testing.assert_array_equal(np.from_dlpack(cpu_outputs[1][1]), RAGGED[1])
    assert tl.__dlpack_device__() == tl[0].__dlpack_device__()


def test_dlpack_round_trip_with_jax(cpu_outputs):
    import jax
    import jax.numpy as jnp

    tl = cpu_outputs[0]
    arr = jax.dlpack.from_dlpack(tl)
    assert isinstance(arr, jax.Array) and arr.dtype == jnp.int16 and arr.shape == (2, 3, 4)
    np.testing.assert_array_equal(np.asarray(arr), DENSE)
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(cpu_outputs[1][0])), RAGGED[0])


def test_dlpack_round_trip_with_torch(cpu_outputs):
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(cpu_outputs[0])
    assert t.dtype == torch.int16 and tuple(t.shape) == (2, 3, 4)
    np.testing.assert_array_equal(t.numpy(), DENSE)
    np.testing.assert_array_equal(torch.from_dlpack(cpu_outputs[1][1]).numpy(), RAGGED[1])


# -- device batches --------------------------------------------------------------------------------------------

def test_dense_device_batch_api(gpu_outputs):
    import jax

    tl = gpu_outputs[0]
    assert isinstance(tl, TensorListGPU)
    assert (len(tl), tl.shape(), tl.dtype, tl.layout()) == (2, [(3, 4), (3, 4)], types.INT16, "HW")
    assert tl.is_dense_tensor()
    t = tl.as_tensor()
    assert isinstance(t, TensorGPU) and t.shape() == [2, 3, 4] and t.layout() == "HW"
    assert isinstance(tl.jax_array(), jax.Array) and tl.jax_array().devices() == {jax.local_devices()[0]}
    sample = tl[1]
    assert isinstance(sample, TensorGPU) and sample.shape() == [3, 4] and sample.dtype == types.INT16
    np.testing.assert_array_equal(np.asarray(sample.jax_array()), DENSE[1])
    np.testing.assert_array_equal(np.asarray(tl.at(0)), DENSE[0])
    assert not hasattr(tl, "__array_interface__")  # host-only protocol, as in DALI


def test_device_batch_as_cpu_copies_to_the_host(gpu_outputs):
    host = gpu_outputs[0].as_cpu()
    assert isinstance(host, TensorListCPU) and host.layout() == "HW" and host.dtype == types.INT16
    np.testing.assert_array_equal(host.as_array(), DENSE)
    ragged = gpu_outputs[1].as_cpu()
    assert isinstance(ragged, TensorListCPU) and not ragged.is_dense_tensor() and ragged.layout() == "AB"
    assert [s.tolist() for s in ragged.samples()] == [r.tolist() for r in RAGGED]
    sample = gpu_outputs[1][0].as_cpu()
    assert isinstance(sample, TensorCPU) and sample.layout() == "AB"
    np.testing.assert_array_equal(sample.as_array(), RAGGED[0])


def test_ragged_device_batch(gpu_outputs):
    tl = gpu_outputs[1]
    assert isinstance(tl, TensorListGPU) and not tl.is_dense_tensor()
    assert tl.shape() == [(4, 5), (3, 4)]
    with pytest.raises(RuntimeError) as info:
        tl.as_tensor()
    assert str(info.value) == AS_TENSOR_ERROR
    with pytest.raises(RuntimeError, match="representable as a tensor"):
        tl.jax_array()


def test_ndim_of_device_batches_and_tensors(gpu_outputs):
    import jax.numpy as jnp

    dense, ragged = gpu_outputs
    assert (dense.ndim(), dense[1].ndim(), dense.as_tensor().ndim()) == (2, 2, 3)
    assert (ragged.ndim(), ragged[0].ndim(), ragged[1].ndim()) == (2, 2, 2)
    assert dense.as_cpu().ndim() == 2 and ragged[0].as_cpu().ndim() == 2
    assert TensorGPU(jnp.zeros((2, 3, 4))).ndim() == 3


def test_device_dlpack_round_trip_with_jax(gpu_outputs):
    import jax.numpy as jnp

    tl = gpu_outputs[0]
    arr = jnp.from_dlpack(tl)
    assert arr.dtype == jnp.int16 and arr.shape == (2, 3, 4)
    np.testing.assert_array_equal(np.asarray(arr), DENSE)
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(gpu_outputs[1][1])), RAGGED[1])
    assert tl.__dlpack_device__() == tl.jax_array().__dlpack_device__()


def test_source_info_is_carried_through_operators_and_to_the_device(flowers_root):
    """Each sample's source_info() follows it through decode, resize, arithmetic, .gpu() and device
    operators (first data input that has one); random numbers and external sources have none."""
    import numpy as np

    from jaxdali import fn, pipeline_def, types

    @pipeline_def(batch_size=3, num_threads=2, device_id=0, seed=1)
    def p():
        jpegs, _ = fn.readers.file(file_root=flowers_root, random_shuffle=True)
        flip = fn.random.coin_flip()
        images = fn.resize(fn.decoders.image(jpegs), resize_x=8, resize_y=8)
        side = fn.external_source(source=lambda: [np.zeros(2)] * 3)
        return (jpegs, images, flip, side, images * fn.cast(flip, dtype=types.UINT8),
                fn.crop_mirror_normalize(images.gpu(), mirror=flip, device="gpu"))

    pipe = p()
    jpegs, images, flip, side, product, normalised = pipe.run()
    names = [jpegs[i].source_info() for i in range(3)]
    assert all(n.count("/") == 1 and n.endswith(".jpg") for n in names), names
    for out in (images, product, normalised, normalised.as_cpu()):
        assert [out[i].source_info() for i in range(3)] == names
    assert [flip[i].source_info() for i in range(3)] == [""] * 3
    assert [side[i].source_info() for i in range(3)] == [""] * 3
