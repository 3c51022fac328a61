"""The operators added for issue 22's last four: records/s against their rivals, interleaved (see ``readers.py``).

* ``fits``: ``fn.experimental.readers.fits`` on FITS files of int16 images, uncompressed and RICE_1
  tile-compressed (one tile per row), against a plain astropy loop (``fits.open`` and the image's data,
  file after file: DALI 2.4's CPU reader needs a CUDA driver), and against itself with the NumPy Rice
  decoder (``JAXDALI_DISABLE_KERNEL``'s path).
* ``dump_image``: ``fn.dump_image`` of HWC uint8 images against DALI's (files written to a temporary folder).
* ``inputs_video``: ``fn.experimental.inputs.video`` against DALI's CPU operator, streaming a VP9 clip
  (DALI's CPU backend decodes VP8, VP9 and MJPEG only) re-encoded from the shared H.264 clip.

    python benchmarks/bench_new_ops.py                        # all three
    python benchmarks/bench_new_ops.py --only fits --reps 5
"""

from __future__ import annotations

import argparse
import fractions
import os
import pathlib
import sys
import tempfile

import numpy as np

sys.path[:0] = [str(pathlib.Path(__file__).resolve().parents[1]), str(pathlib.Path(__file__).resolve().parent)]
from readers import compare, report  # noqa: E402  (this checkout's jaxdali, then the shared harness)

VIDEO = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "video" / "bigbuckbunny.mp4"


def _jaxdali_fits(files: list[str], batch: int, threads: int, kernel: bool):
    from jaxdali import config, fn, pipeline_def

    @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, prefetch_queue_depth=1)
    def p():
        return fn.experimental.readers.fits(files=files, random_shuffle=True)

    pipe = p()
    pipe.build()

    def load() -> int:
        saved = config.get("disable_kernel")
        config.update("disable_kernel", not kernel)
        try:
            (images,) = pipe.run()
        finally:
            config.update("disable_kernel", saved)
        return len(images)

    return load


def _astropy_fits(files: list[str], batch: int):
    from astropy.io import fits

    position = [0]

    def load() -> int:
        for _ in range(batch):
            with fits.open(files[position[0] % len(files)]) as f:
                np.array(f[1].data)
            position[0] += 1
        return batch

    return load


def bench_fits(args, tmp: pathlib.Path) -> dict:
    from astropy.io import fits

    rng = np.random.default_rng(0)
    results = {}
    for method in ("none", "RICE_1"):
        files = []
        for k in range(args.files):
            image = (rng.standard_normal((args.size, args.size)) * 40 + 1000).astype(np.int16)
            hdu = fits.ImageHDU(image) if method == "none" else fits.CompImageHDU(image, compression_type=method)
            path = tmp / f"{method}-{k}.fits"
            fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
            files.append(str(path))
        loaders = {"jaxdali": _jaxdali_fits(files, args.batch_size, args.threads, kernel=True),
                   "astropy loop": _astropy_fits(files, args.batch_size)}
        if method == "RICE_1":
            loaders["jaxdali, NumPy Rice decoder"] = _jaxdali_fits(files, args.batch_size, args.threads, kernel=False)
        cpu: dict[str, list[float]] = {}
        rates = compare(loaders, batches=args.batches, reps=args.reps, warmup=2, cpu_rates=cpu)
        print(report(f"fits, {args.size}x{args.size} int16, compression {method}", rates, reference="astropy loop",
                     cpu_rates=cpu) + "\n")
        results[method] = {"wall": rates, "cpu": cpu}
    return results


def bench_dump_image(args, tmp: pathlib.Path) -> dict:
    rng = np.random.default_rng(1)
    images = [rng.integers(0, 256, (224, 224, 3), np.uint8) for _ in range(args.batch_size)]
    os.chdir(tmp)
    loaders = {}
    for lib in ("jaxdali", "dali"):
        if lib == "dali":
            from nvidia.dali import fn, pipeline_def
        else:
            from jaxdali import fn, pipeline_def

        @pipeline_def(batch_size=len(images), num_threads=args.threads, device_id=None, prefetch_queue_depth=1)
        def p():
            return fn.dump_image(fn.external_source(source=lambda: images, layout="HWC"), suffix=lib)

        pipe = p()
        pipe.build()
        loaders[lib] = lambda pipe=pipe: len(pipe.run()[0])
    cpu: dict[str, list[float]] = {}
    rates = compare(loaders, batches=args.batches, reps=args.reps, warmup=2, cpu_rates=cpu)
    print(report(f"dump_image, {len(images)} images of 224x224x3 per batch", rates, reference="dali",
                 cpu_rates=cpu) + "\n")
    return {"wall": rates, "cpu": cpu}


def _vp9(source: pathlib.Path, path: pathlib.Path, width: int, height: int) -> pathlib.Path:
    import av

    with av.open(str(source)) as inp, av.open(str(path), "w") as out:
        stream = out.add_stream("libvpx-vp9", rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = 25
        for i, frame in enumerate(inp.decode(video=0)):
            small = frame.reformat(width=width, height=height, format="yuv420p")
            small.pts, small.time_base = i, fractions.Fraction(1, 25)
            for packet in stream.encode(small):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def bench_inputs_video(args, tmp: pathlib.Path) -> dict:
    from jaxdali.ops.video_codec import index_video

    data = np.fromfile(_vp9(VIDEO, tmp / "clip.webm", 320, 180), np.uint8)
    sequences = -(-index_video(data.tobytes(), "clip").num_frames // 8)
    per_video = -(-sequences // (args.batch_size // 8))
    loaders = {}
    for lib in ("jaxdali", "dali"):
        if lib == "dali":
            from nvidia.dali import fn, pipeline_def
        else:
            from jaxdali import fn, pipeline_def

        @pipeline_def(batch_size=args.batch_size // 8, num_threads=args.threads, device_id=None,
                      prefetch_queue_depth=1)
        def p():
            return fn.experimental.inputs.video(name="video", sequence_length=8, device="cpu")

        pipe = p()
        pipe.build()

        def load(pipe=pipe, state={"left": 0}) -> int:
            if state["left"] == 0:  # the video is used up after this many batches: feed the next one
                pipe.feed_input("video", [data])
                state["left"] = per_video
            state["left"] -= 1
            (batch,) = pipe.run()
            return sum(np.asarray(batch[i]).shape[0] for i in range(len(batch)))

        loaders[lib] = load
    cpu: dict[str, list[float]] = {}
    rates = compare(loaders, batches=args.batches, reps=args.reps, warmup=2, cpu_rates=cpu)
    print(report("inputs.video, frames of a 320x180 VP9 clip, sequences of 8", rates, reference="dali",
                 cpu_rates=cpu) + "\n")
    return {"wall": rates, "cpu": cpu}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("fits", "dump_image", "inputs_video"), action="append")
    ap.add_argument("--files", type=int, default=64)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    benches = {"fits": bench_fits, "dump_image": bench_dump_image, "inputs_video": bench_inputs_video}
    results = {}
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name in args.only or list(benches):
                results[name] = benches[name](args, pathlib.Path(tmp))
        finally:
            os.chdir(cwd)
    return results


if __name__ == "__main__":
    main()
