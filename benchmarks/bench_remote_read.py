"""Readers on a high-latency store: records/s from local disk against a store that answers each request
after ``--latency`` seconds (20 ms by default), with and without read-ahead.

The store is the local file system behind an fsspec wrapper (``slow://``) that sleeps before answering
every request (reads, listings, metadata), as an object store's round trip would. Three pipelines:

* ``fn.readers.numpy`` on ``--files`` small .npy files (the reader alone);
* ``fn.readers.file`` + ``fn.decoders.image`` on a folder of photos (default ``../shared/data/flowers``);
* ``fn.readers.coco`` + ``fn.decoders.image`` on the same photos (a made-up box each; the annotations
  file stays local, the images are behind the store).

Loaders, measured in one process and interleaved (``readers.py``): ``local``, ``remote, no read-ahead``
(``reader_read_ahead="never"``: each batch's files are read when the batch is produced, on the
pipeline's worker threads) and ``remote, read-ahead N`` (``prefetch_queue_depth=N`` batches in flight
on the reader's I/O threads).

    python benchmarks/bench_remote_read.py
    python benchmarks/bench_remote_read.py --latency 0.05 --files 500 --reps 3
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
from readers import compare, report  # noqa: E402  (this checkout's jaxdali, then the shared harness)

import fsspec  # noqa: E402
from fsspec.implementations.local import LocalFileSystem  # noqa: E402

from jaxdali import config, fn, pipeline_def  # noqa: E402


class LatencyFileSystem(LocalFileSystem):
    """The local file system, answering every request after ``latency`` seconds (``slow:///abs/path``)."""

    protocol = "slow"
    latency = 0.02

    @classmethod
    def _strip_protocol(cls, path):
        path = path[len("slow://"):] if isinstance(path, str) and path.startswith("slow://") else path
        return super()._strip_protocol(path)

    def _wait(self):
        time.sleep(self.latency)

    def cat_file(self, path, start=None, end=None, **kwargs):
        self._wait()
        return super().cat_file(path, start=start, end=end, **kwargs)

    def info(self, path, **kwargs):
        self._wait()
        return super().info(path, **kwargs)

    def ls(self, path, detail=False, **kwargs):
        self._wait()
        return super().ls(path, detail=detail, **kwargs)


fsspec.register_implementation("slow", LatencyFileSystem, clobber=True)


def numpy_loader(root: str, batch_size: int, threads: int, depth: int):
    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, prefetch_queue_depth=2)
    def p():
        return fn.readers.numpy(file_root=root, random_shuffle=True, prefetch_queue_depth=depth)

    return _runner(p())


def photo_loader(root: str, batch_size: int, threads: int, depth: int):
    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, prefetch_queue_depth=2)
    def p():
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, prefetch_queue_depth=depth)
        return fn.decoders.image(jpegs), labels

    return _runner(p())


def coco_loader(annotations: str):
    """``fn.readers.coco`` (images behind ``root``, the annotations file local) + ``fn.decoders.image``."""

    def make(root: str, batch_size: int, threads: int, depth: int):
        @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, prefetch_queue_depth=2)
        def p():
            jpegs, boxes, labels = fn.readers.coco(file_root=root, annotations_file=annotations,
                                                   random_shuffle=True, prefetch_queue_depth=depth)
            return fn.decoders.image(jpegs), boxes, labels

        return _runner(p())

    return make


def write_coco(photos: pathlib.Path, path: pathlib.Path) -> None:
    """A COCO annotations file over every photo under ``photos``: one box covering its centre."""
    from PIL import Image

    images, annotations = [], []
    for i, photo in enumerate(sorted(photos.rglob("*.jpg"))):
        with Image.open(photo) as im:
            w, h = im.size
        images.append({"id": i, "file_name": photo.relative_to(photos).as_posix(), "width": w, "height": h})
        annotations.append({"id": i, "image_id": i, "category_id": 1, "iscrowd": 0,
                            "bbox": [w / 4, h / 4, w / 2, h / 2]})
    path.write_text(json.dumps({"images": images, "annotations": annotations,
                                "categories": [{"id": 1, "name": "object"}]}))


def _runner(pipe):
    pipe.build()

    def load() -> int:
        return len(pipe.run()[0])

    return load


def loaders(make, local_root: str, args) -> dict:
    out = {}
    for name, root, mode, depth in [("local", local_root, "never", 1),
                                    ("remote, no read-ahead", "slow://" + local_root, "never", 1),
                                    ("remote, read-ahead 1", "slow://" + local_root, "remote", 1),
                                    ("remote, read-ahead 2", "slow://" + local_root, "remote", 2)]:
        config.update("reader_read_ahead", mode)  # read when the reader is built
        out[name] = make(root, args.batch_size, args.threads, depth)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.02, help="seconds per request")
    ap.add_argument("--files", type=int, default=1000, help=".npy files")
    ap.add_argument("--photos", default=str(REPO.parent / "shared" / "data" / "flowers"))
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args(argv)
    LatencyFileSystem.latency = args.latency
    print(f"{args.latency * 1000:.0f} ms per remote request, batch {args.batch_size}, {args.threads} threads, "
          f"{args.reps} interleaved repetitions of {args.batches} batches\n")
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        for k in range(args.files):
            np.save(pathlib.Path(tmp) / f"{k:06d}.npy", rng.standard_normal((32, 32)).astype(np.float32))
        rates = compare(loaders(numpy_loader, tmp, args), batches=args.batches, reps=args.reps, warmup=args.warmup)
        print(report(f"fn.readers.numpy, {args.files} files of 32x32 float32", rates, reference="local") + "\n")
    if pathlib.Path(args.photos).is_dir():
        rates = compare(loaders(photo_loader, str(pathlib.Path(args.photos).resolve()), args),
                        batches=args.batches, reps=args.reps, warmup=args.warmup)
        print(report(f"fn.readers.file + fn.decoders.image, {args.photos}", rates, reference="local") + "\n")
        with tempfile.TemporaryDirectory() as tmp:
            photos = pathlib.Path(args.photos).resolve()
            annotations = pathlib.Path(tmp) / "instances.json"
            write_coco(photos, annotations)
            rates = compare(loaders(coco_loader(str(annotations)), str(photos), args), batches=args.batches,
                            reps=args.reps, warmup=args.warmup)
            print(report(f"fn.readers.coco + fn.decoders.image, {args.photos}", rates, reference="local"))


if __name__ == "__main__":
    main()
