"""Keeps benchmarks/bench_readers_tfrecord_wds.py from rotting: a tiny run must print its table.
Asserts that the pieces work, never how fast they are."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "bench_readers_tfrecord_wds.py"


@pytest.mark.slow
def test_benchmark_prints_every_measured_system(flowers_root, subprocess_env):
    done = subprocess.run([sys.executable, str(SCRIPT), "--data", flowers_root, "--records", "256", "--reps", "1",
                           "--batches", "2", "--batch-size", "32"],
                          check=False, capture_output=True, text=True, timeout=300, env=subprocess_env)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| TFRecord") or line.startswith("| WebDataset")]
    systems = {(r.split("|")[1].strip(), r.split("|")[2].strip()) for r in rows}
    assert {("TFRecord", "jaxdali"), ("WebDataset tar", "jaxdali")} <= systems
    assert all(float(r.split("|")[3].split()[0].replace(",", "")) > 0 for r in rows)  # a rate was measured
