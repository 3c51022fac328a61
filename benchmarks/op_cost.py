"""Per-operator CPU cost against DALI: ms per batch of each case in ``benchmarks/op_cost_*.py``.

Every ``op_cost_<family>.py`` module defines ``CASES = {name: builder}``; a builder is called as
``builder(fn, images)`` with ``nvidia.dali.fn`` and with ``jaxdali.fn`` inside a pipeline definition,
``images`` being an ``external_source`` of 32 decoded real photos (uint8 HWC, resized once in memory
to 500x375, about ImageNet's size). It returns the node(s) to compute; builders of non-image
operators may ignore ``images`` and make their own inputs; ``types_of(fn)`` gives the matching
``types`` module (``from op_cost import types_of``) for dtype arguments.

Both libraries run the same case in CPU-only pipelines (``device_id=None``) with the same thread
count; their repetitions are interleaved (DALI, jaxdali, DALI, jaxdali, ...) so both see the same
machine load, and each reports the median over repetitions of wall time and of the process's CPU
time (all threads; on a loaded machine the steadier measure of an operator's cost). A pipeline that
only feeds the photos (``feed``) is measured the same way, so the feeding cost can be read off both
columns.

    python benchmarks/op_cost.py                       # every case of every family
    python benchmarks/op_cost.py --only hue,cat --reps 7
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import pathlib
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
DATA = REPO.parent / "shared" / "data" / "flowers"
BATCH = 32
IMAGE_WIDTH, IMAGE_HEIGHT = 500, 375
FEED = "feed"

Builder = Callable[[Any, Any], Any]


def types_of(fn: Any) -> Any:
    """The ``types`` module of the library whose ``fn`` module is given (DALI's or jaxdali's)."""
    return importlib.import_module(fn.__name__.rsplit(".", 1)[0] + ".types")


def load_cases(only: set[str] | None = None) -> dict[str, tuple[str, Builder]]:
    """Every case of every ``op_cost_*.py`` module: name -> (family, builder); ``only`` filters by name."""
    if str(HERE) not in sys.path:  # the families import ``types_of`` from here
        sys.path.insert(0, str(HERE))
    cases: dict[str, tuple[str, Builder]] = {FEED: ("-", lambda fn, images: images)}
    for path in sorted(HERE.glob("op_cost_*.py")):
        family = path.stem[len("op_cost_"):]
        spec = importlib.util.spec_from_file_location(f"op_cost_{family}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, builder in module.CASES.items():
            if name in cases:
                raise ValueError(f"{path.name}: case {name!r} is also defined by family {cases[name][0]!r}")
            cases[name] = (family, builder)
    if only:
        unknown = only - set(cases)
        if unknown:
            raise SystemExit(f"--only: no such case(s) {sorted(unknown)}; known: {sorted(cases)}")
        cases = {k: v for k, v in cases.items() if k in only}
    return cases


def load_photos(root: pathlib.Path = DATA, count: int = BATCH) -> list[np.ndarray]:
    """``count`` real photos decoded to RGB uint8 HWC and resized to 500x375."""
    import cv2

    paths = sorted(root.rglob("*.jpg"))[:count]
    if len(paths) < count:
        raise SystemExit(f"need {count} photos under {root}, found {len(paths)}")
    photos = []
    for p in paths:
        bgr = cv2.imread(str(p), cv2.IMREAD_COLOR)
        rgb = cv2.cvtColor(cv2.resize(bgr, (IMAGE_WIDTH, IMAGE_HEIGHT), interpolation=cv2.INTER_AREA),
                           cv2.COLOR_BGR2RGB)
        photos.append(np.ascontiguousarray(rgb))
    return photos


def make_pipeline(lib: str, builder: Builder, photos: list[np.ndarray], threads: int):
    """A built CPU pipeline of ``lib`` ("dali" or "jaxdali") running ``builder`` over the photos."""
    if lib == "dali":
        from nvidia.dali import fn, pipeline_def
    else:
        from jaxdali import fn, pipeline_def

    @pipeline_def(batch_size=len(photos), num_threads=threads, device_id=None, seed=1234,
                  prefetch_queue_depth=1)
    def graph():
        images = fn.external_source(source=lambda: photos, batch=True, layout="HWC")
        out = builder(fn, images)
        return tuple(out) if isinstance(out, (list, tuple)) else out

    pipe = graph()
    pipe.build()
    return pipe


def time_batches(pipe, batches: int) -> tuple[float, float]:
    """(wall, CPU) milliseconds per batch over ``batches`` runs of ``pipe``."""
    start, start_cpu = time.perf_counter(), time.process_time()
    for _ in range(batches):
        pipe.run()
    return ((time.perf_counter() - start) * 1000.0 / batches, (time.process_time() - start_cpu) * 1000.0 / batches)


def measure(cases: dict[str, tuple[str, Builder]], photos: list[np.ndarray], *, reps: int, batches: int,
            warmup: int, threads: int, libs: tuple[str, ...] = ("dali", "jaxdali")) -> list[dict]:
    """One row per case: median wall and CPU ms/batch per library over ``reps`` interleaved repetitions."""
    rows = []
    for name, (family, builder) in cases.items():
        row: dict[str, Any] = {"case": name, "family": family}
        pipes = {}
        for lib in libs:
            try:
                pipes[lib] = make_pipeline(lib, builder, photos, threads)
                for _ in range(warmup):
                    pipes[lib].run()
            except Exception as e:  # a case one library cannot build is reported, not fatal
                row[f"{lib}_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        times: dict[str, list[tuple[float, float]]] = {lib: [] for lib in pipes}
        for _ in range(reps):
            for lib, pipe in list(pipes.items()):
                try:
                    times[lib].append(time_batches(pipe, batches))
                except Exception as e:  # DALI reports some errors batches later (prefetching)
                    row[f"{lib}_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
                    del pipes[lib], times[lib]
        for lib, values in times.items():
            row[f"{lib}_ms"] = statistics.median(wall for wall, _ in values)
            row[f"{lib}_cpu_ms"] = statistics.median(cpu for _, cpu in values)
        if "dali_ms" in row and "jaxdali_ms" in row:
            row["ratio"] = row["jaxdali_ms"] / row["dali_ms"]
            row["cpu_ratio"] = row["jaxdali_cpu_ms"] / max(row["dali_cpu_ms"], 1e-9)
        rows.append(row)
        del pipes
    return rows


def report(rows: list[dict]) -> str:
    """A markdown table: case, family, wall and CPU ms/batch in each library and jaxdali ÷ DALI."""
    lines = ["| case | family | DALI ms/batch | jaxdali ms/batch | jaxdali ÷ DALI | DALI CPU ms | jaxdali CPU ms | "
             "CPU ratio |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cells = []
        for key in ("dali_ms", "jaxdali_ms", "ratio", "dali_cpu_ms", "jaxdali_cpu_ms", "cpu_ratio"):
            lib = key.split("_")[0]
            cells.append(f"{r[key]:.2f}" if key in r else
                         (f"error: {r[lib + '_error']}" if key.endswith("ms") and lib + "_error" in r else "-"))
        lines.append(f"| {r['case']} | {r['family']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def family_summary(rows: list[dict]) -> str:
    """A markdown table per family: cases with a CPU ratio, their geometric mean and how many exceed 1.0.

    Cases DALI cannot run on the CPU (no ratio) and the ``feed`` row are left out.
    """
    ratios: dict[str, list[float]] = {}
    for r in rows:
        if r["family"] != "-" and "cpu_ratio" in r:
            ratios.setdefault(r["family"], []).append(r["cpu_ratio"])
    lines = ["| family | cases | jaxdali ÷ DALI CPU, geometric mean | cases > 1.0 | worst case |",
             "|---|---:|---:|---:|---|"]
    for family, values in sorted(ratios.items()):
        worst = max((r for r in rows if r["family"] == family and "cpu_ratio" in r), key=lambda r: r["cpu_ratio"])
        geomean = math.exp(sum(math.log(v) for v in values) / len(values))
        lines.append(f"| {family} | {len(values)} | {geomean:.2f} | {sum(v > 1.0 for v in values)} | "
                     f"{worst['case']} {worst['cpu_ratio']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated case names (default: every case)")
    parser.add_argument("--reps", type=int, default=5, help="interleaved repetitions (median reported)")
    parser.add_argument("--batches", type=int, default=5, help="timed batches per repetition")
    parser.add_argument("--warmup", type=int, default=2, help="untimed batches before the first repetition")
    parser.add_argument("--threads", type=int, default=2, help="worker threads of both libraries")
    parser.add_argument("--libs", default="dali,jaxdali", help="libraries to run (dali, jaxdali)")
    parser.add_argument("--data", default=str(DATA), help="folder of .jpg photos")
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))  # this checkout's jaxdali
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    cases = load_cases(only)
    photos = load_photos(pathlib.Path(args.data))
    rows = measure(cases, photos, reps=args.reps, batches=args.batches, warmup=args.warmup,
                   threads=args.threads, libs=tuple(args.libs.split(",")))
    print(f"batch {BATCH} photos {IMAGE_WIDTH}x{IMAGE_HEIGHT} uint8 HWC, {args.threads} threads, "
          f"median of {args.reps} interleaved repetitions x {args.batches} batches")
    print(report(rows))
    print()
    print(family_summary(rows))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
