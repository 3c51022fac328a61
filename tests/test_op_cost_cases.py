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


def test_family_summary_is_the_geometric_mean_of_each_familys_cpu_ratios():
    rows = [{"case": "feed", "family": "-", "cpu_ratio": 9.0},
            {"case": "a", "family": "audio", "cpu_ratio": 0.5}, {"case": "b", "family": "audio", "cpu_ratio": 2.0},
            {"case": "c", "family": "audio", "cpu_ratio": 1.0},
            {"case": "d", "family": "image", "cpu_ratio": 0.25},
            {"case": "e", "family": "gpuonly", "dali_error": "no CPU operator"}]
    lines = _runner().family_summary(rows).splitlines()
    assert lines[2:] == ["| audio | 3 | 1.00 | 1 | b 2.00 |", "| image | 1 | 0.25 | 0 | d 0.25 |"]
