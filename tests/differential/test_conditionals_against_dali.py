"""Conditionals (enable_conditionals=True) against real DALI: the same pipeline functions, the same outputs."""

from __future__ import annotations

import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")

import jaxdali  # noqa: E402

COVERED_OPERATORS = ()  # conditionals add only hidden operators (_conditional.split/merge)


def index(info):
    return np.array(info.idx_in_batch, np.int32)


def if_elif_else(fn, types, x):
    if x < 2:
        y = x
    elif x < 4:
        y = x * 10
    else:
        y = x * 100
    return y


def no_else_and_python_values(fn, types, x):
    y, scale = x, 1
    if x % 2 == 0:
        y, scale = x * 10, 3
    return y, x * scale


def logical_and_nested(fn, types, x):
    f = fn.cast(x, dtype=types.FLOAT)
    if x > 0 and x < 5:
        if f > 2.5:
            y = f * 0.5
        else:
            y = f + 0.25
    else:
        y = f - 1
    return y, not (x < 3), x < 1 or x > 4


def helper_called(fn, types, x):
    return if_elif_else(fn, types, x) + 1


@pytest.mark.parametrize("body", [if_elif_else, no_else_and_python_values, logical_and_nested, helper_called])
def test_same_outputs_as_dali(body):
    results = []
    for lib in (dali, jaxdali):
        @lib.pipeline_def(batch_size=7, num_threads=1, device_id=None, enable_conditionals=True, seed=5)
        def pipe():
            return body(lib.fn, lib.types, lib.fn.external_source(index, batch=False))

        p = pipe()
        p.build()
        out = p.run()
        results.append([[np.asarray(t.at(i)) for i in range(len(t))] for t in out])
    for ours, theirs in zip(results[1], results[0]):
        assert [a.dtype for a in ours] == [a.dtype for a in theirs]
        np.testing.assert_array_equal(np.stack(ours), np.stack(theirs))
