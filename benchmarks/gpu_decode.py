"""GPU image decoding, same run: jaxdali ``device="mixed"`` (nvImageCodec's GPU backends) against DALI
``device="mixed"`` and against jaxdali's host decode, in images/s and GPU memory.

Needs a CUDA device (``jax[cuda12]`` and DALI's CUDA build); it refuses to run without one. Each
measurement runs in its own process (so GPU memory is each system's own), the systems interleaved
round by round; the report gives the median images/s per system, its ratio to DALI's, and the GPU
memory each process held after its run (``nvidia-smi``). JAX is told not to preallocate.

    python benchmarks/gpu_decode.py --data /path/to/imagenet/val --batch-size 128 --iterations 50

``--data``: a folder of JPEGs in class subfolders (``fn.readers.file`` layout), e.g. ImageNet's.
Each pipeline reads, decodes a random crop (``decoders.image_random_crop``) and returns the ragged
batch on the device; the timed loop waits for every image to be ready.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SYSTEMS = ("jaxdali-mixed", "dali-mixed", "jaxdali-host")
RESULT = "GPU_DECODE_RESULT "


def _gpu_memory_mib(pid: int) -> int | None:
    """GPU memory (MiB) process ``pid`` holds, as nvidia-smi reports it; None where it cannot tell."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for line in out.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 2 and fields[0] == str(pid):
            return int(fields[1])
    return None


def _jaxdali_run(args, gpu: bool):
    import jax

    from jaxdali import config, fn, pipeline_def
    from jaxdali.ops import gpu_decode

    config.update("gpu_decode", "auto" if gpu else "off")
    if gpu and gpu_decode.decode_status(0)[0] != "gpu":
        sys.exit(f"jaxdali cannot decode on the GPU here: {gpu_decode.decode_status(0)[1]}")

    @pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=0, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=args.data, random_shuffle=True, name="reader")
        return fn.decoders.image_random_crop(jpegs, device="mixed")

    p = pipe()
    p.build()

    def step():
        (images,) = p.run()
        jax.block_until_ready(images.samples())

    return step


def _dali_run(args):
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=args.batch_size, num_threads=args.threads, device_id=0, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=args.data, random_shuffle=True, name="reader")
        return fn.decoders.image_random_crop(jpegs, device="mixed")

    p = pipe()
    p.build()

    def step():
        (images,) = p.run()  # DALI returns outputs that are ready on its stream
        del images

    return step


def child(args) -> None:
    """Runs one system: warm-up, then ``iterations`` timed batches; prints one result line."""
    step = _dali_run(args) if args.system == "dali-mixed" else _jaxdali_run(args, args.system == "jaxdali-mixed")
    for _ in range(args.warmup):
        step()
    start = time.perf_counter()
    for _ in range(args.iterations):
        step()
    seconds = time.perf_counter() - start
    print(RESULT + json.dumps({"system": args.system, "images_per_s": args.batch_size * args.iterations / seconds,
                               "gpu_memory_mib": _gpu_memory_mib(os.getpid())}), flush=True)


def _require_cuda() -> None:
    import jax

    if not any(d.platform == "gpu" for d in jax.local_devices()):
        sys.exit("benchmarks/gpu_decode.py needs a CUDA device (jax[cuda12]); JAX sees only "
                 f"{jax.local_devices()}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="folder of JPEGs in class subfolders (e.g. ImageNet val)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--system", choices=SYSTEMS, help=argparse.SUPPRESS)  # child mode
    args = parser.parse_args(argv)
    if args.system is not None:
        child(args)
        return
    _require_cuda()
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    results: dict[str, list[dict]] = {s: [] for s in SYSTEMS}
    for _ in range(args.rounds):
        for system in SYSTEMS:
            command = [sys.executable, __file__, "--system", system] + [
                a for a in (argv if argv is not None else sys.argv[1:])]
            out = subprocess.run(command, env=env, capture_output=True, text=True)
            lines = [line for line in out.stdout.splitlines() if line.startswith(RESULT)]
            if out.returncode != 0 or not lines:
                sys.exit(f"{system} failed ({out.returncode}):\n{out.stderr[-4000:]}")
            results[system].append(json.loads(lines[-1][len(RESULT):]))
    import jax

    print(f"device: {jax.local_devices()[0].device_kind}; batch {args.batch_size}, {args.threads} threads, "
          f"{args.iterations} batches x {args.rounds} rounds, data {args.data}")
    dali = statistics.median(r["images_per_s"] for r in results["dali-mixed"])
    print(f"{'system':<16}{'images/s':>12}{'vs DALI':>10}{'GPU MiB':>10}")
    for system, runs in results.items():
        rate = statistics.median(r["images_per_s"] for r in runs)
        memory = [r["gpu_memory_mib"] for r in runs if r["gpu_memory_mib"] is not None]
        print(f"{system:<16}{rate:>12.0f}{rate / dali:>10.2f}{(max(memory) if memory else float('nan')):>10.0f}")


if __name__ == "__main__":
    main()
