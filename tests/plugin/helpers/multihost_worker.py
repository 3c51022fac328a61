"""One process of the multi-host test: 4 local CPU devices, joined to the others on localhost.

Usage: python multihost_worker.py PROCESS_ID NUM_PROCESSES PORT FILE_DIR CKPT_DIR
Prints one JSON line with, per epoch, the jitted global sums of each batch and the masked totals;
after the first batch of the second epoch the loader state is saved with an Orbax CheckpointManager
(one file per process), and "resumed" holds the batches of an iterator restored from it.
It also records the error the pmap-style decorator (``devices=``) raises in a multi-process run (E28).
"""

import json
import os
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
process_id, num_processes, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
file_dir, ckpt_dir = sys.argv[4], sys.argv[5]
jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=num_processes,
                           process_id=process_id)

import jax.numpy as jnp  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

from jaxdali import fn, types  # noqa: E402
from jaxdali.plugin.jax import data_iterator  # noqa: E402
from jaxdali.plugin.jax.orbax import LoaderRestore, LoaderSave  # noqa: E402

files = sorted(os.path.join(file_dir, f) for f in os.listdir(file_dir))
labels = [(i * i) % 97 for i in range(len(files))]
sharding = NamedSharding(Mesh(jax.devices(), ("batch",)), PartitionSpec("batch"))


def read_labels(shard_id, num_shards):
    _, label = fn.readers.file(files=files, labels=labels, shard_id=shard_id, num_shards=num_shards,
                               pad_last_batch=True, name="Reader")
    # The cast runs in the device stage: each process runs it for its 4 pipelines as one program.
    return fn.cast(label, dtype=types.FLOAT)


@jax.jit
def reduce(label, mask):
    """Sum, row-position-weighted sum (sees which shard is in which row block), masked sum, count."""
    rows = label[:, 0]
    return jnp.sum(rows), jnp.sum(rows * jnp.arange(1, rows.shape[0] + 1)), jnp.sum(rows * mask), jnp.sum(mask)


def sums(it, batch) -> list[int]:
    label = batch["label"]
    # a global array over both processes' devices, of which this process holds its 4 row blocks
    assert label.shape == (16, 1) and label.sharding == sharding and not label.is_fully_addressable
    assert label.dtype == jnp.float32
    assert {s.device for s in label.addressable_shards} == set(jax.local_devices())
    return [int(v) for v in reduce(label, it.is_nonpadding)]


loader = data_iterator(read_labels, output_map=["label"], reader_name="Reader", sharding=sharding)
kwargs = dict(batch_size=16, prefetch_queue_depth=2, enable_checkpointing=True)
it = loader(**kwargs)
result = {"process": process_id, "devices": [d.id for d in jax.devices()], "epochs": []}
with ocp.CheckpointManager(ckpt_dir) as mngr:
    for epoch in range(2):
        batches = []
        for batch in it:
            batches.append(sums(it, batch))
            if epoch == 1 and len(batches) == 1:
                mngr.save(1, args=ocp.args.Composite(loader=LoaderSave(it)))
                mngr.wait_until_finished()
        result["epochs"].append(batches)
    resumed = mngr.restore(1, args=ocp.args.Composite(loader=LoaderRestore(loader, kwargs=kwargs))).loader
    result["resumed"] = [sums(resumed, batch) for batch in resumed]
try:
    data_iterator(read_labels, output_map=["label"], reader_name="Reader", devices=jax.devices())(batch_size=16)
    result["pmap_error"] = None
except RuntimeError as e:  # E28
    result["pmap_error"] = str(e)
print(json.dumps(result), flush=True)
jax.distributed.shutdown()
