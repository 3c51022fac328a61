"""Keeps benchmarks/bench_readers_mxnet_sequence.py from rotting: both readers and both systems on a few
records, one repetition. Asserts that every system delivers batches, never how fast."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "bench_readers_mxnet_sequence.py"


def test_benchmark_runs_both_readers_on_both_systems(flowers_root, capsys):
    pytest.importorskip("nvidia.dali")
    spec = importlib.util.spec_from_file_location("bench_readers_mxnet_sequence", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--records", "64", "--streams", "4", "--batch-size", "8", "--batches", "2", "--reps", "1",
                "--warmup", "1", "--threads", "1"])
    out = capsys.readouterr().out
    assert "### fn.readers.mxnet" in out and "### fn.readers.sequence" in out
    assert out.count("| jaxdali |") == 2 and out.count("| dali |") == 2
