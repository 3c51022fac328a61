"""Keeps benchmarks/op_cost*.py from rotting: every case of every family builds and runs one batch in
jaxdali over real photos, and the report shows each case. Asserts that the pieces work, never speed."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


def _runner():
    spec = importlib.util.spec_from_file_location("op_cost", BENCHMARKS / "op_cost.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_case_runs_in_jaxdali(flowers_root):
    op_cost = _runner()
    cases = op_cost.load_cases()
    assert "feed" in cases and len(cases) > 1
    photos = [p[:60, :80] for p in op_cost.load_photos(pathlib.Path(flowers_root), 2)]
    assert photos[0].shape == (60, 80, 3) and photos[0].dtype == np.uint8
    rows = op_cost.measure(cases, photos, reps=1, batches=1, warmup=0, threads=1, libs=("jaxdali",))
    failed = {r["case"]: r["jaxdali_error"] for r in rows if "jaxdali_error" in r}
    assert not failed
    table = op_cost.report(rows)
    assert all(f"| {name} |" in table for name in cases)
