"""Keeps benchmarks/bench_new_ops.py from rotting: the FITS and dump_image comparisons on a few tiny files, one
repetition (the video case re-encodes a clip: run by hand). Asserts that every loader reads, never how fast."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "bench_new_ops.py"


def test_fits_and_dump_image_benchmarks_run_every_loader(capsys):
    for module in ("astropy", "nvidia.dali"):
        pytest.importorskip(module)
    spec = importlib.util.spec_from_file_location("bench_new_ops", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.main(["--only", "fits", "--only", "dump_image", "--files", "4", "--size", "16",
                          "--batch-size", "2", "--batches", "1", "--reps", "1", "--threads", "1"])
    assert set(results["fits"]["RICE_1"]["wall"]) == {"jaxdali", "astropy loop", "jaxdali, NumPy Rice decoder"}
    assert all(r > 0 for rates in results["dump_image"]["wall"].values() for r in rates)
    assert "| astropy loop |" in capsys.readouterr().out
