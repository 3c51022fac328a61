"""Runs the train and val pipelines through jaxdali and its rivals, interleaved, and prints a report.

    python benchmarks/run.py [--data DIR] [--reps N] [--systems jaxdali,jaxdali-run,dali,grain,torch]
    python benchmarks/run.py --systems forms,dali   # every way of writing the jaxdali pipeline
                             [--dali-python PY] [--grain-python PY] [--torch-python PY]

Every repetition of every (pipeline, system) runs in a fresh process, in the order
``train: raw A B C D, val: raw A B C D`` in the first repetition, ``B C D A`` in the second, and so on
(raw: the raw per-image work, see rawwork.py), so slow drifts of a shared machine spread over all
systems and no system always runs first. Rivals run under their own interpreters (``--dali-python`` or the environment variable
named in ``--help``; default: this interpreter, if it can import them); a rival that cannot be
found is skipped with the command that installs it. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

import harness
import report

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "flowers"


@dataclasses.dataclass(frozen=True)
class System:
    """A loader to measure: the module that runs it, the interpreter it needs, how to install it."""

    name: str
    script: str
    extra_args: tuple[str, ...] = ()
    interpreter_option: str | None = None  # None: this interpreter (jaxdali's)
    requires: tuple[str, ...] = ()
    install_hint: str = ""
    env: tuple[tuple[str, str], ...] = ()  # set in the child's environment
    pipelines: tuple[str, ...] = ("train", "val")  # the pipelines it is measured on

    @property
    def env_var(self) -> str | None:
        if self.interpreter_option is None:
            return None
        return "JAXDALI_BENCH_" + self.interpreter_option.upper() + "_PYTHON"


_DALI_HINT = ("python -m venv /tmp/dalienv && /tmp/dalienv/bin/pip install nvidia-dali-cuda120 jax, "
              "then --dali-python /tmp/dalienv/bin/python")
SYSTEMS = {s.name: s for s in (
    System("jaxdali", "bench_jaxdali.py", requires=("jax", "jaxdali")),
    System("jaxdali-run", "bench_jaxdali.py", ("--variant", "run"), requires=("jax", "jaxdali")),
    System("dali", "bench_dali.py", interpreter_option="dali", requires=("nvidia.dali",), install_hint=_DALI_HINT),
    System("dali-run", "bench_dali.py", ("--variant", "run"), interpreter_option="dali", requires=("nvidia.dali",),
           install_hint=_DALI_HINT),
    # train written with fn.decoders.image + fn.random_resized_crop (DALI decodes each whole image then).
    System("dali-rrc", "bench_dali.py", ("--crop", "random_resized_crop"), interpreter_option="dali",
           requires=("nvidia.dali",), install_hint=_DALI_HINT, pipelines=("train",)),
    System("grain", "bench_grain.py", interpreter_option="grain", requires=("grain", "cv2", "numpy"),
           install_hint="python -m venv /tmp/grainenv && /tmp/grainenv/bin/pip install grain opencv-python-headless, "
                        "then --grain-python /tmp/grainenv/bin/python"),
    System("torch", "bench_torch.py", interpreter_option="torch", requires=("torch", "torchvision"),
           install_hint="python -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch==2.14.1 "
                        "torchvision==0.29.1 (a matching pair), then --torch-python /tmp/torchenv/bin/python"),
)}
DEFAULT_SYSTEMS = "jaxdali,jaxdali-run,dali,grain,torch"

_EIGHT_DEVICES = (("XLA_FLAGS", "--xla_force_host_platform_device_count=8"),)
#: The same images written the other ways users write them (bench_jaxdali.py's options): each row
#: should be within a few % of the fastest equivalent one. ``--systems forms`` runs them all.
FORM_SYSTEMS = {s.name: s for s in (
    System("jaxdali-8dev", "bench_jaxdali.py", requires=("jax", "jaxdali"), env=_EIGHT_DEVICES),
    System("jaxdali-8dev-hwc", "bench_jaxdali.py", ("--layout", "HWC"), requires=("jax", "jaxdali"),
           env=_EIGHT_DEVICES),
    System("jaxdali-8dev-pmap", "bench_jaxdali.py", ("--form", "data_iterator-devices"), requires=("jax", "jaxdali"),
           env=_EIGHT_DEVICES),
    System("jaxdali-hwc", "bench_jaxdali.py", ("--layout", "HWC"), requires=("jax", "jaxdali")),
    System("jaxdali-generic", "bench_jaxdali.py", ("--form", "generic"), requires=("jax", "jaxdali")),
    System("jaxdali-generic-hwc", "bench_jaxdali.py", ("--form", "generic", "--layout", "HWC"),
           requires=("jax", "jaxdali")),
    System("jaxdali-generic-built", "bench_jaxdali.py", ("--form", "generic-built"), requires=("jax", "jaxdali")),
    System("jaxdali-files", "bench_jaxdali.py", ("--source", "files"), requires=("jax", "jaxdali")),
    System("jaxdali-file-list", "bench_jaxdali.py", ("--source", "file_list"), requires=("jax", "jaxdali")),
    System("jaxdali-interp", "bench_jaxdali.py", ("--explicit-interp",), requires=("jax", "jaxdali")),
    System("jaxdali-rrc", "bench_jaxdali.py", ("--crop", "random_resized_crop"), requires=("jax", "jaxdali"),
           pipelines=("train",)),
    # The PyTorch adapter: the same pipeline's host outputs as torch tensors (jaxdali's interpreter with torch).
    System("jaxdali-torch", "bench_jaxdali.py", ("--form", "torch"), requires=("jax", "jaxdali", "torch")),
    # 2 local processes x 4 devices joined by jax.distributed, the same global batch: their images/s summed.
    System("jaxdali-2proc", "bench_multiprocess.py", ("--processes", "2", "--devices-per-process", "4"),
           requires=("jax", "jaxdali")),
)}
SYSTEMS.update(FORM_SYSTEMS)


def rep_order(systems: list[str], rep: int) -> list[str]:
    """The systems in repetition ``rep``'s order: rotated by one each repetition, so that none always runs
    first (the first process after another loader's, or after none, may run at another speed)."""
    k = rep % len(systems) if systems else 0
    return systems[k:] + systems[:k]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA),
                        help="ImageNet-style folder, one sub-folder per class (default: %(default)s)")
    parser.add_argument("--upscaled", action="store_true",
                        help="measure on ImageNet-size copies of --data (longer side 500 px, JPEG q90, written to "
                             "a temporary folder by upscaled.py)")
    parser.add_argument("--upscaled-quality", type=int, default=90,
                        help="JPEG quality of the --upscaled copies (default: %(default)s; 97 gives ~95 KB per file "
                             "from the flower photos, near ImageNet photos' ~100-110 KB: more entropy-coded data "
                             "per image)")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per system and pipeline (default: 5)")
    parser.add_argument("--systems", default=DEFAULT_SYSTEMS,
                        help=f"comma-separated, from {','.join(SYSTEMS)}, or forms (jaxdali and every jaxdali-* form row) "
                             "(default: %(default)s)")
    parser.add_argument("--pipelines", default="train,val", help="comma-separated (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="worker threads (DALI, jaxdali, Grain) or processes (PyTorch) (default: the cores)")
    parser.add_argument("--warmup", type=int, default=8, help="batches before the timed loop (default: 8)")
    parser.add_argument("--batches", type=int, default=64,
                        help="timed batches per repetition (default: 64, about 3 s: long enough for the load "
                             "swings of a shared machine to average out within a repetition)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds before a child is stopped")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw per-image work measurement")
    parser.add_argument("--raw-passes", type=int, default=2,
                        help="passes of the raw work per repetition; the fastest counts (default: 2)")
    for s in dict.fromkeys(s.interpreter_option for s in SYSTEMS.values() if s.interpreter_option):
        parser.add_argument(f"--{s}-python", default=None,
                            help=f"interpreter for {s} (or ${'JAXDALI_BENCH_' + s.upper() + '_PYTHON'}; "
                                 "default: this one, if it can import it)")
    parser.add_argument("--out", default=str(HERE / "results"),
                        help="folder for the results (.json with every record, .md report) (default: %(default)s)")
    args = parser.parse_args(argv)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if "forms" in args.systems:  # jaxdali's default row and every other way of writing it
        i = args.systems.index("forms")
        args.systems[i:i + 1] = [s for s in ("jaxdali", *FORM_SYSTEMS) if s not in args.systems]
    unknown = [s for s in args.systems if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {list(SYSTEMS)}")
    args.pipelines = [p.strip() for p in args.pipelines.split(",") if p.strip()]
    if any(p not in harness.PIPELINES for p in args.pipelines):
        parser.error(f"--pipelines must name {harness.PIPELINES}, got {args.pipelines}")
    if args.reps < 1:
        parser.error(f"--reps must be >= 1, got {args.reps}")
    return args


# -- interpreters -----------------------------------------------------------------------------------------

def _child_env(system: System | None) -> dict[str, str]:
    env = dict(os.environ) | dict(system.env if system is not None else ())
    if system is None or system.interpreter_option is None:
        # jaxdali children measure this checkout, installed or not.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def probe(python: str, modules: tuple[str, ...], system: System | None = None) -> str | None:
    """None if ``python`` imports ``modules``; otherwise why not."""
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
    try:
        done = subprocess.run([python, "-c", code, *modules], check=False, capture_output=True, text=True,
                              timeout=180, env=_child_env(system))
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{python}: {e}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["exit code " + str(done.returncode)])[-1]
        return f"{python} cannot import {', '.join(modules)}: {last}"
    return None


def find_interpreter(system: System, args: argparse.Namespace) -> tuple[str | None, str]:
    """(interpreter, "") or (None, why it is skipped and how to install it)."""
    if system.interpreter_option is None:
        why = probe(sys.executable, system.requires, system)
        return (sys.executable, "") if why is None else (None, why)
    given = getattr(args, f"{system.interpreter_option}_python") or os.environ.get(system.env_var or "")
    candidate = given or sys.executable
    why = probe(candidate, system.requires, system)
    if why is None:
        return candidate, ""
    return None, (f"{why}. Install: {system.install_hint} (or set ${system.env_var})")


# -- children ---------------------------------------------------------------------------------------------

def run_child(command: list[str], system: System | None, timeout: float) -> dict:
    """Runs one child; returns its result record, or ``{"error": ...}`` with the end of its output."""
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                              env=_child_env(system))
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return {"error": f"timed out after {timeout:.0f} s\n{out[-2000:]}"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(harness.RESULT_PREFIX):
            return json.loads(line[len(harness.RESULT_PREFIX):])
    tail = (done.stdout + "\n" + done.stderr).strip()[-3000:]
    return {"error": f"exit code {done.returncode} and no result line\n{tail}"}


def child_command(python: str, system: System, pipeline: str, args: argparse.Namespace) -> list[str]:
    return [python, str(HERE / system.script), "--pipeline", pipeline, "--data", args.data,
            "--batch-size", str(args.batch_size), "--threads", str(args.threads), "--warmup", str(args.warmup),
            "--batches", str(args.batches), "--seed", str(args.seed), *system.extra_args,
            "--launch-time", repr(time.time())]


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def describe_record(r: dict) -> str:
    if "error" in r:
        return "FAILED: " + r["error"].strip().splitlines()[-1][:160]
    if r["system"] == "raw":
        return (f"{r['one_thread_images_per_s']:.0f} img/s on one thread ({r['best_decoder']}), "
                f"{r['measured_images_per_s']:.0f} measured on {r['threads']} threads")
    shape = r["batch"]["shape"]
    return (f"{r['images_per_s']:6.0f} img/s  CPU {r['cpu_percent']:3.0f}%  TTFB {r['ttfb_s']:.2f} s  "
            f"import {r['import_s']:.2f} s  PSS {r['pss_bytes'] / 1e6:4.0f} MB  batch {shape} {r['batch']['dtype']}")


# -- metadata ---------------------------------------------------------------------------------------------

def _git(*cmd: str) -> str:
    try:
        done = subprocess.run(["git", *cmd], check=False, capture_output=True, text=True, cwd=REPO, timeout=30)
        return done.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _machine() -> str:
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    memory = ""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages / 2**30:.0f} GiB"
    except (ValueError, OSError):
        pass
    return f"{os.cpu_count()} cores ({model}){memory}, {platform.system()} {platform.release()}, " \
           f"Python {platform.python_version()}"


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def data_summary(root: str) -> str:
    samples = harness.list_images(root)
    classes = len({label for _, label in samples})
    size = sum(os.path.getsize(p) for p, _ in samples) / len(samples)
    return f"{len(samples)} images in {classes} classes, {size / 1e3:.0f} KB per file on average"


def commit_description() -> str:
    commit = _git("rev-parse", "--short", "HEAD") or "?"
    dirty = _git("status", "--porcelain", "--", "jaxdali")
    return commit + (" + uncommitted changes in jaxdali/" if dirty else "")


# -- main -------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not os.path.isdir(args.data):
        raise SystemExit(f"--data {args.data!r} is not a folder (an ImageNet-style folder: one sub-folder per class)")
    args.data = os.path.abspath(args.data)
    if args.upscaled:
        import tempfile

        import upscaled

        upscaled_dir = tempfile.TemporaryDirectory(prefix="jaxdali-bench-upscaled-")
        written = upscaled.write_upscaled(args.data, upscaled_dir.name, args.upscaled_quality)
        progress(f"{written} ImageNet-size copies of {args.data} (JPEG q{args.upscaled_quality}) "
                 f"in {upscaled_dir.name}")
        args.data = upscaled_dir.name
    started = time.time()
    notes = []
    interpreters: dict[str, str] = {}
    for name in args.systems:
        python, why = find_interpreter(SYSTEMS[name], args)
        if python is None:
            progress(f"skipping {name}: {why}")
            notes.append(f"{name} was skipped: {why}")
        else:
            interpreters[name] = python
    systems = [s for s in args.systems if s in interpreters]
    meta = {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "commit": commit_description(),
        "machine": _machine(),
        "data": args.data,
        "data_summary": data_summary(args.data),
        "batch_size": args.batch_size,
        "threads": args.threads,
        "reps": args.reps,
        "warmup": args.warmup,
        "raw_passes": args.raw_passes,
        "batches": args.batches,
        "pipelines": args.pipelines,
        "systems": systems,
        "interpreters": interpreters,
        "loadavg_before": _loadavg(),
        "notes": notes,
    }
    progress(f"{meta['machine']}\ncommit {meta['commit']}; data {args.data}: {meta['data_summary']}")
    records: list[dict] = []
    for rep in range(args.reps):
        for pipeline in args.pipelines:
            if not args.no_raw:
                command = [sys.executable, str(HERE / "rawwork.py"), "--pipeline", pipeline, "--data", args.data,
                           "--threads", str(args.threads), "--seed", str(args.seed), "--passes", str(args.raw_passes)]
                record = run_child(command, None, args.timeout)
                record["system"], record["pipeline"], record["rep"] = "raw", pipeline, rep
                records.append(record)
                progress(f"[rep {rep + 1}/{args.reps} {pipeline:5}] {'raw work':12} {describe_record(record)}")
            for name in rep_order(systems, rep):
                system = SYSTEMS[name]
                if pipeline not in system.pipelines:
                    continue
                record = run_child(child_command(interpreters[name], system, pipeline, args), system, args.timeout)
                record["system"], record["pipeline"], record["rep"] = name, pipeline, rep
                records.append(record)
                progress(f"[rep {rep + 1}/{args.reps} {pipeline:5}] {name:12} {describe_record(record)}")
                expected = [args.batch_size, 3, harness.OUTPUT_SIZE, harness.OUTPUT_SIZE]
                if "HWC" in system.extra_args:
                    expected = expected[:1] + expected[2:] + expected[1:2]
                if "error" not in record and (record["batch"]["shape"] != expected
                                              or record["batch"]["dtype"] != "float32"):
                    notes.append(f"{name} {pipeline}: batch {record['batch']} differs from {expected} float32")
    meta["loadavg_after"] = _loadavg()
    meta["seconds"] = round(time.time() - started)
    meta["notes"] = list(dict.fromkeys(notes))
    text = report.markdown(meta, records)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / ("results-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "records": records}, indent=1))
    stem.with_suffix(".md").write_text(text)
    print(text, end="")
    progress(f"{meta['seconds']} s in all; saved {stem}.json and .md")
    return 1 if any("error" in r for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
