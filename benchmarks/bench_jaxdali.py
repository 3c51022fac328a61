"""jaxdali: ``@data_iterator`` delivering sharded ``jax.Array``s, or plain ``Pipeline.run()``.

Run by ``run.py`` in a fresh process per repetition:
``python benchmarks/bench_jaxdali.py --pipeline train --data DIR [--variant run]``.
The ``run`` variant also reports the per-operator time breakdown (``executor_statistics()``).
"""

from __future__ import annotations

import os
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
    args = harness.parse_args(argv)

    import dali_api
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import jaxdali
    from jaxdali import fn, pipeline_def, types
    from jaxdali.plugin.jax import data_iterator

    imported_at = time.time()
    versions = {"jaxdali": getattr(jaxdali, "__version__", "?"), "jax": jax.__version__,
                "jaxdali_path": os.path.dirname(jaxdali.__file__)}
    graph = dali_api.graph(args.pipeline, fn, types)
    pipe = None

    def make_iterator_loader():
        sharding = NamedSharding(Mesh(jax.devices(), ("batch",)), PartitionSpec("batch"))
        loader = data_iterator(graph, output_map=["images", "labels"], reader_name="Reader", auto_reset=True,
                               sharding=sharding)
        iterator = loader(root=args.data, batch_size=args.batch_size, num_threads=args.threads, seed=args.seed)
        next_raw = harness.endless(lambda: iterator)

        def next_batch():
            batch = next_raw()
            jax.block_until_ready(batch)
            return batch["images"]

        return next_batch

    def make_run_loader():
        nonlocal pipe
        pipe = pipeline_def(graph, batch_size=args.batch_size, num_threads=args.threads, device_id=None,
                            seed=args.seed)(root=args.data)
        pipe.build()
        return lambda: pipe.run()[0]

    if variant == "iterator":
        return harness.measure(args, imported_at, make_iterator_loader, system="jaxdali", mode="data_iterator",
                               versions=versions)
    return harness.measure(args, imported_at, make_run_loader, system="jaxdali-run", mode="Pipeline.run",
                           versions=versions, op_seconds=lambda: pipe.executor_statistics(),
                           describe_first=lambda images: harness.describe(images.as_array()))


if __name__ == "__main__":
    main()
