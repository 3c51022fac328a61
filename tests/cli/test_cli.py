"""The ``jaxdali`` command on real image folders: inspect, preview (the PNG decoded back), bench, info."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import cv2
import numpy as np
import pytest

import jaxdali
from jaxdali import config
from jaxdali.cli import main
from jaxdali.cli.preview import render


@pytest.fixture
def small_folder(digits_subset) -> pathlib.Path:
    """3 classes x 6 real digit PNGs."""
    return digits_subset("147", 6)


def test_inspect_reports_classes_formats_sizes_and_undecodable_files(small_folder, capsys):
    (small_folder / "class4" / "empty.png").write_bytes(b"")
    (small_folder / "class7" / "garbage.jpg").write_bytes(b"not an image at all")
    good = (small_folder / "class1" / sorted(os.listdir(small_folder / "class1"))[0]).read_bytes()
    (small_folder / "class1" / "truncated.png").write_bytes(good[:355])
    assert main(["inspect", str(small_folder), "--threads", "2"]) == 1  # undecodable files: status 1
    out = capsys.readouterr().out
    assert "21 files in 3 classes" in out
    assert "class1        7" in out and "class4        7" in out and "class7        7" in out
    assert "formats: png 18" in out
    assert "sizes (height x width): min 32 x 32, median 32 x 32, max 32 x 32" in out
    assert "undecodable: 3" in out
    bad = {line.split(": ", 1)[0].strip(): line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("  /")}
    assert "empty (0 bytes)" in bad[str(small_folder / "class4" / "empty.png")]
    assert "not a decodable image" in bad[str(small_folder / "class7" / "garbage.jpg")]
    truncated = bad[str(small_folder / "class1" / "truncated.png")]  # each decoder words it its own way
    assert "not a decodable image (355 bytes" in truncated or "could not decode this 32 x 32" in truncated


def test_inspect_of_a_clean_folder_succeeds(small_folder, capsys):
    assert main(["inspect", str(small_folder)]) == 0
    assert "undecodable: 0" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["inspect", "bench"])
def test_a_missing_folder_is_one_line_without_traceback(tmp_path, capsys, command):
    assert main([command, str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a folder" in err and "Traceback" not in err


def test_preview_writes_a_png_grid_of_labelled_augmented_pairs(small_folder, tmp_path, capsys):
    out = tmp_path / "grid.png"
    assert main(["preview", str(small_folder), "-o", str(out), "-n", "9", "--crop", "48"]) == 0
    grid = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert grid is not None and grid.dtype == np.uint8
    cell_h, cell_w = 48 + 18 + 6, 2 * 48 + 12
    assert grid.shape == (3 * cell_h, 3 * cell_w, 3)
    for i in range(9):  # every cell holds an original and its augmentation, with real content
        y, x = (i // 3) * cell_h, (i % 3) * cell_w
        original, augmented = grid[y:y + 48, x:x + 48], grid[y:y + 48, x + 50:x + 98]
        assert original.std() > 10 and augmented.std() > 10
        assert not np.array_equal(original, augmented)
        label = grid[y + 48:y + 48 + 18, x:x + cell_w]
        assert (label < 128).any()  # the class name is drawn
    assert f"{3 * cell_w} x {3 * cell_h} pixels" in capsys.readouterr().out


def test_preview_depends_on_the_seed_only(small_folder):
    a, b, c = (render(str(small_folder), 4, 32, seed) for seed in (0, 0, 1))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_bench_reports_throughput_operators_and_cpu(small_folder, capsys):
    assert main(["bench", str(small_folder), "--batch-size", "6", "--batches", "2", "--threads", "2",
                 "--crop", "32"]) == 0
    out = capsys.readouterr().out
    for pipeline, ops in (("train", ["decoders.image_random_crop", "resize", "random.coin_flip"]),
                          ("val", ["decoders.image", "resize"])):
        section = out.split(f"\n{pipeline}: ", 1)[1].split("\n\n")[0]
        assert "12 images in" in section and "images/s; CPU" in section
        lines = section.splitlines()[2:]
        rows = {line[:38].strip(): line[38:].split() for line in lines if not line.startswith("  note:")}
        assert set(ops + ["Reader", "crop_mirror_normalize", "(executor)", "(device stage)"]) == set(rows)
        # The decoder feeds resize sample by sample, so resize is charged with the decoding, and says so.
        assert f"  note: resize includes {ops[0]}'s work (it computes those samples as it reads them)" in lines
        assert float(rows["resize"][0]) > 0
        assert abs(sum(float(share.rstrip("%")) for _, share, _ in rows.values()) - 100) < 0.5


def _printed_info(out: str) -> dict[str, str]:
    return dict(line.split(None, 1) for line in out.splitlines())


def test_info_names_version_devices_decoder_and_kernel(capsys):
    assert main(["info"]) == 0
    info = _printed_info(capsys.readouterr().out)
    assert info == config.runtime_info()
    assert info["jaxdali"] == jaxdali.__version__
    assert info["jax_devices"] == "8 x cpu"  # the 8 simulated CPU devices of the test session
    assert info["resize"] in ("compiled kernel", "numpy fallback") and info["decoder"] in ("nvimgcodec", "opencv")


@pytest.mark.slow
def test_python_dash_m_jaxdali_runs_the_cli(subprocess_env):
    done = subprocess.run([sys.executable, "-m", "jaxdali", "info"], capture_output=True, text=True,
                          env=subprocess_env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _printed_info(done.stdout)["jaxdali"] == jaxdali.__version__
    done = subprocess.run([sys.executable, "-m", "jaxdali"], capture_output=True, text=True, env=subprocess_env,
                          timeout=120)
    assert done.returncode == 2 and "bench" in done.stderr and "preview" in done.stderr
