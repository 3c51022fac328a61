"""NVIDIA DALI (CPU-only): the same graph functions as jaxdali, through DALI's own API.

With JAX importable in DALI's environment, batches come from DALI's JAX plugin as sharded
``jax.Array``s (``DALIGenericIterator`` with the same ``NamedSharding`` as jaxdali), so the
comparison is iterator against iterator. DALI's ``data_iterator`` decorator cannot be used here:
with a sharding it builds GPU pipelines (``device_id`` = the JAX device id), which fail without
CUDA. Without JAX, or with ``--variant run``, batches come from ``pipe.run()`` (CPU TensorLists).

Run by ``run.py``: ``DALI_PYTHON benchmarks/bench_dali.py --pipeline train --data DIR``.
"""

from __future__ import annotations

import sys
import time

import harness


def main(argv: list[str] | None = None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    variant = "iterator"
    if "--variant" in argv:
        i = argv.index("--variant")
        variant = argv[i + 1]
        del argv[i:i + 2]
    if variant not in ("iterator", "run"):
        raise SystemExit(f"--variant must be 'iterator' or 'run', got {variant!r}")
    crop = "decoder"
    if "--crop" in argv:  # dali_api.CROPS
        i = argv.index("--crop")
        crop = argv[i + 1]
        del argv[i:i + 2]
    args = harness.parse_args(argv)

    jax = None
    if variant == "iterator":
        try:
            import jax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec
        except ImportError:
            variant = "run"
    import nvidia.dali
    from nvidia.dali import fn, pipeline_def, types

    if variant == "iterator":
        from nvidia.dali.plugin.jax import DALIGenericIterator

    import dali_api

    imported_at = time.time()
    versions = {"nvidia-dali": nvidia.dali.__version__}
    if jax is not None:
        versions["jax"] = jax.__version__
    versions["crop"] = crop
    graph = dali_api.graph(args.pipeline, fn, types, crop=crop)
    pipe = pipeline_def(graph, batch_size=args.batch_size, num_threads=args.threads, device_id=None,
                        seed=args.seed)(root=args.data)

    def make_iterator_loader():
        sharding = NamedSharding(Mesh(jax.devices(), ("batch",)), PartitionSpec("batch"))
        iterator = DALIGenericIterator([pipe], ["images", "labels"], reader_name="Reader", auto_reset=True,
                                       sharding=sharding)
        return harness.jax_images(iterator)

    def make_run_loader():
        pipe.build()
        return lambda: pipe.run()[0]

    if variant == "iterator":
        return harness.measure(args, imported_at, make_iterator_loader, system="dali", mode="jax DALIGenericIterator",
                               versions=versions)
    return harness.measure(args, imported_at, make_run_loader, system="dali", mode="pipe.run",
                           versions=versions, describe_first=lambda images: harness.describe(images.as_array()))


if __name__ == "__main__":
    main()
