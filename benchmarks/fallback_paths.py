"""What the fallbacks cost: resize with the compiled kernel against its NumPy path, and decode with
nvImageCodec against the OpenCV backend, on the shared flower photos, in one process.

Both switches are config options read at each call (``disable_kernel``, ``decoder``), so the same
pipeline runs both ways; the runs are interleaved (A, B, A, B, ...) and the medians reported in ms per
batch. Run with jaxdali's interpreter: ``python benchmarks/fallback_paths.py [--batch-size 64]``.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time

import numpy as np

from jaxdali import config, fn, pipeline_def, types

DATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data" / "flowers"


def _timed(pipe, option: str, value, reps: int) -> list[float]:
    config.update(option, value)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        pipe.run()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def compare(pipe, option: str, a, b, rounds: int, reps: int) -> dict:
    """Median ms per batch of ``pipe`` with ``option`` = a and = b, interleaved ``rounds`` times."""
    previous = config.get(option)
    _timed(pipe, option, a, 1), _timed(pipe, option, b, 1)  # warm-up: threads, caches, decoders
    times: dict = {a: [], b: []}
    for _ in range(rounds):
        for value in (a, b):
            times[value] += _timed(pipe, option, value, reps)
    config.update(option, previous)
    return {value: statistics.median(t) for value, t in times.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    files = [str(p) for p in sorted(DATA.glob("*/*.jpg"))][: args.batch_size]
    decoded = [np.asarray(x) for x in _decode_all(files, args.threads)]

    @pipeline_def(batch_size=len(files), num_threads=args.threads, device_id=None, seed=0)
    def resize_pipe():
        images = fn.external_source(source=lambda: decoded, batch=True)
        return fn.resize(images, resize_x=224, resize_y=224), fn.resize(images, resize_shorter=256,
                                                                          interp_type=types.INTERP_CUBIC)

    @pipeline_def(batch_size=len(files), num_threads=args.threads, device_id=None, seed=0)
    def decode_pipe():
        jpegs, _ = fn.readers.file(files=files)
        return fn.decoders.image(jpegs), fn.decoders.image_random_crop(jpegs)

    for name, make, option, a, b in (("resize (224x224 linear + shorter 256 cubic)", resize_pipe, "disable_kernel",
                                      False, True),
                                     ("decode (full + random crop)", decode_pipe, "decoder", "nvimgcodec", "opencv")):
        pipe = make()
        pipe.build()
        result = compare(pipe, option, a, b, args.rounds, 3)
        pipe.close()
        print(f"{name}, batch {len(files)}, {args.threads} threads: {option}={a}: {result[a]:.1f} ms/batch, "
              f"{option}={b}: {result[b]:.1f} ms/batch, ratio {result[b] / result[a]:.2f}")


def _decode_all(files: list[str], threads: int):
    @pipeline_def(batch_size=len(files), num_threads=threads, device_id=None, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=files)
        return fn.decoders.image(jpegs)

    p = pipe()
    p.build()
    (batch,) = p.run()
    p.close()
    return [batch.at(i) for i in range(len(batch))]


if __name__ == "__main__":
    main()
