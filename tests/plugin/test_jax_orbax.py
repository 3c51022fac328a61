"""Orbax: model and loader state saved by one CheckpointManager, resumed in a fresh process (issue 5)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("orbax.checkpoint")
pytest.importorskip("optax")

SCRIPT = pathlib.Path(__file__).parent / "helpers" / "orbax_train.py"


def _run(mode: str, ckpt: pathlib.Path, root: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, str(SCRIPT), mode, str(ckpt), root], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_training_resumed_in_a_fresh_process_matches_the_uninterrupted_run(tmp_path, flowers_root, subprocess_env):
    full = _run("full", tmp_path / "unused", flowers_root, subprocess_env)
    first = _run("first", tmp_path / "ckpt", flowers_root, subprocess_env)
    resumed = _run("resume", tmp_path / "ckpt", flowers_root, subprocess_env)
    assert first["log"] + resumed["log"] == full["log"]  # batch for batch (data digests and losses)
    assert resumed["w"] == pytest.approx(full["w"], rel=1e-6)
    assert (tmp_path / "ckpt" / "9" / "loader" / "jaxdali_loader_process_0.json").is_file()
    assert len(full["log"]) > 13  # the run crosses an epoch end (13 steps per epoch)


def test_loader_restore_without_factory_returns_checkpoints(tmp_path, index_files):
    import orbax.checkpoint as ocp

    from jaxdali import fn
    from jaxdali.plugin.jax import data_iterator
    from jaxdali.plugin.jax.orbax import LoaderRestore, LoaderSave

    files = index_files(10)

    @data_iterator(output_map=["x"], reader_name="Reader")
    def loader():
        return fn.readers.file(files=files, name="Reader")[0]

    it = loader(batch_size=2, enable_checkpointing=True, device_id=None)
    next(it)
    with ocp.CheckpointManager(tmp_path) as mngr:
        mngr.save(1, args=ocp.args.Composite(loader=LoaderSave(it)))
        mngr.wait_until_finished()
        cps = mngr.restore(1, args=ocp.args.Composite(loader=LoaderRestore())).loader
        assert cps == it.checkpoints()
        # Restoring on more hosts than saved: a process without a file of its own takes another's.
        saved = tmp_path / "1" / "loader" / "jaxdali_loader_process_0.json"
        saved.rename(saved.with_name("jaxdali_loader_process_3.json"))
        assert mngr.restore(1, args=ocp.args.Composite(loader=LoaderRestore())).loader == cps
        saved.with_name("jaxdali_loader_process_3.json").unlink()
        with pytest.raises(FileNotFoundError, match="no jaxdali loader state"):
            mngr.restore(1, args=ocp.args.Composite(loader=LoaderRestore()))


@pytest.mark.parametrize("text", ['{"format": "jaxdali-loader", "version": 1, "checkpoints": "x"}',
                                  '{"format": "jaxdali-loader", "version": 1, "checkpoints": [1]}',
                                  '[1, 2]', "{not json", "[" * 100_000])
def test_a_damaged_loader_file_raises_a_checkpoint_error(tmp_path, text):
    from jaxdali.core.checkpoint import CheckpointError
    from jaxdali.plugin.jax.orbax import LoaderCheckpointHandler

    (tmp_path / "jaxdali_loader_process_0.json").write_text(text)
    with pytest.raises(CheckpointError, match="jaxdali loader checkpoint|field 'checkpoints'"):
        LoaderCheckpointHandler().restore(tmp_path)
