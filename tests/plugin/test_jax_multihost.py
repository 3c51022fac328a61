"""Two real processes x 4 CPU devices joined by jax.distributed: global sharded batches (issue 4), and
the loader state saved and restored per process with Orbax (issue 5)."""

from __future__ import annotations

import json
import pathlib
import socket
import subprocess
import sys

import pytest

WORKER = pathlib.Path(__file__).parent / "helpers" / "multihost_worker.py"
N_FILES = 45
NUM_SHARDS = 8
BS = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _expected_epoch(epoch: int) -> list[list[int]]:
    """Per step: sum, row-weighted sum, masked sum and count of the global batch, from the dataset and
    the reader's contract (spec §2.1) alone: shard k = samples [k*N//S, (k+1)*N//S); with
    pad_last_batch each reader-epoch e reads shard (k + e) mod S and repeats its last sample up to
    ceil(ceil(N/S)/bs)*bs samples; row block k of the global batch is device k's shard."""
    labels = [(i * i) % 97 for i in range(N_FILES)]
    shards = [list(range(N_FILES * k // NUM_SHARDS, N_FILES * (k + 1) // NUM_SHARDS)) for k in range(NUM_SHARDS)]
    steps = -(-(-(-N_FILES // NUM_SHARDS)) // BS)
    out = []
    for step in range(steps):
        rows, real = [], []
        for k in range(NUM_SHARDS):
            shard = shards[(k + epoch) % NUM_SHARDS]
            for i in range(step * BS, (step + 1) * BS):
                rows.append(labels[shard[min(i, len(shard) - 1)]])
                real.append(i < len(shard))
        weighted = sum(w * r for w, r in enumerate(rows, start=1))
        out.append([sum(rows), weighted, sum(r for r, m in zip(rows, real) if m), sum(real)])
    return out


@pytest.mark.slow
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
    assert expected[0] != expected[1]  # the shards rotate: the weighted sums see it
    for r in results:
        assert r["epochs"] == expected
        assert r["pmap_error"] == ("Iterator compatible with pmapped JAX functions does not support running in "
                                   "multiprocess mode. Use `sharding` argument instead.")  # E28
        assert r["resumed"] == expected[1][1:]  # the restored iterator continues after the saved batch
    assert sorted(p.name for p in (ckpt_dir / "1" / "loader").glob("jaxdali_loader_*")) == [
        "jaxdali_loader_process_0.json", "jaxdali_loader_process_1.json"]
    for epoch in expected:
        assert sum(b[2] for b in epoch) == sum((i * i) % 97 for i in range(N_FILES))
        assert sum(b[3] for b in epoch) == N_FILES
