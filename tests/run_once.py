"""One batch of a test pipeline: the shared body of the test modules' ``run`` helpers."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from jaxdali import fn, pipeline_def


def run_once(make: Callable[[], Any], *, batch_size: int, device_id: int | None = None, num_threads: int = 1,
             seed: int = 7, **pipeline_kwargs: Any) -> tuple[list[list[np.ndarray]], list[str]]:
    """Builds ``make()`` (a node, or a tuple or list of nodes) as a pipeline, runs one batch and closes
    the pipeline; returns each output as a list of NumPy samples, and each output's layout."""

    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=device_id, seed=seed, **pipeline_kwargs)
    def pipe():
        out = make()
        return tuple(out) if isinstance(out, (list, tuple)) else out

    p = pipe()
    try:
        outs = p.run()
    finally:
        p.close()
    return [[np.asarray(o.as_cpu().at(i)) for i in range(len(o))] for o in outs], [o.layout() for o in outs]


def fed(inputs: list, layout: str = "HWC"):
    """An external source that returns ``inputs`` as its batch."""
    return fn.external_source(source=lambda: inputs, layout=layout)
