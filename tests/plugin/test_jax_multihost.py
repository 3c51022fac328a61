"""Two real processes x 4 CPU devices joined by jax.distributed: global sharded batches (issue 4), and
the loader state saved and restored per process with Orbax (issue 5)."""

from __future__ import annotations

import json
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

from jaxdali.ops import sampling

WORKER = pathlib.Path(__file__).parent / "helpers" / "multihost_worker.py"
N_FILES = 45
NUM_SHARDS = 8
BS = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _expected_epoch(epoch: int) -> list[list[int]]:
    """Per step: sum of all rows (padding included), masked sum and count, from the dataset alone."""
    labels = np.array([(i * i) % 97 for i in range(N_FILES)])
    steps = -(-sampling.padded_shard_size(N_FILES, NUM_SHARDS) // BS)
    out = []
    for step in range(steps):
        total = masked = count = 0
        for k in range(NUM_SHARDS):
            spec = sampling.ShardSpec(N_FILES, NUM_SHARDS, k, pad_last_batch=True, batch_size=BS)
            start = (epoch * steps + step) * BS
            idx = sampling.stream_indices(spec, start, BS)
            pad = sampling.stream_is_padding(spec, start, BS)
            total += int(labels[idx].sum())
            masked += int(labels[idx][~pad].sum())
            count += int((~pad).sum())
        out.append([total, masked, count])
    return out


@pytest.mark.timeout(240)
def test_two_processes_four_devices_global_reduction(tmp_path, subprocess_env):
    pytest.importorskip("jax")
    pytest.importorskip("orbax.checkpoint")
    file_dir = tmp_path / "files"
    file_dir.mkdir()
    for i in range(N_FILES):
        (file_dir / f"{i:03d}.bin").write_bytes(bytes([i]))
    port = _free_port()
    ckpt_dir = tmp_path / "ckpt"
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(p), "2", str(port), str(file_dir), str(ckpt_dir)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env) for p in range(2)]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=200)
            assert p.returncode == 0, err[-3000:]
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    # The second process's devices have ids from 2048 up, not 4..7: shard ids must be positions.
    assert results[0]["devices"][4] != 4
    expected = [_expected_epoch(e) for e in range(2)]
    for r in results:
        assert r["epochs"] == expected
        assert r["resumed"] == expected[1][1:]  # the restored iterator continues after the saved batch
    assert sorted(p.name for p in (ckpt_dir / "1" / "loader").glob("jaxdali_loader_*")) == [
        "jaxdali_loader_process_0.json", "jaxdali_loader_process_1.json"]
    for epoch in expected:
        assert sum(b[1] for b in epoch) == sum((i * i) % 97 for i in range(N_FILES))
        assert sum(b[2] for b in epoch) == N_FILES
