"""Video decoding throughput: jaxdali's video reader against the same work done with PyAV directly.

The work: sequences of ``--length`` consecutive frames starting every ``--step`` frames of a video
(default the shared 1280x720 H.264 clip), decoded and converted to RGB exactly as jaxdali converts
(which is DALI's conversion). "PyAV direct" opens the file per sequence, seeks to the keyframe and
decodes in a plain Python loop, one sequence after another on one thread, or with a thread pool of
``--threads`` workers. jaxdali runs ``fn.experimental.readers.video`` with ``num_threads`` = 1 and
``--threads``. Repetitions are interleaved; the report gives frames/s (median, min-max) and ratios.

    python benchmarks/video.py --reps 5
"""

from __future__ import annotations

import argparse
import concurrent.futures
import pathlib
import statistics
import tempfile
import time

import av
import numpy as np

from jaxdali import fn, pipeline_def

DEFAULT_VIDEO = pathlib.Path(__file__).resolve().parents[1].parent / "shared" / "data" / "video" / "bigbuckbunny.mp4"
_INTERP = av.video.reformatter.Interpolation
_FLAGS = _INTERP.BILINEAR | _INTERP.ACCURATE_RND | _INTERP.FULL_CHR_H_INT


def pyav_sequence(path: str, start: int, length: int) -> np.ndarray:
    """Frames ``start .. start + length - 1`` with PyAV: seek to the keyframe before, decode forward."""
    out = []
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        tick = int(round(1 / (float(stream.average_rate) * float(stream.time_base))))
        first_pts = start * tick
        container.seek(first_pts, stream=stream, backward=True, any_frame=False)
        for frame in container.decode(stream):
            if frame.pts < first_pts:
                continue
            out.append(frame.to_ndarray(format="rgb24", interpolation=_FLAGS, threads=1))
            if len(out) == length:
                break
    return np.stack(out)


def run_pyav(paths, starts, length, threads) -> float:
    jobs = [(p, s) for p in paths for s in starts]
    t0 = time.perf_counter()
    if threads == 1:
        for p, s in jobs:
            pyav_sequence(p, s, length)
    else:
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda j: pyav_sequence(j[0], j[1], length), jobs))
    return len(jobs) * length / (time.perf_counter() - t0)


def run_jaxdali(paths, starts, length, step, threads, batch) -> float:
    @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=0, prefetch_queue_depth=1)
    def pipe():
        return fn.experimental.readers.video(filenames=paths, sequence_length=length, step=step, name="R")

    p = pipe()
    p.build()
    sequences = p.epoch_size("R")
    iterations = sequences // batch
    t0 = time.perf_counter()
    for _ in range(iterations):
        p.run()
    rate = iterations * batch * length / (time.perf_counter() - t0)
    p.close()
    return rate


def reencode(source: str, gop: int, folder: str) -> str:
    """``source`` as H.264 with a keyframe every ``gop`` frames (real files have one every few seconds;
    the shared clip has a single one)."""
    path = str(pathlib.Path(folder) / f"gop{gop}.mp4")
    with av.open(source) as inp, av.open(path, "w") as out:
        in_stream = inp.streams.video[0]
        stream = out.add_stream("libx264", rate=in_stream.average_rate)
        stream.width, stream.height, stream.pix_fmt = in_stream.width, in_stream.height, "yuv420p"
        stream.codec_context.gop_size = gop
        for i, frame in enumerate(inp.decode(in_stream)):
            frame.pts, frame.time_base = i, 1 / in_stream.average_rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--video", default=str(DEFAULT_VIDEO))
    parser.add_argument("--copies", type=int, default=4, help="times the video is listed (more sequences)")
    parser.add_argument("--length", type=int, default=8)
    parser.add_argument("--step", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--gop", type=int, default=25,
                        help="re-encode with a keyframe every GOP frames first (0: read the video as it is)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="jaxdali-video-bench-")
    video = reencode(args.video, args.gop, folder) if args.gop else args.video
    paths = [video] * args.copies
    with av.open(video) as c:
        frames = c.streams.video[0].frames
    starts = list(range(0, frames - args.length * 1 + 1, args.step))
    starts = [s for s in starts if s + args.length <= frames]
    batch = len(starts)  # one file's sequences per batch
    results: dict[str, list[float]] = {}
    systems = {
        "pyav 1 thread": lambda: run_pyav(paths, starts, args.length, 1),
        "jaxdali 1 thread": lambda: run_jaxdali(paths, starts, args.length, args.step, 1, batch),
        f"pyav {args.threads} threads": lambda: run_pyav(paths, starts, args.length, args.threads),
        f"jaxdali {args.threads} threads": lambda: run_jaxdali(paths, starts, args.length, args.step, args.threads,
                                                                 batch),
    }
    for _ in range(args.reps):
        for name, run in systems.items():
            results.setdefault(name, []).append(run())
    print(f"video: {args.video} (keyframe every {args.gop or 'as stored'} frames) x{args.copies}, sequences of {args.length} frames every {args.step}, "
          f"{args.reps} interleaved repetitions\n")
    print("| system | frames/s median | min-max |")
    print("|---|---:|---:|")
    for name, rates in results.items():
        print(f"| {name} | {statistics.median(rates):.0f} | {min(rates):.0f}-{max(rates):.0f} |")
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"\njaxdali / pyav, 1 thread: {med['jaxdali 1 thread'] / med['pyav 1 thread']:.2f}")
    print(f"jaxdali / pyav, {args.threads} threads: "
          f"{med[f'jaxdali {args.threads} threads'] / med[f'pyav {args.threads} threads']:.2f}")
    print(f"jaxdali scaling 1 -> {args.threads} threads: "
          f"{med[f'jaxdali {args.threads} threads'] / med['jaxdali 1 thread']:.2f}x")


if __name__ == "__main__":
    main()
