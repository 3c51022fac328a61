"""fn.readers.numpy: records/s of jaxdali against DALI's CPU reader on a few thousand small .npy files.

Both read the same files with the same pipeline (the reader alone, batch 64, ``num_threads`` threads,
``device_id=None``), in one process, interleaved (see ``readers.py``). Two cases: whole arrays, and a
region of interest (the central half of each axis).

    python benchmarks/bench_readers_numpy.py                  # 4000 files of 32x32 float32
    python benchmarks/bench_readers_numpy.py --files 2000 --shape 8,64 --reps 7
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile

import numpy as np

sys.path[:0] = [str(pathlib.Path(__file__).resolve().parents[1]), str(pathlib.Path(__file__).resolve().parent)]
from readers import compare, report  # noqa: E402  (this checkout's jaxdali, then the shared harness)


def write_files(root: pathlib.Path, count: int, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(0)
    for k in range(count):
        np.save(root / f"{k:06d}.npy", rng.standard_normal(shape).astype(np.float32))


def loader(lib: str, root: str, batch_size: int, threads: int, **reader_args):
    if lib == "dali":
        from nvidia.dali import fn, pipeline_def
    else:
        from jaxdali import fn, pipeline_def

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, prefetch_queue_depth=2)
    def p():
        return fn.readers.numpy(file_root=root, random_shuffle=True, **reader_args)

    pipe = p()
    pipe.build()

    def load() -> int:
        (data,) = pipe.run()
        return len(data)

    return load


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--shape", default="32,32")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args(argv)
    shape = tuple(int(s) for s in args.shape.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        write_files(pathlib.Path(tmp), args.files, shape)
        print(f"{args.files} files of {shape} float32, batch {args.batch_size}, {args.threads} threads, "
              f"{args.reps} interleaved repetitions of {args.batches} batches\n")
        cases = {"whole arrays": {}, "region (central half of each axis)": dict(rel_roi_start=[0.25] * len(shape),
                                                                                rel_roi_end=[0.75] * len(shape))}
        for title, reader_args in cases.items():
            loaders = {lib: loader(lib, tmp, args.batch_size, args.threads, **reader_args)
                       for lib in ("jaxdali", "dali")}
            cpu_rates: dict[str, list[float]] = {}
            rates = compare(loaders, batches=args.batches, reps=args.reps, warmup=args.warmup, cpu_rates=cpu_rates)
            print(report(f"fn.readers.numpy, {title}", rates, reference="dali", cpu_rates=cpu_rates) + "\n")


if __name__ == "__main__":
    main()
