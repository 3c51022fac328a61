"""jaxdali: ``@data_iterator`` delivering sharded ``jax.Array``s, or plain ``Pipeline.run()``.

Run by ``run.py`` in a fresh process per repetition:
``python benchmarks/bench_jaxdali.py --pipeline train --data DIR [--variant run] [--form FORM] [--layout HWC]
[--source files] [--explicit-interp] [--crop random_resized_crop]``.
The ``run`` variant also reports the per-operator time breakdown (``executor_statistics()``). The
iterator variant's ``--form`` is how the user writes it: ``data_iterator`` (default) over all of
``jax.devices()`` (run.py sets ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` for the
8-device rows), the same pmap-style (``data_iterator-devices``: ``devices=jax.devices()``, a leading
device axis), or ``DALIGenericIterator`` over a pipeline left unbuilt (``generic``) or built first
(``generic-built``), with the same sharding over one device, or the PyTorch adapter's
``DALIGenericIterator`` (``torch``: host outputs as torch tensors). ``--layout``, ``--source``,
``--explicit-interp`` and ``--crop`` pick the equivalent ways of writing the graph (``dali_api.graph``).
``--process-id``/``--num-processes``/``--coordinator`` make it one process of a multi-process run
(``jax.distributed`` over gloo; started by ``bench_multiprocess.py``): the sharding then spans every
process's devices and ``versions["local_devices"]`` says which part of each global batch is this one's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import harness

FORMS = ("data_iterator", "data_iterator-devices", "generic", "generic-built", "torch")


def parse_form(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The jaxdali-only options, and the rest of ``argv`` for ``harness.parse_args``."""
    import dali_api

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--variant", choices=("iterator", "run"), default="iterator")
    parser.add_argument("--form", choices=FORMS, default="data_iterator")
    parser.add_argument("--layout", choices=("CHW", "HWC"), default="CHW")
    parser.add_argument("--source", choices=dali_api.SOURCES, default="file_root")
    parser.add_argument("--explicit-interp", action="store_true")
    parser.add_argument("--crop", choices=dali_api.CROPS, default="decoder")
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--num-processes", type=int, default=1)
    parser.add_argument("--coordinator", default=None, help="host:port of process 0 (multi-process runs)")
    return parser.parse_known_args(argv)


def iterator_loader(form: str, graph: Any, args: harness.ChildArgs, devices: list) -> Callable[[], Any]:
    """``next_batch()`` (the images, ready) of the JAX iterator ``form`` (one of ``FORMS`` but torch) for the
    pipeline ``graph`` over ``devices``; the ``DALIGenericIterator`` forms use the first device only."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from jaxdali import pipeline_def
    from jaxdali.plugin.jax import DALIGenericIterator, data_iterator

    settings = dict(root=args.data, batch_size=args.batch_size, num_threads=args.threads, seed=args.seed)
    if form == "data_iterator":
        iterator = data_iterator(graph, output_map=["images", "labels"], reader_name="Reader", auto_reset=True,
                                 sharding=NamedSharding(Mesh(devices, ("batch",)), PartitionSpec("batch")))(**settings)
    elif form == "data_iterator-devices":
        iterator = data_iterator(graph, output_map=["images", "labels"], reader_name="Reader", auto_reset=True,
                                 devices=devices)(**settings)
    elif form in ("generic", "generic-built"):
        root = settings.pop("root")
        generic_pipe = pipeline_def(graph, **settings)(root=root)
        if form == "generic-built":
            generic_pipe.build()
        iterator = DALIGenericIterator(generic_pipe, ["images", "labels"], reader_name="Reader", auto_reset=True,
                                       sharding=NamedSharding(Mesh(devices[:1], ("batch",)), PartitionSpec("batch")))
    else:
        raise ValueError(f"form must be one of {FORMS[:-1]}, got {form!r}")
    return harness.jax_images(iterator)


def main(argv: list[str] | None = None) -> dict:
    form, rest = parse_form(list(sys.argv[1:] if argv is None else argv))
    args = harness.parse_args(rest)

    import dali_api
    import jax

    if form.num_processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=form.coordinator, num_processes=form.num_processes,
                                   process_id=form.process_id)
    import jaxdali
    from jaxdali import fn, pipeline_def, types

    if form.form == "torch":  # torch's import counts as import time, as the PyTorch row's does
        from jaxdali.plugin.pytorch import DALIGenericIterator as TorchIterator
    imported_at = time.time()
    versions = {"jaxdali": getattr(jaxdali, "__version__", "?"), "jax": jax.__version__,
                "jaxdali_path": os.path.dirname(jaxdali.__file__), "devices": len(jax.devices()),
                "local_devices": len(jax.local_devices()), "processes": form.num_processes,
                "form": form.form, "layout": form.layout, "source": form.source,
                "explicit_interp": form.explicit_interp, "crop": form.crop}
    graph = dali_api.graph(args.pipeline, fn, types, form.layout, form.source, form.explicit_interp, form.crop)
    pipe = None

    def make_iterator_loader():
        if form.form == "torch":
            torch_pipe = pipeline_def(graph, batch_size=args.batch_size, num_threads=args.threads, device_id=None,
                                      seed=args.seed)(root=args.data)
            next_torch = harness.endless(lambda: TorchIterator(torch_pipe, ["images", "labels"], reader_name="Reader",
                                                               auto_reset=True))
            return lambda: next_torch()[0]["images"]
        return iterator_loader(form.form, graph, args, jax.devices())

    def make_run_loader():
        nonlocal pipe
        pipe = pipeline_def(graph, batch_size=args.batch_size, num_threads=args.threads, device_id=None,
                            seed=args.seed)(root=args.data)
        pipe.build()
        return lambda: pipe.run()[0]

    if form.variant == "iterator":
        mode = form.form if form.form.startswith("data_iterator") or form.form == "torch" else \
            f"DALIGenericIterator ({form.form})"
        # pmap-style batches have a leading device axis: described as the global batch they hold.
        return harness.measure(args, imported_at, make_iterator_loader, system="jaxdali", mode=mode,
                               versions=versions, describe_first=lambda images: harness.describe(
                                   images.reshape((-1,) + images.shape[2:]) if images.ndim == 5 else images))
    return harness.measure(args, imported_at, make_run_loader, system="jaxdali-run", mode="Pipeline.run",
                           versions=versions, op_seconds=lambda: pipe.executor_statistics(),
                           describe_first=lambda images: harness.describe(images.as_array()))


if __name__ == "__main__":
    main()
