"""Float -> bool conversion rounds first, as DALI's: 0.49 -> False, 0.5 -> True, NaN -> True (fn.cast and every
operator converting through ``jaxdali.ops.convert``; decoders.numpy's ``dtype`` is compared with DALI in
tests/differential/test_readers_formats.py)."""

from __future__ import annotations

import numpy as np
import pytest

from jaxdali.ops.convert import convert
from tests.differential.twin import run

VALUES = np.array([0.49, 0.5, -0.5, -0.51, 0.0, -0.0, 3.7, np.nan, np.inf], np.float32)
EXPECTED = [False, True, True, True, False, False, True, True, True]


def test_host_and_device_round_before_testing_for_zero():
    import jax.numpy as jnp

    assert convert(VALUES, np.bool_).tolist() == EXPECTED
    assert np.asarray(convert(jnp.asarray(VALUES), np.bool_, jnp)).tolist() == EXPECTED


def test_cast_to_bool_matches_dali():
    pytest.importorskip("nvidia.dali")
    body = lambda fn, types, x: fn.cast(x, dtype=types.BOOL)  # noqa: E731
    ours, theirs = run("jaxdali", body, [[VALUES]]), run("dali", body, [[VALUES]])
    assert ours[0][0].tolist() == theirs[0][0].tolist() == EXPECTED
