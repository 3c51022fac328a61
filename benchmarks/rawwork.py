"""The raw per-image work of a pipeline, as a yardstick for the loaders' throughput.

All files are read into memory first. Then, on ONE thread, each available decoder (OpenCV, PIL,
nvImageCodec's CPU backend, and jaxdali's JPEG kernel, which calls libjpeg-turbo directly) decodes every
image in full to RGB, and OpenCV crops and resizes
(INTER_LINEAR, the fastest filter, cropping first so only the crop is resized): train takes a
random-resized-crop window and resizes it to 224x224; val takes the centre square that becomes the
224x224 centre crop after a shorter-side resize to 256. Normalising to float32 CHW is timed
separately. Each step's time is the fastest of ``--passes`` passes over all images.

``sum_images_per_s`` = threads x the one-thread rate of the fastest decoder + crop + resize: the
machine's practical limit for that work if threads scaled perfectly, with no reading, batching,
scheduling or hand-over. ``measured_images_per_s`` runs the same work on ``--threads`` threads.
Decoding only the crop window (``region_*``) takes the faster of nvImageCodec and the JPEG kernel; the
``nvimgcodec_*`` figures are the same limits with nvImageCodec's decoders only (the yardstick before
the kernel existed).

Run by ``run.py`` with jaxdali's interpreter: ``python benchmarks/rawwork.py --pipeline train --data DIR``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import io
import math
import os
import threading
import time
from collections.abc import Callable

import harness
import numpy as np
from harness import normalize_chw as harness_normalize


def _decoders() -> dict[str, Callable[[bytes], np.ndarray]]:
    """The full-image RGB decoders installed here, by name."""
    found: dict[str, Callable[[bytes], np.ndarray]] = {}
    try:
        import cv2

        cv2.setNumThreads(1)
        found["opencv"] = lambda data: cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR_RGB)
    except ImportError:
        pass
    try:
        from PIL import Image

        found["pil"] = lambda data: np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    except ImportError:
        pass
    try:
        found["nvimgcodec"] = _nvimgcodec_decoder()
    except ImportError:
        pass
    kernel = _jpeg_kernel_decoder()
    if kernel is not None:
        found["jaxdali-jpeg"] = kernel
    return found


def _jpeg_kernel_decoder() -> Callable[..., np.ndarray] | None:
    """jaxdali's JPEG kernel (libjpeg-turbo called directly, nvImageCodec's pixels), with the same
    ``decode(data[, window])`` as ``_nvimgcodec_decoder``; None where it is not in use."""
    try:
        from jaxdali.ops import decoders, jpeg_direct
    except ImportError:
        return None
    if decoders.jpeg_status()[0] != "direct libjpeg-turbo":
        return None

    def decode(data: bytes, window: tuple[int, int, int, int] | None = None) -> np.ndarray:
        encoded = np.frombuffer(data, np.uint8)
        size = jpeg_direct.jpeg_size(encoded)
        image = None if size is None else jpeg_direct.decode(encoded, size[0], size[1], window, False, False)
        if image is None:
            raise ValueError("not a JPEG the kernel decodes")
        return image

    return decode


def _nvimgcodec_decoder() -> Callable[..., np.ndarray]:
    """nvImageCodec's CPU backend, one decoder per thread, one internal thread each:
    ``decode(data)`` decodes the whole image, ``decode(data, (y, x, h, w))`` only that window."""
    import nvidia.nvimgcodec as nvi

    local = threading.local()
    params = nvi.DecodeParams(apply_exif_orientation=False, color_spec=nvi.ColorSpec.SRGB,
                              sample_format=nvi.SampleFormat.I_RGB)

    def decode(data: bytes, window: tuple[int, int, int, int] | None = None) -> np.ndarray:
        decoder = getattr(local, "decoder", None)
        if decoder is None:
            decoder = local.decoder = nvi.Decoder(device_id=nvi.NVIMGCODEC_DEVICE_CPU_ONLY, max_num_cpu_threads=1,
                                                  backends=[nvi.Backend(nvi.BackendKind.CPU_ONLY)])
        stream = nvi.CodeStream(data)
        if window is not None:
            y, x, h, w = window
            stream = stream.get_sub_code_stream(region=nvi.Region(y, x, y + h, x + w))
        return np.asarray(decoder.decode(stream, params=params).cpu())

    return decode


def _windows(pipeline: str, shapes: list[tuple[int, int]], seed: int) -> list[tuple[int, int, int, int]]:
    """The (y, x, h, w) source window of each image."""
    rng = np.random.default_rng(seed)
    windows = []
    for h, w in shapes:
        if pipeline == "train":
            windows.append(_random_window(h, w, rng))
        else:
            # The centre 224x224 of the image resized to shorter side 256, in source pixels.
            side = min(h, w) * harness.OUTPUT_SIZE / harness.VAL_RESIZE_SHORTER
            ch, cw = max(1, round(side)), max(1, round(side))
            windows.append(((h - ch) // 2, (w - cw) // 2, ch, cw))
    return windows


def _random_window(height: int, width: int, rng) -> tuple[int, int, int, int]:
    log_lo, log_hi = (math.log(r) for r in harness.RANDOM_ASPECT_RATIO)
    for _ in range(10):
        target = height * width * rng.uniform(*harness.RANDOM_AREA)
        ratio = math.exp(rng.uniform(log_lo, log_hi))
        w, h = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
    side = min(height, width)
    return (height - side) // 2, (width - side) // 2, side, side


def _region_decode_seconds(decoders: dict, name: str, files: list[bytes], windows, passes: int) -> float | None:
    """Seconds to decode only each image's window with decoder ``name`` (None if it is not installed or
    cannot read these files)."""
    decode = decoders.get(name)
    if decode is None:
        return None
    try:
        for data, window in zip(files, windows):  # also the warm-up pass
            decode(data, window)
    except Exception:  # noqa: BLE001 - the region figure is informative; the full-decode limit stands alone
        return None
    return _best_seconds(lambda: [decode(data, window) for data, window in zip(files, windows)], passes)


def _best_seconds(work: Callable[[], None], passes: int) -> float:
    best = math.inf
    for _ in range(passes):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def measure(pipeline: str, data: str, threads: int, passes: int, seed: int) -> dict:
    import cv2

    cv2.setNumThreads(1)
    files = []
    for path, _ in harness.list_images(data):
        with open(path, "rb") as f:
            files.append(f.read())
    n = len(files)
    decoders = _decoders()
    decode_s = {}
    images = None
    for name, decode in decoders.items():
        try:
            decoded = [decode(b) for b in files]  # also the warm-up pass
        except Exception as e:  # noqa: BLE001 - a decoder that cannot read these files is left out, and said so
            decode_s[name] = f"failed: {type(e).__name__}: {e}"
            continue
        images = images or decoded
        decode_s[name] = _best_seconds(lambda decode=decode: [decode(b) for b in files], passes)
    timed = {k: v for k, v in decode_s.items() if isinstance(v, float)}
    if not timed:
        raise RuntimeError(f"no decoder could decode the images in {data!r}: {decode_s}")
    best = min(timed, key=timed.get)
    size = harness.OUTPUT_SIZE
    windows = _windows(pipeline, [img.shape[:2] for img in images], seed)

    def crop_resize(img: np.ndarray, window) -> np.ndarray:
        y, x, h, w = window
        return cv2.resize(img[y:y + h, x:x + w], (size, size), interpolation=cv2.INTER_LINEAR)

    crops = [crop_resize(img, win) for img, win in zip(images, windows)]
    crop_resize_s = _best_seconds(lambda: [crop_resize(img, win) for img, win in zip(images, windows)], passes)
    normalize_s = _best_seconds(lambda: [harness_normalize(c) for c in crops], passes)
    regions = {name: _region_decode_seconds(decoders, name, files, windows, passes)
               for name in ("nvimgcodec", "jaxdali-jpeg")}
    regions = {name: s for name, s in regions.items() if s is not None}
    best_region = min(regions, key=regions.get) if regions else None
    region = regions.get(best_region)

    def threaded(decode: Callable, windowed: bool) -> float:
        """Seconds for the work on ``threads`` threads (after a warm-up pass: per-thread decoders)."""
        def one(i: int) -> None:
            if windowed:
                cv2.resize(decode(files[i], windows[i]), (size, size), interpolation=cv2.INTER_LINEAR)
            else:
                crop_resize(decode(files[i]), windows[i])

        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, range(n)))
            return _best_seconds(lambda: list(pool.map(one, range(n))), passes)

    threaded_s = threaded(decoders[best], False)
    threaded_region_s = None if region is None else threaded(decoders[best_region], True)
    nvimgcodec = {}
    if "nvimgcodec" in timed and best != "nvimgcodec":
        nvimgcodec["nvimgcodec_measured_images_per_s"] = n / threaded(decoders["nvimgcodec"], False)
    if "nvimgcodec" in regions and best_region != "nvimgcodec":
        nvimgcodec["nvimgcodec_measured_region_images_per_s"] = n / threaded(decoders["nvimgcodec"], True)

    one_thread = n / (timed[best] + crop_resize_s)
    return {
        "system": "raw",
        "mode": f"{best} full decode + OpenCV crop + resize, bytes in memory",
        "pipeline": pipeline,
        "images": n,
        "mean_file_bytes": sum(len(b) for b in files) / n,
        "mean_megapixels": sum(img.shape[0] * img.shape[1] for img in images) / n / 1e6,
        "decode_us": {k: (1e6 * v / n if isinstance(v, float) else v) for k, v in decode_s.items()},
        "best_decoder": best,
        "crop_resize_us": 1e6 * crop_resize_s / n,
        # Decoding only the window (the faster of nvImageCodec and the JPEG kernel), then resizing it: what a
        # loader that decodes only what the crop needs could reach, for reading the full-decode limit against.
        "region_decode_us": None if region is None else 1e6 * region / n,
        "region_decoder": best_region,
        "region_decode_us_by_decoder": {name: 1e6 * s / n for name, s in regions.items()},
        "one_thread_region_images_per_s": None if region is None else n / (region + crop_resize_s),
        "normalize_us": 1e6 * normalize_s / n,
        "one_thread_images_per_s": one_thread,
        "threads": threads,
        "sum_images_per_s": threads * one_thread,
        "measured_images_per_s": n / threaded_s,
        "measured_region_images_per_s": None if threaded_region_s is None else n / threaded_region_s,
        **nvimgcodec,
        "versions": {"opencv": cv2.__version__, "numpy": np.__version__},
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", choices=harness.PIPELINES, required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args(argv)
    result = measure(a.pipeline, a.data, a.threads, a.passes, a.seed)
    harness.emit(result)
    return result


if __name__ == "__main__":
    main()
