"""``core.buffers``: large operator outputs reuse released memory, never memory still in use."""

from __future__ import annotations

import gc

import numpy as np

import jaxdali.fn as fn
from jaxdali import pipeline_def, types
from jaxdali.core import buffers

LARGE = (buffers.POOL_MIN_BYTES // 4 + 1024,)  # float32 elements: above the pooling threshold


def test_a_released_buffer_is_reused_only_after_its_last_view_is_gone():
    a = buffers.owned_empty(LARGE, np.float32)
    address = a.ctypes.data
    view = a[10:]
    del a
    gc.collect()
    b = buffers.owned_empty(LARGE, np.float32)
    assert b.ctypes.data != address  # the view still uses the first buffer
    del view
    c = buffers.owned_empty(LARGE, np.float32)
    assert c.ctypes.data == address and c.ctypes.data % 64 == 0 and buffers.is_owned(c)
    del b, c


def test_memory_that_jax_aliases_is_not_reused():
    import jax

    a = buffers.owned_empty(LARGE, np.float32)
    a[:] = 1.0
    placed = jax.device_put(a, jax.devices("cpu")[0], may_alias=True)
    del a
    gc.collect()
    b = buffers.owned_empty(LARGE, np.float32)
    b[:] = 7.0
    assert float(placed.sum()) == LARGE[0]


def test_free_buffers_beyond_the_limit_are_dropped_oldest_first(monkeypatch):
    for name, empty in (("_RELEASED", type(buffers._RELEASED)()), ("_FREE", {}), ("_free_bytes", 0)):
        monkeypatch.setattr(buffers, name, empty)
    monkeypatch.setattr(buffers, "POOL_LIMIT_BYTES", buffers.POOL_MIN_BYTES * 5 // 2)
    first, second = (buffers.owned_empty((buffers.POOL_MIN_BYTES * k,), np.uint8) for k in (1, 2))
    second_address = second.ctypes.data
    del first, second  # released in that order: both do not fit, the first is dropped
    assert buffers.POOL_MIN_BYTES * 2 < buffers._free_bytes <= buffers.POOL_LIMIT_BYTES
    again = buffers.owned_empty((buffers.POOL_MIN_BYTES * 2,), np.uint8)
    assert again.ctypes.data == second_address and buffers._free_bytes == 0



def test_a_free_buffer_not_reused_soon_is_freed(monkeypatch):
    for name, empty in (("_RELEASED", type(buffers._RELEASED)()), ("_FREE", {}), ("_free_bytes", 0)):
        monkeypatch.setattr(buffers, name, empty)
    monkeypatch.setattr(buffers, "POOL_MAX_AGE", 3)
    released = buffers.owned_empty((buffers.POOL_MIN_BYTES,), np.uint8)
    del released
    others = [buffers.owned_empty((buffers.POOL_MIN_BYTES * 2,), np.uint8) for _ in range(3)]
    assert buffers._free_bytes > 0  # not too old yet
    others.append(buffers.owned_empty((buffers.POOL_MIN_BYTES * 2,), np.uint8))
    assert buffers._free_bytes == 0 and not buffers._RELEASED

def test_small_buffers_are_not_pooled():
    a = buffers.owned_empty((16, 3), np.float32)
    assert a.ctypes.data % 64 == 0 and buffers.is_owned(a) and a.base.flags.owndata


def test_outputs_kept_by_the_caller_keep_their_values_across_batches():
    batches = [np.full((4, 300, 400, 3), k, np.uint8) for k in range(4)]

    @pipeline_def(batch_size=4, num_threads=2, device_id=None)
    def pipe():
        return fn.cast(fn.external_source(source=iter(batches), batch=True, layout="HWC"), dtype=types.FLOAT)

    p = pipe()
    kept = [p.run()[0] for _ in range(3)]
    assert [float(np.asarray(out.as_tensor()).mean()) for out in kept] == [0.0, 1.0, 2.0]
    p.close()


def test_row_blocks_of_an_owned_buffer_are_owned_views():
    whole = buffers.owned_empty((10, 3), np.uint8)
    whole[:] = np.arange(10)[:, None]
    parts = buffers.owned_rows(whole, [4, 0, 6])
    assert [p.shape for p in parts] == [(4, 3), (0, 3), (6, 3)]
    assert all(buffers.is_owned(p) and np.shares_memory(p, whole) for p in (parts[0], parts[2]))
    assert parts[2][0, 0] == 4
    plain = np.zeros((10, 3), np.uint8)
    assert not any(buffers.is_owned(p) for p in buffers.owned_rows(plain, [5, 5]))  # views of a buffer nobody owns
