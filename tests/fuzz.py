"""Seeded fuzzing of the image decoders with mutated real images.

    python -m tests.fuzz --cases 10000              # from the repository root; prints the outcome counts
    python -m tests.fuzz --show 1234                # what case 1234 is, and its outcome, in this process

Each case is one file: a real image from ``../shared/data`` (flowers, jpeg_variants, png) or a variant
of one written by PIL, OpenCV or ``jpegtran`` (16-bit PNG, CMYK JPEG, progressive and
arithmetic-coded JPEG, TIFF, BMP, WebP, JPEG 2000, PNM, GIF), changed by mutations drawn from the
case's own generator, ``numpy.random.default_rng([seed, case])``: truncation, byte flips in the
header or in the data, zero bytes, garbage, a wrong extension, a huge declared size, inserted,
deleted or zeroed bytes, or several of these. The case is read and decoded by ``fn.readers.file``
and ``fn.decoders.image`` or ``image_random_crop`` in a worker process, so a crash costs one case:

==========  ==================================================================================
outcome     meaning
==========  ==================================================================================
image       decoded: a uint8 HWC array of positive size
error       ImageDecodeError whose message names the file
bad_error   another exception, or an error that does not name the file
printed     something reached stdout or stderr (warnings are recorded, not printed)
crash       the worker process died (a segfault, an abort)
timeout     the case ran longer than ``--timeout`` seconds
==========  ==================================================================================

Only image and error are acceptable. Workers use ``max_image_pixels = 2**24`` so that declared
sizes around the limit stay quick to try.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import pathlib
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import numpy as np

DATA = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data"
GOOD_OUTCOMES = ("image", "error")
MAX_PIXELS = 1 << 24

MUTATIONS = ("none", "truncate", "flip_header", "flip_data", "zero", "garbage", "wrong_ext", "huge_size",
             "insert", "delete", "zero_range", "several")
_WEIGHTS = np.array([2, 14, 12, 14, 3, 5, 4, 10, 8, 8, 8, 12], float)
_WEIGHTS /= _WEIGHTS.sum()
_COMBINABLE = ("truncate", "flip_header", "flip_data", "huge_size", "insert", "delete", "zero_range")
_SIZES = [(65535, 65535), (16384, 16384), (4097, 4096), (8000, 8000), (3000, 3000), (1, 60000), (0, 100), (100, 0)]
_EXTS = ("jpg", "png", "tif", "bmp", "webp", "jp2", "ppm", "gif")


# -- the corpus -----------------------------------------------------------------------------------

def _small(img):
    from PIL import Image

    img = img.copy()
    img.thumbnail((192, 192), Image.BILINEAR)
    return img


def _encode(img, fmt: str, **kwargs) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kwargs)
    return buf.getvalue()


def _arithmetic(jpeg: bytes) -> bytes | None:
    """``jpeg`` re-coded with arithmetic coding by libjpeg-turbo's jpegtran, when it is installed."""
    tool = shutil.which("jpegtran")
    if tool is None:
        return None
    done = subprocess.run([tool, "-arithmetic"], input=jpeg, capture_output=True, check=False)
    return done.stdout if done.returncode == 0 and done.stdout else None


def corpus() -> list[tuple[str, str, bytes]]:
    """(name, extension, bytes) of every base image: real files, then variants written here."""
    import cv2
    from PIL import Image

    if not DATA.is_dir():
        raise FileNotFoundError(f"the shared test images are not at {DATA}")
    real = sorted((DATA / "flowers").rglob("*.jpg"))[::8] + sorted((DATA / "jpeg_variants").rglob("*.jpg")) + \
        sorted((DATA / "png").glob("*.png"))
    bases = [(p.name, p.suffix[1:], p.read_bytes()) for p in real]
    photo = _small(Image.open(real[0]).convert("RGB"))
    rgba = _small(Image.open(next(p for p in real if p.suffix == ".png")).convert("RGBA"))
    variants = {
        "cmyk.jpg": _encode(photo.convert("CMYK"), "JPEG", quality=90),
        "progressive.jpg": _encode(photo, "JPEG", quality=90, progressive=True),
        "gray.jpg": _encode(photo.convert("L"), "JPEG", quality=90),
        "rgba.png": _encode(rgba, "PNG"),
        "palette.png": _encode(photo.convert("P"), "PNG"),
        "photo.tif": _encode(photo, "TIFF"),
        "deflate.tif": _encode(photo, "TIFF", compression="tiff_adobe_deflate"),
        "photo.bmp": _encode(photo, "BMP"),
        "lossy.webp": _encode(photo, "WEBP", quality=80),
        "lossless.webp": _encode(rgba, "WEBP", lossless=True),
        "photo.ppm": _encode(photo, "PPM"),
        "photo.gif": _encode(photo, "GIF"),
        "deep.png": cv2.imencode(".png", (np.asarray(photo).astype(np.uint16) * 257)[:, :, ::-1])[1].tobytes(),
        "photo.jp2": cv2.imencode(".jp2", np.asarray(photo)[:, :, ::-1])[1].tobytes(),
    }
    arithmetic = _arithmetic(variants["progressive.jpg"])
    if arithmetic is not None:
        variants["arithmetic.jpg"] = arithmetic
    return bases + [(name, name.rsplit(".", 1)[1], data) for name, data in variants.items()]


# -- mutations --------------------------------------------------------------------------------------

def _flip(data: bytearray, rng, lo: int, hi: int, count: int) -> None:
    if hi <= lo:
        return
    for pos in rng.integers(lo, hi, count):
        data[pos] ^= int(rng.integers(1, 256))


def _declare_size(data: bytes, width: int, height: int) -> bytes | None:
    """``data`` with its JPEG frame header or PNG IHDR declaring width x height; None for other formats."""
    out = bytearray(data)
    if data[:2] == b"\xff\xd8":
        for marker in (b"\xff\xc0", b"\xff\xc1", b"\xff\xc2", b"\xff\xc9", b"\xff\xca"):
            at = out.find(marker)
            if at > 0:
                out[at + 5:at + 9] = struct.pack(">HH", min(height, 65535), min(width, 65535))
                return bytes(out)
        return None
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        out[16:24] = struct.pack(">II", width, height)  # the CRC is left stale: a second defect
        return bytes(out)
    return None


def mutate(data: bytes, ext: str, kind: str, rng) -> tuple[bytes, str, str]:
    """(bytes, extension, description) of ``data`` after the mutation ``kind``."""
    n = len(data)
    out = bytearray(data)
    if kind == "none":
        return data, ext, "unchanged"
    if kind == "truncate":
        cut = int(rng.integers(1, max(2, n)))
        return data[:cut], ext, f"truncated to {cut} of {n} bytes"
    if kind == "flip_header":
        count = int(rng.integers(1, 9))
        _flip(out, rng, 0, min(n, 1024), count)
        return bytes(out), ext, f"{count} bytes flipped in the first 1024"
    if kind == "flip_data":
        count = int(rng.integers(1, 17))
        _flip(out, rng, n // 2, n, count)
        return bytes(out), ext, f"{count} bytes flipped in the second half"
    if kind == "zero":
        return b"", ext, "empty"
    if kind == "garbage":
        size = int(rng.integers(1, 4096))
        prefix = [b"", b"\xff\xd8\xff\xe0", b"\x89PNG\r\n\x1a\n", b"II*\x00", b"RIFF\x00\x00\x00\x00WEBP"][
            int(rng.integers(0, 5))]
        return prefix + rng.integers(0, 256, size, dtype=np.uint8).tobytes(), ext, f"{size} random bytes after " \
            f"{prefix!r}"
    if kind == "wrong_ext":
        other = _EXTS[int(rng.integers(0, len(_EXTS)))]
        return data, other, f"named .{other}"
    if kind == "huge_size":
        width, height = _SIZES[int(rng.integers(0, len(_SIZES)))]
        declared = _declare_size(data, width, height)
        if declared is not None:
            return declared, ext, f"declares {width} x {height}"
        return mutate(data, ext, "flip_header", rng)
    if kind == "insert":
        at, size = int(rng.integers(0, n + 1)), int(rng.integers(1, 256))
        return data[:at] + rng.integers(0, 256, size, dtype=np.uint8).tobytes() + data[at:], ext, \
            f"{size} bytes inserted at {at}"
    if kind == "delete":
        at = int(rng.integers(0, max(1, n)))
        size = int(rng.integers(1, 256))
        return data[:at] + data[at + size:], ext, f"{size} bytes deleted at {at}"
    if kind == "zero_range":
        at = int(rng.integers(0, max(1, n)))
        size = int(rng.integers(1, 1024))
        out[at:at + size] = bytes(len(out[at:at + size]))
        return bytes(out), ext, f"{size} bytes zeroed at {at}"
    assert kind == "several"
    steps = []
    for _ in range(int(rng.integers(2, 4))):
        step = _COMBINABLE[int(rng.integers(0, len(_COMBINABLE)))]
        data, ext, what = mutate(data, ext, step, rng)
        steps.append(what)
    return data, ext, "; ".join(steps)


def make_case(seed: int, case: int, bases) -> dict:
    """The file of case ``case``: its base, mutation, bytes, extension and the operator that decodes it."""
    rng = np.random.default_rng([seed, case])
    name, ext, data = bases[int(rng.integers(0, len(bases)))]
    kind = MUTATIONS[int(rng.choice(len(MUTATIONS), p=_WEIGHTS))]
    data, ext, what = mutate(data, ext, kind, rng)
    op = "image_random_crop" if rng.random() < 0.3 else "image"
    output_type = ("RGB", "RGB", "RGB", "GRAY", "ANY_DATA")[int(rng.integers(0, 5))]
    return {"case": case, "base": name, "mutation": kind, "what": what, "ext": ext, "data": data, "op": op,
            "output_type": output_type}


# -- one case, in a worker ----------------------------------------------------------------------------

def run_case(spec: dict, folder: str) -> dict:
    """Decodes the case's file through fn.readers.file; returns its outcome (without 'printed')."""
    from jaxdali import fn, pipeline_def, types
    from jaxdali.ops.decoders import ImageDecodeError

    path = os.path.join(folder, f"case{spec['case']}.{spec['ext']}")
    with open(path, "wb") as f:
        f.write(spec["data"])

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=spec["case"], prefetch_queue_depth=1)
    def pipe():
        encoded, _ = fn.readers.file(files=[path])
        return getattr(fn.decoders, spec["op"])(encoded, output_type=getattr(types, spec["output_type"]))

    result = {"outcome": "image", "detail": ""}
    p = pipe()
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            img = np.asarray(p.run()[0].as_cpu().at(0))
        if img.dtype != np.uint8 or img.ndim != 3 or min(img.shape) < 1:
            result = {"outcome": "bad_error", "detail": f"decoded to {img.dtype} {img.shape}"}
        else:
            result["detail"] = f"{img.shape}"
        if seen:
            result["warnings"] = sorted({w.category.__name__ for w in seen})
    except ImageDecodeError as e:
        result = {"outcome": "error" if path in str(e) else "bad_error", "detail": str(e).splitlines()[0][:300]}
    except Exception as e:  # noqa: BLE001 - every other exception is the finding
        result = {"outcome": "bad_error", "detail": f"{type(e).__name__}: {e}"[:300]}
    finally:
        p.close()
        os.unlink(path)
    return result


def _worker(seed: int, start: int, stop: int, step: int) -> None:
    """Runs cases start, start+step, ... < stop; reports 'start i' and a JSON result per case on the
    original stdout, while descriptors 1 and 2 point to a file that shows whether a case printed."""
    report = os.fdopen(os.dup(1), "w", buffering=1)
    noise = tempfile.TemporaryFile()
    os.dup2(noise.fileno(), 1)
    os.dup2(noise.fileno(), 2)
    sys.stdout = sys.stderr = open(noise.fileno(), "w", buffering=1, closefd=False)
    from jaxdali import config

    config.update("max_image_pixels", MAX_PIXELS)
    bases = corpus()
    with tempfile.TemporaryDirectory(prefix="jaxdali-fuzz-") as folder:
        run_case(make_case(seed, 0, bases), folder)  # imports and first-use messages are not a case's
        crash_at = int(os.environ.get("JAXDALI_FUZZ_CRASH_AT", "-1"))  # tests the harness's isolation
        for case in range(start, stop, step):
            report.write(f"start {case}\n")
            if case == crash_at:
                os.kill(os.getpid(), signal.SIGSEGV)
            before = os.fstat(noise.fileno()).st_size
            result = run_case(make_case(seed, case, bases), folder)
            after = os.fstat(noise.fileno()).st_size
            if after > before:
                text = os.pread(noise.fileno(), min(after - before, 300), before).decode("utf-8", "replace")
                result = {"outcome": "printed", "detail": text, "was": result["outcome"]}
            result["case"] = case
            report.write(json.dumps(result) + "\n")


# -- the driver ---------------------------------------------------------------------------------------

def _drive(seed: int, cases: range, timeout: float, results: dict, lock: threading.Lock) -> None:
    """Runs ``cases`` in worker processes, restarting a worker after a crash or a timeout."""
    todo = list(cases)
    while todo:
        args = [sys.executable, "-m", "tests.fuzz", "--worker", "--seed", str(seed), "--start", str(todo[0]),
                "--stop", str(todo[-1] + 1), "--step", str(cases.step)]
        repo = pathlib.Path(__file__).resolve().parents[1]
        proc = subprocess.Popen(args, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        running = None
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], timeout if running is not None else 600)
            if not ready:
                proc.kill()
                outcome = {"outcome": "timeout", "detail": f"more than {timeout} s"}
                break
            line = proc.stdout.readline()
            if not line:
                outcome = {"outcome": "crash", "detail": "worker died"}
                break
            if line.startswith("start "):
                running = int(line.split()[1])
                continue
            result = json.loads(line)
            with lock:
                results[result["case"]] = result
            todo.remove(result["case"])
            running = None
        proc.wait()
        if running is not None:
            with lock:
                results[running] = dict(outcome, case=running, detail=f"{outcome['detail']} (exit status "
                                                                       f"{proc.returncode})")
            todo.remove(running)
        elif todo:
            raise RuntimeError(f"a fuzz worker stopped outside a case (exit status {proc.returncode})")


def fuzz(cases: int, seed: int = 0, workers: int = 2, timeout: float = 60.0, first: int = 1) -> dict[int, dict]:
    """Runs cases ``first`` .. ``first + cases - 1``; returns {case: result}."""
    results: dict[int, dict] = {}
    lock = threading.Lock()
    stop = first + cases
    threads = [threading.Thread(target=_drive, args=(seed, range(first + k, stop, workers), timeout, results, lock))
               for k in range(min(workers, cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def summary(results: dict[int, dict]) -> dict:
    """Outcome counts, overall and per mutation kind, with up to 5 examples of each bad outcome."""
    counts = collections.Counter(r["outcome"] for r in results.values())
    by_warning = collections.Counter(w for r in results.values() for w in r.get("warnings", ()))
    bad = collections.defaultdict(list)
    for case, r in sorted(results.items()):
        if r["outcome"] not in GOOD_OUTCOMES and len(bad[r["outcome"]]) < 5:
            bad[r["outcome"]].append({"case": case, "detail": r["detail"]})
    return {"cases": len(results), "outcomes": dict(counts), "warnings": dict(by_warning), "bad_examples": dict(bad)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--first", type=int, default=1, help="index of the first case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds one case may take")
    parser.add_argument("--json", help="write every case's result here")
    parser.add_argument("--show", type=int, help="describe one case and run it in this process")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--stop", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--step", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.seed, args.start, args.stop, args.step)
        return 0
    if args.show is not None:
        spec = make_case(args.seed, args.show, corpus())
        print({k: v for k, v in spec.items() if k != "data"}, f"{len(spec['data'])} bytes")
        with tempfile.TemporaryDirectory() as folder:
            print(run_case(spec, folder))
        return 0
    start = time.perf_counter()
    results = fuzz(args.cases, args.seed, args.workers, args.timeout, args.first)
    report = summary(results)
    report["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(report, indent=2))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    return 0 if set(report["outcomes"]) <= set(GOOD_OUTCOMES) else 1


if __name__ == "__main__":
    sys.exit(main())
