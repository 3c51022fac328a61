"""The pipelines of one iterator that cannot form a group share one pipeline's host threads
(``share_host_threads``; groups: tests/pipeline/test_group.py)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxdali import fn, pipeline_def
from jaxdali.pipeline import pipeline as pipeline_module
from jaxdali.pipeline.executor import HostSlots
from jaxdali.plugin.jax import data_iterator

needs8 = pytest.mark.skipif(len(jax.devices()) < 8, reason="needs XLA_FLAGS=--xla_force_host_platform_device_count=8")


def test_host_slots_bound_the_holders_and_grant_in_arrival_order():
    slots = HostSlots(1)
    slots.acquire()
    order: list[int] = []

    def take(k: int) -> None:
        slots.acquire()
        order.append(k)
        slots.release()

    threads = []
    for k in range(3):
        t = threading.Thread(target=take, args=(k,))
        t.start()
        threads.append(t)
        while len(slots._waiters) < k + 1:  # k is queued before k + 1 starts
            time.sleep(0.001)
    assert order == []  # the only slot is held
    slots.release()
    for t in threads:
        t.join(5)
    assert order == [0, 1, 2]


def test_host_slots_refuse_zero():
    with pytest.raises(ValueError, match="at least one slot"):
        HostSlots(0)


class _CountingSlots(HostSlots):
    """HostSlots that record the most batches computed at once."""

    instances: list["_CountingSlots"] = []

    def __init__(self, slots: int):
        super().__init__(slots)
        self.slots, self.holders, self.most, self.grants = slots, 0, 0, 0
        self._count = threading.Lock()
        _CountingSlots.instances.append(self)

    def acquire(self) -> None:
        super().acquire()
        with self._count:
            self.holders += 1
            self.grants += 1
            self.most = max(self.most, self.holders)

    def release(self) -> None:
        with self._count:
            self.holders -= 1
        super().release()


@pipeline_def(batch_size=2, device_id=None)
def _random_shard(files, shard_id=0, num_shards=1):
    data, _ = fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards, random_shuffle=True,
                              name="Reader")
    return fn.pad(data, fill_value=shard_id), fn.random.uniform(range=(0.0, 1.0))


@needs8
def test_data_iterator_over_8_devices_shares_threads_and_keeps_each_shards_values(index_files, monkeypatch):
    monkeypatch.setattr(pipeline_module, "HostSlots", _CountingSlots)
    _CountingSlots.instances.clear()
    files = index_files(64)  # 8 per shard: 4 batches of 2
    sharding = NamedSharding(Mesh(jax.devices(), ("batch",)), P("batch"))

    # The pipelines' graphs differ (fill_value; every file has one byte, so nothing is padded): they
    # cannot form a group (jaxdali.pipeline.group) and share slots instead.
    @data_iterator(output_map=["data", "u"], reader_name="Reader", sharding=sharding)
    def loader(files, shard_id, num_shards):
        data, _ = fn.readers.file(files=files, shard_id=shard_id, num_shards=num_shards, random_shuffle=True,
                                  name="Reader")
        return fn.pad(data, fill_value=shard_id), fn.random.uniform(range=(0.0, 1.0))

    it = loader(files=files, batch_size=16, num_threads=2, seed=7)
    got = [(np.asarray(b["data"]).ravel(), np.asarray(b["u"]).ravel()) for b in (next(it) for _ in range(4))]
    (slots,) = _CountingSlots.instances
    assert slots.slots == 2 and 1 <= slots.most <= 2
    assert slots.grants >= 8 * 4  # every pipeline computed its batches under the shared slots

    # Each shard alone (its own pipeline, same seed and shard arguments) gives the same rows.
    alone = [_random_shard(files=files, shard_id=k, num_shards=8, seed=7) for k in range(8)]
    for step in range(4):
        outs = [pipe.run() for pipe in alone]
        data = np.concatenate([out[0].as_array().ravel() for out in outs])
        u = np.concatenate([out[1].as_array().ravel() for out in outs])
        np.testing.assert_array_equal(got[step][0], data)
        np.testing.assert_array_equal(got[step][1], u)
    for pipe in alone:
        pipe.close()
