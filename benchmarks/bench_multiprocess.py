"""jaxdali's ``data_iterator`` in several local processes joined by ``jax.distributed``: one result row.

Run by ``run.py`` (row ``jaxdali-2proc``) like any child:
``python benchmarks/bench_multiprocess.py --processes 2 --devices-per-process 4 --pipeline train --data DIR ...``.
It starts ``--processes`` copies of ``bench_jaxdali.py`` on this machine, each with
``--devices-per-process`` simulated CPU devices (``XLA_FLAGS``), joined over gloo with process 0 as the
coordinator on a free localhost port, all iterating the same global batch (``--batch-size``) sharded over
every process's devices. The machine's ``--threads`` are split between the processes (at least one
each), so the row uses the same cores as the one-process rows. Each process reports its local
images/s (its share of the global batch rows); the row is their sum, with the processes' CPU and
PSS summed and the slowest import and first batch.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import harness

HERE = pathlib.Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def combine(records: list[dict]) -> dict:
    """One row from the processes' records: local images/s, CPU % and PSS summed; the slowest start."""
    local = [r["images_per_s"] * r["versions"]["local_devices"] / r["versions"]["devices"] for r in records]
    combined = dict(records[0])
    combined.update(
        images_per_s=sum(local),
        cpu_percent=sum(r["cpu_percent"] for r in records),
        pss_bytes=sum(r["pss_bytes"] for r in records),
        pss_import_bytes=sum(r["pss_import_bytes"] for r in records),
        processes=sum(r["processes"] for r in records),
        import_s=max(r["import_s"] for r in records),
        ttfb_s=max(r["ttfb_s"] for r in records),
        threads=sum(r["threads"] for r in records),
        local_images_per_s=local,
    )
    return combined


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--devices-per-process", type=int, default=4)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--timeout", type=float, default=280.0)
    own, rest = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if own.processes < 1 or own.devices_per_process < 1:
        raise SystemExit("--processes and --devices-per-process must be >= 1")
    threads = max(1, own.threads // own.processes)
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={own.devices_per_process}")
    coordinator = f"localhost:{free_port()}"
    children = [subprocess.Popen(
        [sys.executable, str(HERE / "bench_jaxdali.py"), *rest, "--threads", str(threads),
         "--process-id", str(i), "--num-processes", str(own.processes), "--coordinator", coordinator],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for i in range(own.processes)]
    records, failures = [], []
    deadline = time.monotonic() + own.timeout
    try:
        for i, child in enumerate(children):
            out, err = child.communicate(timeout=max(1.0, deadline - time.monotonic()))
            lines = [line for line in out.splitlines() if line.startswith(harness.RESULT_PREFIX)]
            if child.returncode != 0 or not lines:
                failures.append(f"process {i}: exit code {child.returncode}\n{(out + err).strip()[-1500:]}")
                break  # the others wait for it at their first collective: stop them (below)
            else:
                records.append(json.loads(lines[-1][len(harness.RESULT_PREFIX):]))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    if failures:
        raise SystemExit("\n".join(failures))
    result = combine(records)
    harness.emit(result)
    return result


if __name__ == "__main__":
    main()
