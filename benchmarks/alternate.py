"""Every way of writing the jaxdali pipeline, in ONE process, taking turns: ratios the machine's drift cannot move.

``run.py`` times each form in a fresh process, one after another; on a shared machine the speed
available to a process drifts by 10-20 % within minutes, which is more than the differences between
forms. Here all forms are built in one process (8 simulated CPU devices; the 1-device forms use the
first) and take turns: each round gives every form a block of ``--batches`` batches (after
``--refill`` untimed ones that replace what it prefetched while it waited and bring the pool of
recycled host buffers, ``jaxdali.core.buffers``, back to its steady state: the other forms'
allocations age a waiting form's buffers out), in an order that reverses every other round. A form
is compared with the reference form (the first) round by round, so the machine's drift, slow against
one round, cancels out of the ratios.

``python benchmarks/alternate.py --data DIR [--pipelines train,val] [--forms ...] [--rounds 8]``

Per form: images/s (wall clock over its blocks), CPU-ms per batch (the whole process, XLA's threads
included), and the median over the rounds of its images/s and CPU ratios to the reference form. The
forms' idle worker threads wait on their prefetch queues and cost nothing while another form runs.
Prints a Markdown report and saves it with the JSON records under ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import statistics
import sys
import time

import harness

# Before jax is imported: the 8-device forms need 8 devices; a form over fewer takes the first ones.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


@dataclasses.dataclass(frozen=True)
class Form:
    """One way of writing the pipeline (``bench_jaxdali.py``'s options) over ``devices`` devices."""

    name: str
    iterator: str = "data_iterator"
    devices: int = 1
    layout: str = "CHW"
    source: str = "file_root"
    explicit_interp: bool = False
    crop: str = "decoder"


FORMS = {f.name: f for f in (
    Form("1dev"),
    Form("8dev", devices=8),
    Form("8dev-pmap", "data_iterator-devices", devices=8),
    Form("1dev-hwc", layout="HWC"),
    Form("8dev-hwc", devices=8, layout="HWC"),
    Form("generic", "generic"),
    Form("generic-built", "generic-built"),
    Form("files", source="files"),
    Form("file-list", source="file_list"),
    Form("interp", explicit_interp=True),
    Form("rrc", crop="random_resized_crop"),
)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="ImageNet-style folder: one sub-folder of images per class")
    parser.add_argument("--pipelines", default="train,val")
    parser.add_argument("--forms", default=",".join(FORMS),
                        help=f"comma-separated, the first is the reference; from {','.join(FORMS)}")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--batches", type=int, default=16, help="timed batches per form and round")
    parser.add_argument("--refill", type=int, default=8,
                        help="untimed batches before each timed block: the prefetched batches, and the batches "
                             "that re-fill the pool of recycled host buffers the other forms' allocations aged out")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parent / "results"),
                        help="folder for the JSON and Markdown results (default: benchmarks/results, as run.py's)")
    args = parser.parse_args(argv)
    args.pipelines = args.pipelines.split(",")
    args.forms = args.forms.split(",")
    unknown = [f for f in args.forms if f not in FORMS] + [p for p in args.pipelines if p not in harness.PIPELINES]
    if unknown:
        parser.error(f"unknown forms or pipelines {unknown}")
    if min(args.rounds, args.batches) < 1 or args.refill < 0:
        parser.error("--rounds and --batches must be >= 1, --refill >= 0")
    return args


def measure_pipeline(args: argparse.Namespace, pipeline: str) -> list[dict]:
    """Builds every form of ``pipeline``, lets them take turns, and returns one record per form."""
    import dali_api
    import jax
    from bench_jaxdali import iterator_loader

    from jaxdali import fn, types

    child = harness.ChildArgs(pipeline=pipeline, data=args.data, batch_size=args.batch_size, threads=args.threads,
                              warmup=args.refill, batches=args.batches, seed=args.seed, launch_time=time.time())
    loaders, shapes = {}, {}
    for name in args.forms:
        form = FORMS[name]
        graph = dali_api.graph(pipeline, fn, types, form.layout, form.source, form.explicit_interp, form.crop)
        loaders[name] = iterator_loader(form.iterator, graph, child, jax.devices()[:form.devices])
        images = loaders[name]()
        shapes[name] = [int(d) for d in images.shape]
    wall = {name: [] for name in args.forms}
    cpu = {name: [] for name in args.forms}
    for r in range(args.rounds):
        for name in args.forms if r % 2 == 0 else args.forms[::-1]:
            next_batch = loaders[name]
            for _ in range(args.refill):
                next_batch()
            cpu_before, start = time.process_time(), time.perf_counter()
            for _ in range(args.batches):
                next_batch()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - cpu_before)
    reference = args.forms[0]
    images = args.batches * args.batch_size
    return [{
        "pipeline": pipeline, "form": name, **dataclasses.asdict(FORMS[name]), "batch_shape": shapes[name],
        "images_per_s": [images / w for w in wall[name]],
        "cpu_ms_per_batch": [1e3 * c / args.batches for c in cpu[name]],
        "images_per_s_ratio": [ref / w for w, ref in zip(wall[name], wall[reference])],
        "cpu_ratio": [c / ref for c, ref in zip(cpu[name], cpu[reference])],
    } for name in args.forms]


def _spread(values: list[float], digits: int) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def report(args: argparse.Namespace, records: list[dict]) -> str:
    lines = [f"Measured {datetime.datetime.now():%Y-%m-%d %H:%M} in one process: {args.rounds} rounds × "
             f"{args.batches} timed batches of {args.batch_size} per form (after {args.refill} untimed), "
             f"{args.threads} threads, {os.cpu_count()} cores. Data: `{args.data}`. Reference form: "
             f"`{args.forms[0]}`; ratios are medians of the per-round ratios.", ""]
    for pipeline in args.pipelines:
        lines += [f"**{pipeline}**", "",
                  "| form | batch | images/s, median (min–max) | ÷ reference, images/s | CPU-ms per batch | "
                  "CPU ÷ reference |", "|---|---|---:|---:|---:|---:|"]
        for r in (r for r in records if r["pipeline"] == pipeline):
            lines.append(f"| {r['form']} | {r['batch_shape']} | {_spread(r['images_per_s'], 0)} | "
                         f"{_spread(r['images_per_s_ratio'], 3)} | {_spread(r['cpu_ms_per_batch'], 1)} | "
                         f"{_spread(r['cpu_ratio'], 3)} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.perf_counter()
    records = [r for pipeline in args.pipelines for r in measure_pipeline(args, pipeline)]
    text = report(args, records)
    print(text)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"alternate-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    stem.with_suffix(".json").write_text(json.dumps({"args": vars(args), "records": records}, indent=1))
    stem.with_suffix(".md").write_text(text + "\n")
    print(f"{time.perf_counter() - started:.0f} s in all; saved {stem}.json and .md", file=sys.stderr)


if __name__ == "__main__":
    main()
