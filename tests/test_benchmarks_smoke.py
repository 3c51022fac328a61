"""Keeps benchmarks/ from rotting: the runner, jaxdali's two systems, the raw work and the report,
on a 16-photo folder for 2 batches of 8. Asserts that the pieces work, never how fast they are."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

RUNNER = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


@pytest.fixture
def small_folder(flowers_root, tmp_path) -> pathlib.Path:
    """Two classes of eight real photos each, in the ImageNet folder layout."""
    root = tmp_path / "photos"
    classes = sorted(d for d in os.listdir(flowers_root) if os.path.isdir(os.path.join(flowers_root, d)))
    for cls in classes[:2]:
        (root / cls).mkdir(parents=True)
        for name in sorted(os.listdir(os.path.join(flowers_root, cls)))[:8]:
            shutil.copy(os.path.join(flowers_root, cls, name), root / cls / name)
    return root


@pytest.mark.slow
def test_runner_measures_jaxdali_and_writes_the_report(small_folder, tmp_path, subprocess_env):
    out = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, str(RUNNER), "--data", str(small_folder), "--systems", "jaxdali,jaxdali-run",
         "--pipelines", "train", "--reps", "1", "--batch-size", "8", "--warmup", "0", "--batches", "2",
         "--raw-passes", "1", "--out", str(out)],
        check=False, capture_output=True, text=True, timeout=240, env=subprocess_env)
    assert done.returncode == 0, done.stdout + done.stderr

    [saved] = out.glob("results-*.json")
    records = json.loads(saved.read_text())["records"]
    by_system = {r["system"]: r for r in records}
    assert set(by_system) == {"raw", "jaxdali", "jaxdali-run"}
    for name in ("jaxdali", "jaxdali-run"):
        r = by_system[name]
        assert r["batch"] == {"shape": [8, 3, 224, 224], "dtype": "float32"}
        assert r["images_per_s"] > 0 and r["ttfb_s"] > 0
        assert r["pss_bytes"] > r["pss_import_bytes"] > 0  # the loader's data comes on top of the imports
    assert set(by_system["jaxdali-run"]["op_ms_per_batch"]) >= {"Reader", "decode", "resize", "normalize"}
    raw = by_system["raw"]
    assert raw["images"] == 16
    assert raw["region_decode_us"] > 0 and raw["one_thread_region_images_per_s"] > 0

    report = saved.with_suffix(".md").read_text()
    assert report == done.stdout
    assert "`@data_iterator` → sharded `jax.Array`" in report
    assert "| decode |" in report and "raw work" in report and "crop window only" in report


@pytest.mark.slow
def test_form_rows_and_upscaled_photos(small_folder, tmp_path, subprocess_env):
    """run.py's rows for other ways of writing the pipeline, on ImageNet-size copies of the photos."""
    out = tmp_path / "results"
    systems = "jaxdali-8dev-hwc,jaxdali-8dev-pmap,jaxdali-generic-built,jaxdali-file-list,jaxdali-2proc,jaxdali-rrc"
    done = subprocess.run(
        [sys.executable, str(RUNNER), "--data", str(small_folder), "--upscaled", "--upscaled-quality", "97",
         "--systems", systems, "--no-raw",
         "--pipelines", "val", "--reps", "1", "--batch-size", "8", "--warmup", "0", "--batches", "1",
         "--out", str(out)],
        check=False, capture_output=True, text=True, timeout=400, env=subprocess_env)
    assert done.returncode == 0, done.stdout + done.stderr
    [saved] = out.glob("results-*.json")
    by_system = {r["system"]: r for r in json.loads(saved.read_text())["records"]}
    assert set(by_system) == set(systems.split(",")) - {"jaxdali-rrc"}  # a train-only row
    assert by_system["jaxdali-8dev-hwc"]["batch"]["shape"] == [8, 224, 224, 3]
    assert by_system["jaxdali-8dev-hwc"]["versions"]["devices"] == 8
    assert by_system["jaxdali-8dev-pmap"]["batch"]["shape"] == [8, 3, 224, 224]  # (8 devices x 1) rows
    assert by_system["jaxdali-8dev-pmap"]["versions"]["form"] == "data_iterator-devices"
    assert by_system["jaxdali-file-list"]["versions"]["source"] == "file_list"
    for name in ("jaxdali-generic-built", "jaxdali-file-list"):
        assert by_system[name]["batch"] == {"shape": [8, 3, 224, 224], "dtype": "float32"}
        assert by_system[name]["versions"]["devices"] == 1
    two = by_system["jaxdali-2proc"]  # 2 processes x 4 devices, one global batch of 8 rows
    assert two["batch"] == {"shape": [8, 3, 224, 224], "dtype": "float32"}
    assert (two["versions"]["processes"], two["versions"]["local_devices"], two["versions"]["devices"]) == (2, 4, 8)
    assert len(two["local_images_per_s"]) == 2 and all(rate > 0 for rate in two["local_images_per_s"])
    assert two["images_per_s"] == pytest.approx(sum(two["local_images_per_s"]))
    assert "`DALIGenericIterator` over a built pipeline" in done.stdout
    assert "2 processes × 4 devices" in done.stdout
    assert "16 ImageNet-size copies" in done.stderr and "(JPEG q97)" in done.stderr


@pytest.mark.slow
def test_forms_taking_turns_in_one_process(small_folder, tmp_path, subprocess_env):
    """benchmarks/alternate.py: every form built in one process, one record per form with a ratio per round."""
    out = tmp_path / "alternate"
    forms = "1dev,8dev-pmap,1dev-hwc,generic-built,rrc"
    done = subprocess.run(
        [sys.executable, str(RUNNER.parent / "alternate.py"), "--data", str(small_folder), "--pipelines", "train",
         "--forms", forms, "--rounds", "2", "--batches", "1", "--refill", "0", "--batch-size", "8", "--out", str(out)],
        check=False, capture_output=True, text=True, timeout=300, env=subprocess_env)
    assert done.returncode == 0, done.stdout + done.stderr
    [saved] = out.glob("alternate-*.json")
    records = {r["form"]: r for r in json.loads(saved.read_text())["records"]}
    assert list(records) == forms.split(",")
    assert records["8dev-pmap"]["batch_shape"] == [8, 1, 3, 224, 224]  # 8 devices x 1 row of the global 8
    assert records["1dev-hwc"]["batch_shape"] == [8, 224, 224, 3]
    assert records["generic-built"]["batch_shape"] == [8, 3, 224, 224]
    assert records["rrc"]["batch_shape"] == [8, 3, 224, 224]  # decoders.image + random_resized_crop
    for r in records.values():
        assert len(r["images_per_s"]) == len(r["cpu_ratio"]) == 2 and all(v > 0 for v in r["images_per_s"])
    assert records["1dev"]["images_per_s_ratio"] == [1.0, 1.0]
    assert done.stdout.count("| generic-built |") == 1 and "Reference form: `1dev`" in done.stdout


def test_multiprocess_row_sums_the_local_rates():
    """bench_multiprocess.combine: each process's share of the global rate, summed; CPU and PSS summed."""
    sys.path.insert(0, str(RUNNER.parent))
    try:
        import bench_multiprocess
    finally:
        sys.path.remove(str(RUNNER.parent))
    records = [{"images_per_s": rate, "cpu_percent": 80.0, "pss_bytes": 3e8, "pss_import_bytes": 2e8, "processes": 1,
                "import_s": imp, "ttfb_s": ttfb, "threads": 1, "versions": {"devices": 8, "local_devices": 4}}
               for rate, imp, ttfb in ((1000.0, 1.0, 0.5), (800.0, 2.0, 0.25))]
    row = bench_multiprocess.combine(records)
    assert row["local_images_per_s"] == [500.0, 400.0] and row["images_per_s"] == 900.0
    assert (row["cpu_percent"], row["pss_bytes"], row["threads"]) == (160.0, 6e8, 2)
    assert (row["import_s"], row["ttfb_s"]) == (2.0, 0.5)


def test_each_repetition_starts_with_another_system():
    sys.path.insert(0, str(RUNNER.parent))
    try:
        import run
    finally:
        sys.path.remove(str(RUNNER.parent))
    systems = ["jaxdali", "dali", "torch"]
    orders = [run.rep_order(systems, rep) for rep in range(4)]
    assert orders == [systems, ["dali", "torch", "jaxdali"], ["torch", "jaxdali", "dali"], systems]
    assert run.rep_order([], 3) == []


@pytest.mark.slow
def test_reader_benchmarks_report_every_loader(flowers_root, subprocess_env):
    """benchmarks/bench_readers_numpy.py and bench_remote_read.py on a few files: every loader gets a row."""
    bench = RUNNER.parent
    tiny = ["--batch-size", "4", "--batches", "1", "--reps", "1", "--warmup", "0"]
    runs = [[str(bench / "bench_readers_numpy.py"), "--files", "16", *tiny],
            [str(bench / "bench_remote_read.py"), "--files", "8", "--latency", "0.001", "--photos", flowers_root, *tiny]]
    outputs = []
    for args in runs:
        done = subprocess.run([sys.executable, *args], check=False, capture_output=True, text=True, timeout=240,
                              env=subprocess_env)
        assert done.returncode == 0, done.stdout + done.stderr
        outputs.append(done.stdout)
    numpy_report, remote_report = outputs
    assert numpy_report.count("| jaxdali |") == 2 and numpy_report.count("| dali |") == 2
    for loader in ("local", "remote, no read-ahead", "remote, read-ahead 1", "remote, read-ahead 2"):
        assert remote_report.count(f"| {loader} |") == 3  # numpy, file + decoder, coco + decoder


def test_report_survives_a_run_too_short_for_the_cpu_clock():
    """One timed batch can finish within a CPU-clock tick: the report shows "—", not a crash (CI failure)."""
    sys.path.insert(0, str(RUNNER.parent))
    try:
        import report
    finally:
        sys.path.remove(str(RUNNER.parent))
    record = {"system": "jaxdali", "pipeline": "val", "images_per_s": 900.0, "cpu_percent": 0.0, "ttfb_s": 0.2,
              "import_s": 1.0, "pss_bytes": 2e8, "pss_import_bytes": 1e8}
    text = report.markdown({"pipelines": ["val"]}, [record])
    row = next(line for line in text.splitlines() if line.startswith("| **jaxdali**"))
    assert "| 900 |" in row and "| — |" in row, row
