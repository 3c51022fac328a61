"""Keeps benchmarks/bench_readers_lmdb_coco.py from rotting: every format and system on a few hundred
records, one repetition. Asserts that each system reads whole epochs, never how fast."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "bench_readers_lmdb_coco.py"


def test_reader_benchmark_runs_every_system(flowers_root, capsys):
    for module in ("lmdb", "array_record", "sklearn", "nvidia.dali"):
        pytest.importorskip(module)
    spec = importlib.util.spec_from_file_location("bench_readers_lmdb_coco", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.main(["--records", "48", "--batch-size", "16", "--reps", "1", "--threads", "1"])
    assert set(results) == {"caffe2", "coco", "array_record"}
    assert set(results["array_record"]) >= {"jaxdali", "grain __getitems__"}
    assert all(r["wall"] > 0 and r["cpu"] > 0 for systems in results.values() for r in systems.values())
    assert "| caffe2 | dali |" in capsys.readouterr().out
