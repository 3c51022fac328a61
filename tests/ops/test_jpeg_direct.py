"""The direct libjpeg-turbo JPEG path (``jaxdali.ops.jpeg_direct``): nvImageCodec's pixels, whole images and
windows, every chroma layout of the shared JPEG variants; declines what nvImageCodec must report; the
decoders give the same batches with it and without it."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")
from PIL import Image  # noqa: E402

from jaxdali import config, fn, pipeline_def, types  # noqa: E402
from jaxdali.ops import decoders, jpeg_direct  # noqa: E402


@pytest.fixture(autouse=True)
def direct_in_use():
    if decoders.jpeg_status()[0] != "direct libjpeg-turbo":
        pytest.skip(f"direct JPEG path not in use: {decoders.jpeg_status()[1]}")


def _jpegs(shared_data, per_folder: int = 6) -> list:
    variants = sorted((shared_data / "jpeg_variants").rglob("*.jpg"))
    flowers = sorted((shared_data / "flowers").rglob("*.jpg"))[::40][:per_folder]
    return variants + flowers


def _nvimgcodec(data: np.ndarray, window, output_type, fast_idct: bool) -> np.ndarray:
    spec = decoders._DecodeSpec(output_type, np.dtype(np.uint8), fast_idct)
    header = decoders._Header("jpeg", 0, 0, 1, decoders._nvimgcodec_module().CodeStream(data))
    return decoders._decode_nvimgcodec(header, spec, decoders._params(spec), window)


def _windows(rng, h: int, w: int, n: int) -> list:
    """Random windows, some starting on a block edge (where the extra column on the left matters) and some
    ending at the right edge (no extra column there)."""
    out = []
    for k in range(n):
        wh, ww = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
        y, x = int(rng.integers(0, h - wh + 1)), int(rng.integers(0, w - ww + 1))
        if k % 3 == 1:
            x = x // 16 * 16
        elif k % 3 == 2:
            x = w - ww
        out.append((y, x, wh, ww))
    return out


@pytest.mark.parametrize("output_type, fast_idct", [(types.RGB, False), (types.BGR, False), (types.RGB, True)])
def test_whole_images_and_windows_are_nvimgcodecs_pixels(shared_data, output_type, fast_idct):
    """Progressive, 4:4:0, 1x2, non-interleaved, grayscale, RGB-coded and asymmetric-subsampling JPEGs and
    flower photos, whole and in 12 windows each: the same bytes as nvImageCodec's libjpeg-turbo extension."""
    rng = np.random.default_rng(7)
    bgr = output_type == types.BGR
    for path in _jpegs(shared_data):
        data = np.fromfile(path, np.uint8)
        h, w, _ = jpeg_direct.jpeg_size(data)
        got = jpeg_direct.decode(data, h, w, None, bgr, fast_idct)
        assert got is not None and got.flags.c_contiguous, path
        np.testing.assert_array_equal(got, _nvimgcodec(data, None, output_type, fast_idct), err_msg=str(path))
        for window in _windows(rng, h, w, 12):
            got = jpeg_direct.decode(data, h, w, window, bgr, fast_idct)
            assert got is not None and got.shape == (window[2], window[3], 3), (path, window)
            np.testing.assert_array_equal(got, _nvimgcodec(data, window, output_type, fast_idct),
                                          err_msg=f"{path} {window}")


def test_declines_what_nvimgcodec_must_report_or_decode(shared_data):
    """Truncated data, garbage, a CMYK JPEG and a 12-bit frame header go to nvImageCodec (None, or no size)."""
    data = np.fromfile(sorted((shared_data / "flowers").rglob("*.jpg"))[0], np.uint8)
    h, w, _ = jpeg_direct.jpeg_size(data)
    assert jpeg_direct.decode(data[: len(data) // 2], h, w, None, False, False) is None
    assert jpeg_direct.decode(data[: len(data) // 2], h, w, (h - 20, 0, 20, w), False, False) is None
    assert jpeg_direct.jpeg_size(np.arange(200, dtype=np.uint8)) is None
    assert jpeg_direct.jpeg_size(np.zeros(0, np.uint8)) is None
    assert jpeg_direct.decode(np.arange(200, dtype=np.uint8), 10, 10, None, False, False) is None
    cmyk = io.BytesIO()
    Image.new("CMYK", (40, 30), (10, 200, 30, 5)).save(cmyk, "JPEG")
    assert jpeg_direct.jpeg_size(np.frombuffer(cmyk.getvalue(), np.uint8)) is None
    sof = bytes(data).find(b"\xff\xc0")
    twelve_bit = data.copy()
    twelve_bit[sof + 4] = 12  # the precision byte of the frame header
    assert jpeg_direct.jpeg_size(twelve_bit) is None


def _exif_jpeg(orientation: int, little_endian: bool, kind: int) -> bytes:
    """A small JPEG with an APP1 Exif segment whose IFD0 holds ``orientation`` as tag type ``kind``."""
    e = "<" if little_endian else ">"
    value = struct.pack(e + ("I" if kind == 4 else "HH"), orientation, *(() if kind == 4 else (0,)))
    tiff = (b"II" if little_endian else b"MM") + struct.pack(e + "HI", 42, 8) + struct.pack(e + "H", 2) \
        + struct.pack(e + "HHI", 0x0100, 3, 1) + struct.pack(e + "HH", 40, 0) \
        + struct.pack(e + "HHI", 0x0112, kind, 1) + value + struct.pack(e + "I", 0)
    app1 = b"\xff\xe1" + struct.pack(">H", 2 + 6 + len(tiff)) + b"Exif\x00\x00" + tiff
    ok, jpeg = cv2.imencode(".jpg", np.full((30, 40, 3), 90, np.uint8))
    return jpeg.tobytes()[:2] + app1 + jpeg.tobytes()[2:]


def test_the_orientation_is_read_as_the_python_reader_reads_it():
    """Every orientation, both byte orders, SHORT and LONG values, then 3,000 damaged variants (bytes changed
    in the headers, cut short): the kernel's marker scan gives decoders._jpeg_orientation's answer."""
    rng = np.random.default_rng(3)
    seeds = [_exif_jpeg(o, little, kind) for o in range(0, 10) for little in (True, False) for kind in (3, 4)]
    for seed in seeds:
        found = jpeg_direct.jpeg_size(np.frombuffer(seed, np.uint8))
        assert found is not None and found[:2] == (30, 40)
        assert found[2] == decoders._jpeg_orientation(memoryview(seed))
    assert {jpeg_direct.jpeg_size(np.frombuffer(s, np.uint8))[2] for s in seeds} == set(range(1, 9))
    checked = 0
    for _ in range(3000):
        data = bytearray(seeds[int(rng.integers(len(seeds)))])
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(2, 90))] = int(rng.integers(256))
        if rng.random() < 0.3:
            data = data[: int(rng.integers(4, len(data)))]
        found = jpeg_direct.jpeg_size(np.frombuffer(bytes(data), np.uint8))
        if found is not None:
            assert found[2] == decoders._jpeg_orientation(memoryview(bytes(data))), bytes(data[:90])
            checked += 1
    assert checked > 1000


def test_a_window_buffer_too_narrow_is_refused(shared_data):
    data = np.fromfile(sorted((shared_data / "flowers").rglob("*.jpg"))[0], np.uint8)
    with pytest.raises(ValueError, match="W >= w \\+ 33"):
        jpeg_direct._KERNEL.decode(data, np.empty((10, 40, 3), np.uint8), 0, 5, 10, 30, True, False, False)


@pytest.fixture
def without_direct(monkeypatch):
    """Call it to run the decoders built afterwards as without the kernel (nvImageCodec decodes every JPEG)."""
    return lambda: monkeypatch.setattr(decoders._DecodeSpec, "direct", property(lambda self: False))


def _batches(flowers_root, fused: bool, crop: bool, layout: str = "HWC") -> list:
    @pipeline_def(batch_size=16, num_threads=2, device_id=None, seed=5)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=flowers_root, random_shuffle=True, seed=3)
        if crop:
            images = fn.decoders.image_random_crop(jpegs)
        else:
            images = fn.decoders.image(jpegs)
        if fused:  # the decoder feeds resize sample by sample (strided window rows)
            images = fn.resize(images, resize_shorter=96)
            images = fn.crop_mirror_normalize(images, crop=(80, 80), dtype=types.FLOAT, output_layout=layout,
                                              mean=[120.0, 110.0, 100.0], std=[60.0, 61.0, 62.0])
        return images

    p = pipe()
    p.build()
    try:
        out = []
        for _ in range(3):
            (batch,) = p.run()
            out.append([np.asarray(batch.at(i)) for i in range(len(batch))])
        return out
    finally:
        p.close()


@pytest.mark.parametrize("fused, crop", [(False, False), (False, True), (True, False), (True, True)])
def test_pipelines_give_the_same_batches_with_and_without_it(flowers_root, without_direct, fused, crop):
    direct = _batches(flowers_root, fused, crop)
    without_direct()
    reference = _batches(flowers_root, fused, crop)
    for got, expected in zip(direct, reference):
        assert len(got) == len(expected) == 16
        for g, e in zip(got, expected):
            assert g.flags.c_contiguous
            np.testing.assert_array_equal(g, e)


def test_status_follows_the_config():
    assert jpeg_direct.kernel_status()[0] == "compiled kernel"
    assert config.runtime_info()["jpeg_decoder"] == "direct libjpeg-turbo"
    saved = config.get("disable_kernel")
    try:
        config.update("disable_kernel", True)
        assert decoders.jpeg_status()[0] == "nvimgcodec"
        assert "JAXDALI_DISABLE_KERNEL" in decoders.jpeg_status()[1]
        assert not decoders._DecodeSpec(types.RGB, np.dtype(np.uint8), False).direct
    finally:
        config.update("disable_kernel", saved)
