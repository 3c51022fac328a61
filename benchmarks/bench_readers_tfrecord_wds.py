"""Records/s of fn.readers.tfrecord and fn.readers.webdataset against their rivals, in one process.

Builds a few thousand small records (thumbnails of the shared photos, re-encoded as ~2-4 KB JPEGs, plus
an int label) once as TFRecord files with index files and once as WebDataset tar shards with index
files, then times, interleaved repetition by repetition:

* TFRecord: jaxdali ``fn.readers.tfrecord`` vs DALI's (CPU pipeline), both ``Pipeline.run()``;
* tar shards: jaxdali ``fn.readers.webdataset`` vs DALI's vs the ``webdataset`` package
  (``WebDataset(urls).to_tuple("jpg", "cls")``, iterated in the main thread).

Every system delivers the same raw bytes per record (no decoding). Batch ``--batch-size`` (64),
``--threads`` worker threads. Prints a markdown table (median records/s over the repetitions, min-max, ratio to jaxdali).

    python benchmarks/bench_readers_tfrecord_wds.py [--records 4000] [--reps 5] [--batches 125] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import io
import os
import pathlib
import statistics
import sys
import tarfile
import tempfile
import time
import warnings
from typing import Callable


REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from jaxdali import fn, pipeline_def  # noqa: E402
from jaxdali import tfrecord as tfrec  # noqa: E402
from jaxdali.ops.readers import tfrecord_format as fmt  # noqa: E402
from jaxdali.tools import wds2idx  # noqa: E402

FILES = 4


def thumbnails(photo_root: pathlib.Path, count: int) -> list[tuple[bytes, int]]:
    """``count`` (small JPEG, label) pairs cycling over the photos of an ImageNet-style folder."""
    from PIL import Image

    classes = sorted(d.name for d in photo_root.iterdir() if d.is_dir())
    photos = [(p, label) for label, c in enumerate(classes) for p in sorted((photo_root / c).glob("*.jpg"))]
    small = []
    for path, label in photos:
        with Image.open(path) as im:
            im.thumbnail((48, 48))
            out = io.BytesIO()
            im.convert("RGB").save(out, "JPEG", quality=85)
        small.append((out.getvalue(), label))
    return [small[i % len(small)] for i in range(count)]


def write_datasets(records: list[tuple[bytes, int]], root: pathlib.Path) -> dict:
    per_file = -(-len(records) // FILES)
    tfr, tfr_idx, tars, tar_idx = [], [], [], []
    for k in range(FILES):
        part = records[k * per_file:(k + 1) * per_file]
        path = root / f"data-{k}.tfrecord"
        rows = fmt.write_tfrecord(str(path), [fmt.encode_example({"image/encoded": jpeg, "image/class/label": [label]})
                                              for jpeg, label in part])
        (root / f"data-{k}.idx").write_text(fmt.format_index(rows))
        tfr.append(str(path))
        tfr_idx.append(str(root / f"data-{k}.idx"))
        tar = root / f"shard-{k}.tar"
        with tarfile.open(tar, "w", format=tarfile.GNU_FORMAT) as t:
            for i, (jpeg, label) in enumerate(part):
                for ext, data in (("jpg", jpeg), ("cls", str(label).encode())):
                    info = tarfile.TarInfo(f"{k * per_file + i:07d}.{ext}")
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
        wds2idx.main([str(tar), str(root / f"shard-{k}.wdsidx")])
        tars.append(str(tar))
        tar_idx.append(str(root / f"shard-{k}.wdsidx"))
    return {"tfrecord": (tfr, tfr_idx), "tar": (tars, tar_idx)}


def _tfrecord_pipeline(lib: str, paths, indexes, threads: int, batch: int):
    if lib == "dali":
        from nvidia.dali import fn as lib_fn, pipeline_def as lib_def, tfrecord as lib_tfrec
    else:
        lib_fn, lib_def, lib_tfrec = fn, pipeline_def, tfrec

    @lib_def(batch_size=batch, num_threads=threads, device_id=None)
    def p():
        out = lib_fn.readers.tfrecord(path=paths, index_path=indexes, features={
            "image/encoded": lib_tfrec.FixedLenFeature((), lib_tfrec.string, ""),
            "image/class/label": lib_tfrec.FixedLenFeature([1], lib_tfrec.int64, -1)})
        return out["image/encoded"], out["image/class/label"]

    pipe = p()
    pipe.build()
    return pipe


def _wds_pipeline(lib: str, paths, indexes, threads: int, batch: int):
    if lib == "dali":
        from nvidia.dali import fn as lib_fn, pipeline_def as lib_def
    else:
        lib_fn, lib_def = fn, pipeline_def

    @lib_def(batch_size=batch, num_threads=threads, device_id=None)
    def p():
        image, label = lib_fn.readers.webdataset(paths=paths, index_paths=indexes, ext=["jpg", "cls"])
        return image, label

    pipe = p()
    pipe.build()
    return pipe


def _rates(records: int, start: float, cpu: float) -> tuple[float, float]:
    """(records per wall-clock second, records per CPU second of this process, all threads)."""
    return records / (time.perf_counter() - start), records / max(time.process_time() - cpu, 1e-9)


def pipeline_timer(pipe, batches: int, batch: int) -> Callable[[], tuple[float, float]]:
    for _ in range(5):
        pipe.run()  # warm-up: empties what was prefetched while building

    def timed() -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(batches):
            pipe.run()
        return _rates(batches * batch, start, cpu)

    return timed


def webdataset_timer(paths, records: int) -> Callable[[], tuple[float, float]]:
    import webdataset as wds

    def timed() -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        n = 0
        for _ in wds.WebDataset(paths, shardshuffle=False, empty_check=False).to_tuple("jpg", "cls"):
            n += 1
        assert n == records, n
        return _rates(n, start, cpu)

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "flowers"))
    parser.add_argument("--records", type=int, default=4000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--batches", type=int, default=125, help="timed batches per repetition")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    with tempfile.TemporaryDirectory() as tmp:
        data = write_datasets(thumbnails(pathlib.Path(args.data), args.records), pathlib.Path(tmp))
        timers: dict[str, dict[str, Callable[[], tuple[float, float]]]] = {"TFRecord": {}, "WebDataset tar": {}}
        for lib in ("jaxdali", "dali"):
            try:
                bs = args.batch_size
                timers["TFRecord"][lib] = pipeline_timer(
                    _tfrecord_pipeline(lib, *data["tfrecord"], args.threads, bs), args.batches, bs)
                timers["WebDataset tar"][lib] = pipeline_timer(
                    _wds_pipeline(lib, *data["tar"], args.threads, bs), args.batches, bs)
            except ImportError as e:
                print(f"({lib} not measured: {e})", file=sys.stderr)
        try:
            timers["WebDataset tar"]["webdataset"] = webdataset_timer(data["tar"][0], args.records)
        except ImportError as e:
            print(f"(webdataset package not measured: {e})", file=sys.stderr)

        results: dict[str, dict[str, list[tuple[float, float]]]] = {f: {s: [] for s in t} for f, t in timers.items()}
        for _ in range(args.reps):  # interleaved: every system once per repetition
            for fmt_name, systems in timers.items():
                for system, timed in systems.items():
                    results[fmt_name][system].append(timed())

    print(f"\n{args.records} records of {FILES} files, batch {args.batch_size}, {args.threads} threads, {args.reps} "
          f"interleaved repetitions. CPU rate: records per CPU-second of the process (all its threads), the "
          f"steadier measure on a shared machine.\n")
    print("| format | system | records/s (median, min-max) | jaxdali / system | records per CPU-s (median) "
          "| jaxdali / system |")
    print("|---|---|---|---|---|---|")
    for fmt_name, systems in results.items():
        ours = systems.get("jaxdali")
        for system, values in systems.items():
            wall, cpu = [v[0] for v in values], [v[1] for v in values]
            ratios = ["", ""] if ours is None or system == "jaxdali" else [
                f"{statistics.median(a[k] / b[k] for a, b in zip(ours, values)):.2f}x" for k in (0, 1)]
            print(f"| {fmt_name} | {system} | {statistics.median(wall):,.0f} ({min(wall):,.0f}-{max(wall):,.0f}) "
                  f"| {ratios[0]} | {statistics.median(cpu):,.0f} | {ratios[1]} |")


if __name__ == "__main__":
    main()
