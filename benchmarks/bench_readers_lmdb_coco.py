"""Records/s of jaxdali's caffe2, coco and array_record readers against the rival reading the same format.

Self-contained: it writes a few thousand small records into a temporary folder (real handwritten
digits as PNGs for the Caffe2 LMDB and ArrayRecord files; 64x48 JPEG thumbnails of the shared photos
for COCO, with made-up boxes and polygons), then reads whole epochs through

* ``caffe2``: ``fn.readers.caffe2`` (images, labels): jaxdali vs DALI (CPU pipeline);
* ``coco``: ``fn.readers.coco`` (images, boxes, labels, polygons, vertices): jaxdali vs DALI;
* ``array_record``: ``fn.readers.array_record(random_shuffle=True)`` vs the ``ArrayRecordDataSource``
  that Grain reads through (it ships with ``array-record``): its ``__getitems__`` over shuffled batches
  of indices, and, when Grain is installed, ``grain.MapDataset.source(...).shuffle().batch()``.

DALI and Grain are optional: systems whose library is missing are left out.

Every system is built and warmed up once, then the repetitions interleave the systems (A B C, A B C, ...),
so machine load hits them alike; the report gives the median epoch rate and the same-run ratio.

Run: ``python benchmarks/bench_readers_lmdb_coco.py [--records 4000] [--batch-size 256] [--reps 7]``
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Callable

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
FLOWERS = os.path.join(REPO, "..", "shared", "data", "flowers")


# -- data -----------------------------------------------------------------------------------------------------

def digit_pngs(n: int) -> tuple[list[bytes], list[int]]:
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    pngs, labels = [], []
    for i in range(n):
        k = i % len(digits.images)
        buf = io.BytesIO()
        Image.fromarray((digits.images[k] * (255 / 16)).astype(np.uint8)).resize((28, 28)).save(buf, format="PNG")
        pngs.append(buf.getvalue())
        labels.append(int(digits.target[k]))
    return pngs, labels


def write_caffe2_lmdb(folder: str, pngs: list[bytes], labels: list[int]) -> str:
    import lmdb

    from jaxdali.ops.readers.caffe import encode_tensor, encode_tensor_protos

    path = os.path.join(folder, "caffe2")
    env = lmdb.open(path, map_size=1 << 30)
    with env.begin(write=True) as txn:
        for i, (png, label) in enumerate(zip(pngs, labels)):
            txn.put(f"{i:08d}".encode(), encode_tensor_protos([encode_tensor(4, strings=[png]),
                                                               encode_tensor(2, ints=[label])]))
    env.close()
    return path


def write_array_record(folder: str, records: list[bytes]) -> str:
    from array_record.python.array_record_module import ArrayRecordWriter

    path = os.path.join(folder, "records.array_record")
    writer = ArrayRecordWriter(path, "group_size:1")
    for r in records:
        writer.write(r)
    writer.close()
    return path


def write_coco(folder: str, n: int) -> tuple[str, str]:
    from PIL import Image

    photos = sorted(os.path.join(d, f) for d, _, names in os.walk(FLOWERS) for f in names if f.endswith(".jpg"))
    root = os.path.join(folder, "coco")
    os.makedirs(root)
    rng = random.Random(0)
    images, anns = [], []
    for i in range(n):
        name = f"{i:06d}.jpg"
        Image.open(photos[i % len(photos)]).convert("RGB").resize((64, 48)).save(os.path.join(root, name), quality=80)
        images.append({"id": i + 1, "file_name": name, "width": 64, "height": 48})
        for _ in range(rng.randint(1, 4)):
            x, y, w, h = rng.uniform(0, 40), rng.uniform(0, 30), rng.uniform(2, 24), rng.uniform(2, 18)
            ring = [round(v, 2) for _ in range(5) for v in (rng.uniform(x, x + w), rng.uniform(y, y + h))]
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": rng.choice([1, 2, 3]),
                         "bbox": [x, y, w, h], "iscrowd": 0, "segmentation": [ring]})
    path = os.path.join(folder, "instances.json")
    with open(path, "w") as f:
        json.dump({"images": images, "annotations": anns, "categories": [{"id": c} for c in (1, 2, 3)]}, f)
    return root, path


# -- systems: each returns a function that reads one epoch and returns the number of records -----------------

def pipeline_epoch(pipeline_def, fn, reader: Callable, n: int, batch_size: int, threads: int, **pipe_args) -> Callable[[], int]:
    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, seed=0, **pipe_args)
    def p():
        out = reader(fn)
        return tuple(out) if isinstance(out, (list, tuple)) else out

    pipe = p()
    pipe.build()
    batches = -(-n // batch_size)

    def epoch() -> int:
        for _ in range(batches):
            pipe.run()
        return batches * batch_size

    return epoch


def grain_map_epoch(path: str, n: int, batch_size: int, threads: int) -> Callable[[], int]:
    import grain.python as grain
    from array_record.python.array_record_data_source import ArrayRecordDataSource

    dataset = grain.MapDataset.source(ArrayRecordDataSource([path])).shuffle(seed=0).batch(batch_size, batch_fn=list)
    state = {"epoch": 0}

    def epoch() -> int:
        count = 0
        for i in range(len(dataset)):
            count += len(dataset[i + state["epoch"] * len(dataset)])
        state["epoch"] += 1
        return count

    return epoch


def grain_getitems_epoch(path: str, n: int, batch_size: int, threads: int) -> Callable[[], int]:
    from array_record.python.array_record_data_source import ArrayRecordDataSource

    source = ArrayRecordDataSource([path])
    rng = np.random.default_rng(0)

    def epoch() -> int:
        order = rng.permutation(n)
        count = 0
        for start in range(0, n, batch_size):
            count += len(source.__getitems__(order[start:start + batch_size].tolist()))
        return count

    return epoch


def measure(systems: dict[str, Callable[[], int]], reps: int) -> dict[str, dict[str, list[float]]]:
    """Per system: records per wall-clock second and per CPU second (all threads of this process: the
    readers' own threads included), one value per repetition."""
    for run in systems.values():  # warm-up: one epoch each
        run()
    rates: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in systems}
    for _ in range(reps):
        for name, run in systems.items():
            wall, cpu = time.perf_counter(), time.process_time()
            count = run()
            rates[name]["wall"].append(count / (time.perf_counter() - wall))
            rates[name]["cpu"].append(count / max(time.process_time() - cpu, 1e-9))
    return rates


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=4000)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--formats", default="caffe2,coco,array_record")
    args = ap.parse_args(argv)

    import jaxdali
    from jaxdali import fn as jfn

    try:
        import nvidia.dali as dali
        import nvidia.dali.fn as dali_fn
    except ImportError:
        dali = dali_fn = None
    n, bs, t = args.records, args.batch_size, args.threads
    formats = args.formats.split(",")
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        pngs, labels = digit_pngs(n)
        groups: dict[str, dict[str, Callable[[], int]]] = {}
        if "caffe2" in formats:
            lmdb_path = write_caffe2_lmdb(folder, pngs, labels)

            def caffe2(fn):
                return fn.readers.caffe2(path=lmdb_path, random_shuffle=True)

            groups["caffe2"] = {"jaxdali": pipeline_epoch(jaxdali.pipeline_def, jfn, caffe2, n, bs, t)}
            if dali:
                groups["caffe2"]["dali"] = pipeline_epoch(dali.pipeline_def, dali_fn, caffe2, n, bs, t)
        if "coco" in formats:
            root, annotations = write_coco(folder, n)

            def coco(fn):
                return fn.readers.coco(file_root=root, annotations_file=annotations, polygon_masks=True,
                                       random_shuffle=True)

            groups["coco"] = {"jaxdali": pipeline_epoch(jaxdali.pipeline_def, jfn, coco, n, bs, t)}
            if dali:
                groups["coco"]["dali"] = pipeline_epoch(dali.pipeline_def, dali_fn, coco, n, bs, t)
        if "array_record" in formats:
            ar_path = write_array_record(folder, pngs)

            def array_record(fn):
                return fn.readers.array_record(path=ar_path, random_shuffle=True)

            groups["array_record"] = {
                "jaxdali": pipeline_epoch(jaxdali.pipeline_def, jfn, array_record, n, bs, t),
                "grain __getitems__": grain_getitems_epoch(ar_path, n, bs, t),
            }
            if importlib.util.find_spec("grain") is not None:
                groups["array_record"]["grain MapDataset"] = grain_map_epoch(ar_path, n, bs, t)
        print(f"{n} records, batch {bs}, {t} threads, {args.reps} interleaved repetitions: median (min-max) records "
              "per wall-clock second, and per CPU second of the whole process (less sensitive to a loaded "
              "machine); compare ratios within one run\n")
        print("| format | system | records/s | min-max | ratio jaxdali / system | records per CPU-s | ratio |")
        print("|---|---|---|---|---|---|---|")
        for fmt, systems in groups.items():
            rates = measure(systems, args.reps)
            ours = {k: statistics.median(v) for k, v in rates["jaxdali"].items()}
            results[fmt] = {}
            for name, values in rates.items():
                med = {k: statistics.median(v) for k, v in values.items()}
                results[fmt][name] = med
                ratio = {k: "" if name == "jaxdali" else f"{ours[k] / med[k]:.2f}x" for k in med}
                print(f"| {fmt} | {name} | {med['wall']:,.0f} | {min(values['wall']):,.0f}-{max(values['wall']):,.0f} "
                      f"| {ratio['wall']} | {med['cpu']:,.0f} | {ratio['cpu']} |")
    return results


if __name__ == "__main__":
    main()
