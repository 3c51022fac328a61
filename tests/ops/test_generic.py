"""Generic operators: errors name the operator and the argument; the device placement gives the host's
values. (Values are checked against DALI in tests/differential/test_ops_generic.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.ops.schema import OpArgumentError


def run(make, batch_size=2, device_id=None):
    """Runs ``make()`` as a pipeline once; returns each output as a list of NumPy samples."""

    @pipeline_def(batch_size=batch_size, num_threads=1, device_id=device_id, seed=7, prefetch_queue_depth=1)
    def pipe():
        out = make()
        return tuple(out) if isinstance(out, (list, tuple)) else out

    p = pipe()
    try:
        outs = p.run()
    finally:
        p.close()
    return [[np.asarray(o.as_cpu().at(i)) for i in range(len(o))] for o in outs]


def feed(*samples, layout=""):
    return fn.external_source(source=lambda: [np.asarray(s) for s in samples], layout=layout)


ERRORS = [
    (lambda: fn.constant(shape=[2]), "fn.constant: give exactly one of 'fdata' and 'idata'"),
    (lambda: fn.constant(fdata=[1.0], idata=[1]), "fn.constant: give exactly one of 'fdata' and 'idata'"),
    (lambda: fn.constant(fdata=[1.0, 2.0, 3.0], shape=[2]), r"fn.constant: 3 values of 'fdata' do not fill 'shape' \[2\]"),
    (lambda: fn.full(feed([1, 2, 3], [1, 2, 3]), shape=[2, 2]),
     r"fn.full: fill_value of shape \[3\] cannot be broadcast to the shape \[2, 2\]"),
    (lambda: fn.zeros(shape=[2, -1]), r"fn.zeros: argument 'shape' must not have negative extents"),
    (lambda: fn.ones(shape=feed([2, -1], [1, 1])), r"fn.ones: argument 'shape' must not have negative extents.*sample 0"),
    (lambda: fn.full_like(feed(np.zeros((2, 2)), np.zeros((2, 3))), feed([1, 2, 3], [1, 2, 3])),
     r"fn.full_like: fill_value of shape \[3\] cannot be broadcast to the shape \[2, 2\] \(sample 0\)"),
]


@pytest.mark.parametrize("make,message", ERRORS, ids=[str(i) for i in range(len(ERRORS))])
def test_bad_arguments_raise_naming_the_operator(make, message):
    with pytest.raises(OpArgumentError, match=message):
        run(make)


@pytest.mark.parametrize("make", [
    lambda x: fn.cast_like(x, fn.constant(idata=[0], dtype=types.UINT8)),
    lambda x: fn.copy(x),
])
def test_device_placement_gives_the_host_values(make):
    data = [np.array([[-3.5, 2.5], [300.2, 0.49]], np.float32), np.array([[7.0, -0.5], [1e9, 254.5]], np.float32)]
    host, device = run(lambda: (make(feed(*data)), make(feed(*data).gpu())), device_id=0)
    for a, b in zip(host, device):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_constant_on_the_device():
    (out,) = run(lambda: fn.constant(fdata=[1.0, 2.0], device="gpu"), device_id=0)
    assert [o.tolist() for o in out] == [[1.0, 2.0], [1.0, 2.0]]
