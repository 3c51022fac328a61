"""Runs one graph through real NVIDIA DALI (CPU) and through jaxdali, for the differential tests.

``run_both(body, feeds)`` builds the same pipeline in both libraries: each feed (a list of per-sample
NumPy arrays, or a ``(samples, layout)`` pair) becomes an ``external_source``, and
``body(fn, types, *sources)`` returns the node or nodes to compare. The result holds, per library, a
list of outputs, each a list of per-sample NumPy arrays.
"""

from __future__ import annotations

import pathlib
from typing import Any, Callable, Sequence

import numpy as np

import jaxdali
from jaxdali import fn as jax_fn
from jaxdali import types as jax_types

PHOTOS = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "data" / "flowers"


def photos(count: int = 4, size: tuple[int, int] | None = (48, 64)) -> list[np.ndarray]:
    """``count`` real photos, RGB uint8 HWC; resized to ``size`` (h, w) or full size when None."""
    import cv2

    out = []
    for path in sorted(PHOTOS.rglob("*.jpg"))[:count]:
        image = cv2.cvtColor(cv2.imread(str(path)), cv2.COLOR_BGR2RGB)
        if size is not None:
            image = cv2.resize(image, (size[1], size[0]), interpolation=cv2.INTER_AREA)
        out.append(np.ascontiguousarray(image))
    return out


def _pipeline(lib: str, body: Callable, feeds: Sequence[Any], seed: int, num_threads: int):
    if lib == "dali":
        import nvidia.dali as dali
        from nvidia.dali import fn, types
        pipeline_def = dali.pipeline_def
    else:
        fn, types, pipeline_def = jax_fn, jax_types, jaxdali.pipeline_def
    batches = [f if isinstance(f, tuple) else (f, None) for f in feeds]
    batch_size = len(batches[0][0])

    def feed(samples):  # no parameters: DALI would pass the iteration to a callable that takes one
        return lambda: samples

    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=None, seed=seed)
    def graph():
        sources = [fn.external_source(source=feed(samples), batch=True, layout=layout)
                   if layout else fn.external_source(source=feed(samples), batch=True)
                   for samples, layout in batches]
        out = body(fn, types, *sources)
        return tuple(out) if isinstance(out, (list, tuple)) else out

    pipe = graph()
    pipe.build()
    return pipe


class Output(list):
    """One output's samples over the batches run, and its layout."""

    layout: str = ""


def run(lib: str, body: Callable, feeds: Sequence[Any], *, seed: int = 7, num_threads: int = 2,
        iterations: int = 1) -> list[Output]:
    """The outputs of ``iterations`` batches of ``lib``'s pipeline: per output, the samples of every batch."""
    pipe = _pipeline(lib, body, feeds, seed, num_threads)
    outputs: list[Output] = []
    for _ in range(iterations):
        result = pipe.run()
        if not outputs:
            outputs = [Output() for _ in result]
        for k, tl in enumerate(result):
            outputs[k] += [np.array(tl.at(i)) for i in range(len(tl))]
            outputs[k].layout = tl.layout()
    return outputs


def run_both(body: Callable, feeds: Sequence[Any], **kwargs) -> tuple[list, list]:
    """(jaxdali outputs, DALI outputs) of the same graph over the same feeds."""
    return run("jaxdali", body, feeds, **kwargs), run("dali", body, feeds, **kwargs)


def assert_same(ours: list, theirs: list, atol: float = 0.0, what: str = "") -> None:
    """Same number of outputs and samples, same layouts, shapes and dtypes, values within ``atol`` (exact
    when 0)."""
    assert len(ours) == len(theirs), what
    for k, (a_out, b_out) in enumerate(zip(ours, theirs)):
        assert len(a_out) == len(b_out), (what, k)
        assert getattr(a_out, "layout", "") == getattr(b_out, "layout", ""), (what, k, a_out.layout, b_out.layout)
        for i, (a, b) in enumerate(zip(a_out, b_out)):
            where = f"{what} output {k} sample {i}"
            assert a.shape == b.shape, (where, a.shape, b.shape)
            assert a.dtype == b.dtype, (where, a.dtype, b.dtype)
            if atol == 0:
                np.testing.assert_array_equal(a, b, err_msg=where)
            else:
                np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=atol, rtol=0,
                                           err_msg=where)
