"""Multi-host loading: 2 processes on localhost, 4 CPU devices each, joined by ``jax.distributed``.

Run without arguments, it starts both processes itself (as a cluster launcher would start one per
host). Each process builds pipelines for its own 4 devices only, reads its own shards, and the
iterator assembles *global* ``jax.Array``s over all 8 devices; a jitted step reduces them across the
processes. Both print the same global results: every image of the epoch counted once.

On a real cluster, drop the launcher: call ``jax.distributed.initialize()`` (it finds the
coordinator from the environment on TPU pods, SLURM, ...) and run the same loader code.

Run: python examples/multihost.py [--data DIR] [--epochs 2]
"""

import argparse
import os
import socket
import subprocess
import sys


def worker(process_id: int, port: int, root: str, epochs: int, batch_size: int) -> None:
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=process_id)

    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from jaxdali import fn, types
    from jaxdali.plugin.jax import data_iterator

    sharding = NamedSharding(Mesh(jax.devices(), ("batch",)), PartitionSpec("batch"))

    @data_iterator(output_map=["images", "labels"], reader_name="Reader", sharding=sharding)
    def loader(shard_id, num_shards):
        jpegs, labels = fn.readers.file(file_root=root, shard_id=shard_id, num_shards=num_shards,
                                        random_shuffle=True, pad_last_batch=True, name="Reader")
        images = fn.resize(fn.decoders.image(jpegs, output_type=types.GRAY), resize_x=16, resize_y=16)
        return images, labels

    @jax.jit
    def count(labels, mask):
        """Images per class in the global batch, padding excluded."""
        return jnp.sum(jax.nn.one_hot(labels[:, 0], 10, dtype=jnp.int32) * mask[:, None], axis=0)

    it = loader(batch_size=batch_size, num_threads=2, seed=0)
    for epoch in range(epochs):
        per_class = jnp.zeros(10, jnp.int32)
        for batch in it:
            images = batch["images"]  # global: (batch_size, 16, 16, 1) over 8 devices of 2 processes
            assert images.shape[0] == batch_size and not images.is_fully_addressable
            per_class = per_class + count(batch["labels"], it.is_nonpadding)
        it.reset()
        print(f"process {process_id}: epoch {epoch + 1}: {int(per_class.sum())} images, per class "
              f"{per_class.tolist()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="ImageNet-style folder with at most 10 classes "
                        "(default: scikit-learn's digits)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--process-id", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.process_id is not None:
        worker(args.process_id, args.port, args.data, args.epochs, args.batch_size)
        return
    if args.data is None:
        from jaxdali.datasets import digits

        args.data = digits()
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    command = [sys.executable, os.path.abspath(__file__), "--data", args.data, "--epochs", str(args.epochs),
               "--batch-size", str(args.batch_size), "--port", str(port)]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    procs = [subprocess.Popen(command + ["--process-id", str(p)], env=env) for p in range(2)]
    try:
        codes = [p.wait(timeout=600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    sys.exit(max(codes))


if __name__ == "__main__":
    main()
