"""Records/s of fn.readers.mxnet and fn.readers.sequence against DALI's CPU readers, in one process.

* MXNet RecordIO: ``--records`` small JPEGs (thumbnails of the shared photos) with float labels in one
  ``.rec`` file and its ``.idx``; both systems deliver the raw bytes and labels (no decoding), batch
  ``--batch-size``, shuffled.
* Frame sequences: ``--streams`` folders of 16 small JPEG frames each; both systems read and decode
  sequences of 4 frames (this one is decode-bound: it compares the decoders as much as the readers).

Interleaved repetitions (``readers.py``); wall-clock and per-CPU-second rates.

    python benchmarks/bench_readers_mxnet_sequence.py [--records 4000] [--reps 5] [--batches 30]
"""

from __future__ import annotations

import argparse
import io
import pathlib
import sys
import tempfile
import warnings

sys.path[:0] = [str(pathlib.Path(__file__).resolve().parents[1]), str(pathlib.Path(__file__).resolve().parent)]
from readers import compare, report  # noqa: E402  (this checkout's jaxdali, then the shared harness)

from jaxdali.ops.readers import recordio_format  # noqa: E402

PHOTOS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "flowers"


def thumbnails(count: int, size: int) -> list[bytes]:
    from PIL import Image

    small = []
    for path in sorted(PHOTOS.rglob("*.jpg")):
        with Image.open(path) as im:
            im = im.convert("RGB").resize((size, size))
            out = io.BytesIO()
            im.save(out, "JPEG", quality=85)
        small.append(out.getvalue())
    return [small[i % len(small)] for i in range(count)]


def loader(lib: str, batch_size: int, threads: int, reader: str, **reader_args):
    if lib == "dali":
        from nvidia.dali import fn, pipeline_def
    else:
        from jaxdali import fn, pipeline_def

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=None, prefetch_queue_depth=2, seed=1)
    def p():
        out = getattr(fn.readers, reader)(**reader_args)
        return tuple(out) if isinstance(out, list) else out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipe = p()
        pipe.build()

    def load() -> int:
        return len(pipe.run()[0])

    return load


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=4000)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        jpegs = thumbnails(args.records, 32)
        rec, idx = str(root / "data.rec"), str(root / "data.idx")
        recordio_format.write_recordio(rec, [recordio_format.encode_record(i % 5, j, i) for i, j in enumerate(jpegs)],
                                       idx)
        for s in range(args.streams):
            (root / "streams" / f"{s:03d}").mkdir(parents=True)
            for f in range(16):
                (root / "streams" / f"{s:03d}" / f"{f:04d}.jpg").write_bytes(jpegs[s * 16 + f])
        cases = {
            f"fn.readers.mxnet, {args.records} records of ~1 KB JPEGs + labels, batch {args.batch_size}":
                ("mxnet", args.batch_size, dict(path=[rec], index_path=[idx], random_shuffle=True)),
            f"fn.readers.sequence, {args.streams} streams of 16 32x32 JPEG frames, sequences of 4, batch 8":
                ("sequence", 8, dict(file_root=str(root / "streams"), sequence_length=4, random_shuffle=True)),
        }
        print(f"{args.threads} threads, {args.reps} interleaved repetitions of {args.batches} batches\n")
        for title, (reader, batch, reader_args) in cases.items():
            loaders = {lib: loader(lib, batch, args.threads, reader, **reader_args) for lib in ("jaxdali", "dali")}
            cpu_rates: dict[str, list[float]] = {}
            rates = compare(loaders, batches=args.batches, reps=args.reps, warmup=args.warmup, cpu_rates=cpu_rates)
            print(report(title, rates, reference="dali", cpu_rates=cpu_rates) + "\n")


if __name__ == "__main__":
    main()
