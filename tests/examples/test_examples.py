"""Every example runs on small real data: the Flax main job (with its resume and refusals), DALI's
ResNet-50 pipelines, the PyTorch loader, pmap, and a 2-process multi-host launch."""

from __future__ import annotations

import collections
import importlib.util
import json
import pathlib
import re
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _run(script: str, args: list[str], env: dict, timeout: int = 240) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, env=env,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def train_example(tmp_path_factory):
    """examples/train.py as a module, with JAX's persistent compilation cache on so that its runs in
    this process reuse each other's compiled programs."""
    pytest.importorskip("flax")
    pytest.importorskip("orbax.checkpoint")
    pytest.importorskip("tqdm")
    import jax

    spec = importlib.util.spec_from_file_location("jaxdali_example_train", EXAMPLES / "train.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Flax's dataclasses look their module up
    spec.loader.exec_module(module)
    options = {"jax_compilation_cache_dir": str(tmp_path_factory.mktemp("xla_cache")),
               "jax_persistent_cache_min_compile_time_secs": 0.0}
    saved = {name: getattr(jax.config, name) for name in options}
    for name, value in options.items():
        jax.config.update(name, value)
    yield module
    for name, value in saved.items():
        jax.config.update(name, value)
    sys.modules.pop(spec.name, None)


def _epochs(out: str) -> dict[int, str]:
    """Epoch number -> its loss and accuracy text (the timings differ between runs)."""
    return {int(m[1]): m[2] for m in re.finditer(r"^epoch (\d+)/\d+: (loss [\d.]+, val accuracy [^)]*\))", out, re.M)}


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_train_example_resumes_exactly_and_refuses_another_run(train_example, digits_subset, tmp_path, capsys):
    data = str(digits_subset("0123", 20))  # 64 train, 16 validation images
    common = ["--data", data, "--size", "16", "--batch-size", "16"]
    train_example.main(common + ["--epochs", "2", "--checkpoint-dir", str(tmp_path / "straight")])
    straight = capsys.readouterr().out
    assert "4 classes; 64 train, 16 validation images" in straight and "8 cpu devices" in straight
    assert sorted(_epochs(straight)) == [1, 2]
    assert all(re.search(r"\(\d+/16 images, each counted once\)", line) for line in _epochs(straight).values())

    interrupted = ["--checkpoint-dir", str(tmp_path / "resumed")]
    train_example.main(common + ["--epochs", "1"] + interrupted)
    first = capsys.readouterr().out
    train_example.main(common + ["--epochs", "2", "--resume"] + interrupted)
    second = capsys.readouterr().out
    assert "resumed after epoch 1" in second
    assert sorted(_epochs(first)) == [1] and sorted(_epochs(second)) == [2]  # numbering continues
    assert {**_epochs(first), **_epochs(second)} == _epochs(straight)  # the same run, loss and accuracy

    with pytest.raises(SystemExit) as e:  # a new run into a directory holding a run
        train_example.main(common + ["--epochs", "1"] + interrupted)
    assert "already holds a run: add --resume to continue it, --overwrite to discard it" in str(e.value)
    with pytest.raises(SystemExit) as e:  # resuming with other settings
        train_example.main(common[:-1] + ["32", "--resume"] + interrupted)
    assert "holds another run (it differs in batch_size)" in str(e.value)


def test_train_example_overwrite_empties_the_checkpoint_directory(train_example, tmp_path):
    directory = tmp_path / "run"
    (directory / "7").mkdir(parents=True)
    run = {"data": "somewhere", "batch_size": 8, "size": 16, "lr": 0.1}
    args = train_example.parse_args(["--overwrite"])
    train_example.check_run_dir(directory, run, args)
    assert sorted(p.name for p in directory.iterdir()) == ["run.json"]
    assert json.loads((directory / "run.json").read_text()) == run


def test_train_example_default_run_directories(train_example, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert train_example.run_directory(None, "/data/digits", resume=True).parent == tmp_path / "jaxdali_runs"
    for stamp in ("20260101-120000", "20260102-090000"):
        (tmp_path / "jaxdali_runs" / f"digits-{stamp}").mkdir(parents=True)
    (tmp_path / "jaxdali_runs" / "flowers-20270101-000000").mkdir()
    new = train_example.run_directory(None, "/data/digits", resume=False)
    assert new.parent == tmp_path / "jaxdali_runs" and not new.exists()  # a fresh run never collides
    assert re.fullmatch(r"digits-\d{8}-\d{6}", new.name)
    assert train_example.run_directory(None, "/data/digits", resume=True).name == "digits-20260102-090000"
    assert train_example.run_directory("mine", "/data/digits", resume=True) == tmp_path / "mine"


def test_train_example_missing_data_folder_is_one_line(train_example, tmp_path):
    with pytest.raises(SystemExit) as e:
        train_example.main(["--data", str(tmp_path / "missing")])
    message = str(e.value)
    assert "\n" not in message and "is not a folder" in message and "leave --data out" in message


def test_train_example_holds_out_distinct_validation_files(train_example, digits_subset):
    (train, train_labels), (val, val_labels), classes = train_example.split(str(digits_subset("38", 10)))
    assert classes == ["class3", "class8"]
    assert len(train) == 16 and len(val) == 4 and not set(train) & set(val)
    assert collections.Counter(val_labels) == {0: 2, 1: 2}


@pytest.mark.slow
def test_quickstart_example(digits_subset, subprocess_env):
    out = _run("quickstart.py", [str(digits_subset("12", 40))], subprocess_env)
    assert "batch 0: images (32, 3, 224, 224) float32" in out and "3 batches (96 images)" in out


@pytest.mark.slow
def test_resnet50_pipelines_example(digits_root, subprocess_env):
    out = _run("resnet50_pipelines.py", [digits_root, "--crop", "24", "--batch-size", "4", "--batches", "1"],
               subprocess_env)
    assert "train batch 0: images (4, 3, 24, 24) float32" in out
    assert "val batch 0: images (4, 3, 24, 24) float32" in out


@pytest.mark.slow
def test_pytorch_resnet50_example(digits_subset, subprocess_env):
    pytest.importorskip("torch")
    out = _run("pytorch_resnet50.py", [str(digits_subset("01", 24)), "--epochs", "2", "--crop", "24",
                                       "--batch-size", "16"], subprocess_env)
    lines = re.findall(r"^epoch (\d): 3/3 steps, 48 images, loss ([\d.]+)", out, re.M)
    assert [n for n, _ in lines] == ["1", "2"]


@pytest.mark.slow
def test_pmap_example(digits_subset, subprocess_env):
    out = _run("pmap.py", ["--data", str(digits_subset("0123", 40)), "--epochs", "3", "--batch-size", "32"],
               subprocess_env)
    losses = [float(x) for x in re.findall(r"^epoch \d: 5 steps on 8 devices, mean loss ([\d.]+)", out, re.M)]
    assert len(losses) == 3 and losses[2] < losses[0]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_multihost_example_counts_every_image_once_on_both_processes(digits_subset, subprocess_env):
    data = digits_subset("0123456789", 7)  # 70 images over 8 devices: padded shards, masked out
    out = _run("multihost.py", ["--data", str(data), "--epochs", "2", "--batch-size", "16"], subprocess_env)
    # Not anchored at line starts: a library of the other process may write to the shared stdout unterminated.
    results = re.findall(r"process (\d): epoch (\d): (\d+) images, per class (\[[^\]]*\])", out)
    assert sorted((p, e) for p, e, _, _ in results) == [("0", "1"), ("0", "2"), ("1", "1"), ("1", "2")]
    assert {(n, counts) for _, _, n, counts in results} == {("70", str([7] * 10))}
