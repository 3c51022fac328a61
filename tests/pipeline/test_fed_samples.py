"""Decoder -> resize fed sample by sample (``jaxdali.ops.sample_source``): the plan picks the pairs,
and the values, warnings and errors are those of the two operators run one after the other.

The reference of every comparison is the same pipeline with the decoders' ``sample_source`` hook
removed, which the plan then never feeds.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from PIL import Image

from jaxdali import fn, pipeline_def, types
from jaxdali.ops import decoders
from jaxdali.ops.decoders import CorruptImageWarning, ImageDecodeError


@pytest.fixture(autouse=True)
def backend(decoder_backend) -> str:
    """Every test of this file runs with each decoding backend (``decoder_backend``, tests/conftest.py)."""
    return decoder_backend


def jpeg(h: int, w: int, seed: int, orientation: int = 1) -> bytes:
    """A noisy-gradient JPEG of h x w, with an EXIF orientation."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    pixels = np.stack([x * 255 // w, y * 255 // h, (x + y) % 256], -1) + rng.integers(0, 40, (h, w, 3))
    exif = Image.Exif()
    exif[0x0112] = orientation
    buf = io.BytesIO()
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(buf, format="JPEG", quality=90, exif=exif)
    return buf.getvalue()


def corrupt_jpeg() -> bytes:
    """Decodable, but libjpeg prints "Corrupt JPEG data: ... extraneous bytes"."""
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buf, format="JPEG", quality=90)
    data = bytearray(buf.getvalue())
    data[len(data) // 2] ^= 0x55
    return bytes(data)


#: Sizes and orientations that differ per sample (6 and 8 swap the axes).
SHAPES = [(60, 90, 1), (120, 80, 6), (75, 75, 1), (50, 140, 8), (96, 64, 3), (140, 110, 1), (33, 47, 1), (88, 66, 1)]
IMAGES = [jpeg(h, w, k, o) for k, (h, w, o) in enumerate(SHAPES)]
#: The decoded (oriented) height and width of each of IMAGES.
sizes = [(w, h) if o in (6, 8) else (h, w) for h, w, o in SHAPES]


def train(source):
    images = fn.decoders.image_random_crop(fn.external_source(source=source, batch=True), output_type=types.RGB)
    images = fn.resize(images, resize_x=56, resize_y=56)
    return fn.crop_mirror_normalize(images, dtype=types.FLOAT, mean=[120.0] * 3, std=[60.0] * 3,
                                    mirror=fn.random.coin_flip())


def val(source):
    images = fn.decoders.image(fn.external_source(source=source, batch=True), output_type=types.RGB)
    images = fn.resize(images, resize_shorter=64)  # windowed: the crop below reads 48 x 48 of it
    return fn.crop_mirror_normalize(images, crop=(48, 48), dtype=types.FLOAT, mean=[120.0] * 3, std=[60.0] * 3)


def gray_upscale(source):
    images = fn.decoders.image(fn.external_source(source=source, batch=True), output_type=types.GRAY)
    return fn.resize(images, size=[150, 170], interp_type=types.INTERP_CUBIC)


def build(graph, datas, fed: bool, monkeypatch, **kwargs):
    if not fed:
        monkeypatch.setattr(decoders.ImageDecoder, "sample_source", None)
    arrays = [np.frombuffer(d, np.uint8) for d in datas]
    pipe = pipeline_def(lambda: graph(lambda: list(arrays)), batch_size=len(datas), num_threads=2, device_id=None,
                        seed=7, **kwargs)()
    pipe.build()
    return pipe


def run(graph, datas, fed: bool, monkeypatch, iterations: int = 2) -> tuple[list[list[np.ndarray]], list[str]]:
    """Outputs of ``iterations`` runs (per output, the samples), and the names of the fed producers."""
    with monkeypatch.context() as m:
        pipe = build(graph, datas, fed, m)
        try:
            fed_ops = [node.name for node, _ in pipe._runner.plan.steps if id(node) in pipe._runner.plan.fed]
            outs = []
            for _ in range(iterations):
                outs.extend([np.asarray(s) for s in out.as_cpu()] for out in pipe.run())
            return outs, fed_ops
        finally:
            pipe.close()


def decoded(source):
    return fn.decoders.image(fn.external_source(source=source, batch=True), output_type=types.RGB)


def random_resized_crop(source):
    return fn.random_resized_crop(decoded(source), size=(40, 48))


def resize_crop_mirror(source):
    return fn.resize_crop_mirror(decoded(source), resize_shorter=64, crop=(48, 40), crop_pos_x=0.3, mirror=1)


def fast_resize_crop_mirror(source):
    return fn.fast_resize_crop_mirror(decoded(source), resize_x=70, resize_y=50, crop=(30, 30), mirror=2)


def resize_roi(source):
    return fn.resize(decoded(source), size=(32, 36), roi_start=(0.2, 0.1), roi_end=(0.7, 0.8), roi_relative=True)


def resize_flipped_roi(source):
    return fn.resize(decoded(source), size=(30, 30), roi_start=(20, 40), roi_end=(5, 10),
                     interp_type=types.INTERP_CUBIC)


def experimental_resize(source):
    return fn.experimental.resize(decoded(source), resize_x=41, resize_y=37, antialias=False)


def image_crop(source):
    images = fn.decoders.image_crop(fn.external_source(source=source, batch=True), crop=(30, 28),
                                    crop_pos_x=fn.random.uniform(range=(0, 1)))
    return fn.resize(images, size=(20, 24))


def image_slice(source):
    images = fn.decoders.image_slice(fn.external_source(source=source, batch=True),
                                     fn.random.uniform(range=(0.0, 0.3), shape=2),
                                     fn.random.uniform(range=(0.4, 0.6), shape=2))
    return fn.resize(images, resize_shorter=20)


@pytest.mark.parametrize("graph", [train, val, gray_upscale, random_resized_crop, resize_crop_mirror,
                                   fast_resize_crop_mirror, resize_roi, resize_flipped_roi, experimental_resize,
                                   image_crop, image_slice])
def test_fed_values_equal_the_operators_run_one_after_the_other(graph, monkeypatch):
    fed, fed_ops = run(graph, IMAGES, True, monkeypatch)
    reference, reference_ops = run(graph, IMAGES, False, monkeypatch)
    assert len(fed_ops) == 1 and reference_ops == []
    for a, b in zip(fed, reference, strict=True):
        for x, y in zip(a, b, strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y)


def test_the_plan_feeds_only_a_decoder_whose_one_reader_is_resize(monkeypatch):
    def output_too(source):
        images = fn.decoders.image(fn.external_source(source=source, batch=True))
        return fn.resize(images, resize_x=32, resize_y=32), images

    def two_readers(source):
        images = fn.decoders.image(fn.external_source(source=source, batch=True))
        return fn.resize(images, resize_x=32, resize_y=32), fn.flip(images)

    def not_resize(source):
        return fn.flip(fn.decoders.image(fn.external_source(source=source, batch=True)))

    def through_gpu(source):  # .gpu() on a CPU device is looked through
        return fn.resize(fn.decoders.image(fn.external_source(source=source, batch=True)).gpu(), size=(32, 32))

    def gpu_output_too(source):
        images = fn.decoders.image(fn.external_source(source=source, batch=True)).gpu()
        return fn.resize(images, resize_x=32, resize_y=32), images

    for graph, expected in [(val, 1), (output_too, 0), (two_readers, 0), (not_resize, 0), (through_gpu, 1),
                            (gpu_output_too, 0)]:
        assert len(run(graph, IMAGES[:2], True, monkeypatch, iterations=1)[1]) == expected, graph.__name__


def whole(source):
    images = fn.decoders.image(fn.external_source(source=source, batch=True), output_type=types.RGB)
    return fn.resize(images, resize_x=56, resize_y=40)


def strict_val(source):
    images = fn.decoders.image(fn.external_source(source=source, batch=True), strict_decoding=True)
    return fn.crop_mirror_normalize(fn.resize(images, resize_shorter=64), crop=(48, 48), dtype=types.FLOAT)


def test_codec_messages_warn_and_the_batch_keeps_its_values(monkeypatch):
    """A corrupt image among clean ones: the chunk is decoded again sample by sample (the warning names
    the corrupt sample), and every row equals the unfed run's."""
    datas = IMAGES[:5] + [corrupt_jpeg()] + IMAGES[5:]
    with pytest.warns(CorruptImageWarning, match=r"sample 5: .*Corrupt JPEG data"):
        fed, _ = run(whole, datas, True, monkeypatch, iterations=1)
    with pytest.warns(CorruptImageWarning):
        reference, _ = run(whole, datas, False, monkeypatch, iterations=1)
    assert all(np.array_equal(x, y) for x, y in zip(fed[0], reference[0], strict=True))


def test_only_the_part_the_crop_reads_is_decoded_unless_strict(monkeypatch):
    """The val resize reads a centre part of each image: only that part is decoded, so corrupt data
    outside it may go unreported (as outside a crop window); with strict_decoding the whole image is
    decoded and refused as without feeding."""
    datas = IMAGES[:5] + [corrupt_jpeg()] + IMAGES[5:]
    seen: list = []
    original = decoders._BatchDecode.decode
    monkeypatch.setattr(decoders._BatchDecode, "decode", lambda job, i, part=None: seen.append((i, part)) or
                        original(job, i, part))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptImageWarning)  # nvImageCodec need not reach the damage
        fed, _ = run(val, datas, True, monkeypatch, iterations=1)
    # Upscales that OpenCV's linear resize computes are read whole; the others in part, e.g. row 1,
    # 120 x 80 turned to 80 x 120, only its centre.
    parts = dict(seen)
    assert sorted(parts) == list(range(len(datas))) and sum(p is not None for p in parts.values()) >= 6
    assert parts[1][2] < 80 and parts[1][3] < 120
    with pytest.raises(ImageDecodeError, match=r"sample 5: .*strict_decoding=True"):
        run(strict_val, datas, True, monkeypatch, iterations=1)


@pytest.mark.parametrize("graph", [random_resized_crop, resize_crop_mirror, resize_roi])
def test_a_resize_of_a_source_window_decodes_only_the_part_it_reads(graph, monkeypatch):
    """random_resized_crop, resize_crop_mirror and a resize with a region of interest read a window of
    each image: only the part under it (and the filter's reach) is decoded."""
    seen: list = []
    original = decoders._BatchDecode.decode
    monkeypatch.setattr(decoders._BatchDecode, "decode", lambda job, i, part=None: seen.append((i, part)) or
                        original(job, i, part))
    run(graph, IMAGES, True, monkeypatch, iterations=1)
    parts = dict(seen)
    assert sorted(parts) == list(range(len(IMAGES)))
    smaller = [i for i, p in parts.items() if p is not None and p[2] * p[3] < 0.9 * np.prod(sizes[i])]
    assert len(smaller) >= len(IMAGES) // 2, parts


def test_a_bad_image_raises_the_decoders_error(monkeypatch):
    datas = IMAGES[:3] + [b"this is not an image" * 4] + IMAGES[3:]
    with pytest.raises(ImageDecodeError, match=r"fn.decoders.image_random_crop: sample 3: not a decodable image"):
        run(train, datas, True, monkeypatch, iterations=1)
    datas = IMAGES[:3] + [IMAGES[3][: len(IMAGES[3]) // 2]] + IMAGES[4:]  # truncated: fails while being read
    with pytest.raises(ImageDecodeError, match=r"fn.decoders.image: sample 3.*") as info:
        run(val, datas, True, monkeypatch, iterations=1)
    assert any("computing the samples of" in note for note in getattr(info.value, "__notes__", [])), \
        info.value.__notes__


def test_rows_replaced_before_the_reader_runs_are_copied_whole(monkeypatch):
    """Another decoder with error_policy="replace" runs between the fed decoder and its resize: its
    replacement copies rows of every batch, the fed one included (computed then), as without feeding."""
    bad = [np.frombuffer(d, np.uint8) for d in [b"not an image"] + [jpeg(40, 40, 50 + k) for k in range(len(IMAGES) - 1)]]

    def graph(source):
        resized = train(source)
        other = fn.decoders.image(fn.external_source(source=lambda: list(bad), batch=True), error_policy="replace")
        return resized, other

    with pytest.warns(UserWarning, match="replaced"):
        fed, _ = run(graph, IMAGES, True, monkeypatch, iterations=1)
    with pytest.warns(UserWarning, match="replaced"):
        reference, _ = run(graph, IMAGES, False, monkeypatch, iterations=1)
    for a, b in zip(fed, reference, strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert np.array_equal(fed[0][0], fed[0][1])  # row 0 of the resized images is row 1's copy


def test_error_policy_replace_is_not_fed_and_replaces_as_before(monkeypatch):
    datas = [b"garbage" * 3] + IMAGES[1:]

    def graph(source):
        images = fn.decoders.image(fn.external_source(source=source, batch=True), error_policy="replace")
        return fn.resize(images, resize_x=40, resize_y=30)

    with pytest.warns(UserWarning, match="replaced"):
        fed, _ = run(graph, datas, True, monkeypatch, iterations=1)
    with pytest.warns(UserWarning, match="replaced"):
        reference, _ = run(graph, datas, False, monkeypatch, iterations=1)
    assert all(np.array_equal(x, y) for x, y in zip(fed[0], reference[0], strict=True))
    assert np.array_equal(fed[0][0], fed[0][1])
