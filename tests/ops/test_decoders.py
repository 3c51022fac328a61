"""fn.decoders.image / image_random_crop (and the legacy fn.image_decoder*): values, formats, errors.

Tolerances (also in docs/decoding.md):

* JPEG against OpenCV's libjpeg-turbo decode (same IDCT and fancy upsampling): at most
  ``JPEG_MAX_ERROR`` levels and a mean absolute error of at most ``JPEG_MEAN_ERROR``. Measured on all
  220 shared JPEGs: 0 and 0 (bit-exact); the slack allows another libjpeg-turbo build.
* PNG, BMP, TIFF, lossless WebP, lossless JPEG 2000, PNM: exact.
* Region (crop-window) decoding against the same window cut from a full decode: exact (measured 0
  on every shared file and format).

Every test runs with both decoding backends (the ``backend`` fixture): nvImageCodec and the OpenCV
fallback of ``jaxdali.ops.decoders_opencv``. The two agree exactly on every shared photo, full and
cropped (``test_backends_agree_on_real_photos``).
"""

from __future__ import annotations

import io
import pathlib
import struct
import warnings
import zlib

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")
from PIL import Image, ImageOps  # noqa: E402

from jaxdali import config, fn, pipeline_def, types  # noqa: E402
from jaxdali.ops import rng  # noqa: E402
from jaxdali.ops.crop_window import crop_window_draws, random_crop_windows  # noqa: E402
from jaxdali.ops.decoders import (FORMAT_DECODERS, ImageDecodeError, ImageRandomCropDecoder,  # noqa: E402
                                  LargeImageWarning, decode_path, exif_orientation)
from jaxdali.ops.schema import OpArgumentError  # noqa: E402

@pytest.fixture(autouse=True)
def backend(decoder_backend) -> str:
    """Every test of this file runs with each decoding backend (``decoder_backend``, tests/conftest.py)."""
    return decoder_backend


def _path_with(backend: str, path: str) -> str:
    """The ``decode_path`` of a format under ``backend`` (the fallback's entries end in "-opencv")."""
    return path if backend == "nvimgcodec" else path.split("-")[0] + "-opencv"


JPEG_MAX_ERROR = 4
JPEG_MEAN_ERROR = 0.1

DATA = pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "data"


def _shared(sub: str) -> pathlib.Path:
    path = DATA / sub
    if not path.is_dir():
        pytest.skip(f"shared test images not found at {path}")
    return path


# -- helpers ----------------------------------------------------------------------------------------

def _samples(batch) -> list[np.ndarray]:
    batch = batch.as_cpu()
    return [np.asarray(batch.at(i)) for i in range(len(batch))]


def run_graph(graph, *, iterations=1, num_threads=2, device_id=None, batch_size=None, seed=1):
    """Builds a pipeline around ``graph()``, runs it, closes it; returns the outputs of each run."""

    @pipeline_def(batch_size=batch_size, num_threads=num_threads, device_id=device_id, seed=seed)
    def pipe_def():
        return graph()

    pipe = pipe_def()
    try:
        pipe.build()
        return [pipe.run() for _ in range(iterations)]
    finally:
        pipe.close()


def decode(datas, op: str = "decoders.image", iterations=1, num_threads=2, device=None, **kwargs):
    """Decodes the encoded byte arrays ``datas`` with ``fn.<op>``; returns per-iteration sample lists."""
    datas = [np.frombuffer(d, np.uint8) if isinstance(d, bytes) else d for d in datas]
    func = fn
    for part in op.split("."):
        func = getattr(func, part)
    extra = {} if device is None else {"device": device}

    def graph():
        return func(fn.external_source(source=lambda: list(datas), batch=True), **extra, **kwargs)

    outs = run_graph(graph, iterations=iterations, num_threads=num_threads, batch_size=len(datas),
                     device_id=0 if device == "mixed" else None)
    return [_samples(o[0]) for o in outs]


def decode_files(paths, **kwargs):
    return decode([np.fromfile(p, np.uint8) for p in paths], **kwargs)[0]


def assert_jpeg_close(actual, expected, what=""):
    assert actual.shape == expected.shape, (what, actual.shape, expected.shape)
    err = np.abs(actual.astype(np.int32) - expected.astype(np.int32))
    assert err.max() <= JPEG_MAX_ERROR and err.mean() <= JPEG_MEAN_ERROR, (what, err.max(), err.mean())


def cv2_reference(path, gray=False) -> np.ndarray:
    img = cv2.imdecode(np.fromfile(path, np.uint8), cv2.IMREAD_GRAYSCALE if gray else cv2.IMREAD_COLOR)
    return img[:, :, None] if gray else img[:, :, ::-1]


def encode(array: np.ndarray, fmt: str, **kwargs) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format=fmt, **kwargs)
    return buf.getvalue()


def gradient(h=37, w=53) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([x * 4, y * 6, (x * y) % 256], -1).astype(np.uint8)


def smooth(h=48, w=80) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([x * 3, y * 5, (x + y) * 2], -1).astype(np.uint8)


def exif_bytes(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()


def png_claiming(width: int, height: int) -> bytes:
    """A tiny PNG whose header declares ``width`` x ``height`` RGB pixels."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


# -- real photos against references ---------------------------------------------------------------

@pytest.mark.slow
def test_jpeg_variants_match_opencv():
    paths = sorted(_shared("jpeg_variants").glob("*/*.jpg"))
    assert len(paths) == 20
    rgb = decode_files(paths)
    gray = decode_files(paths, output_type=types.GRAY)
    for path, out_rgb, out_gray in zip(paths, rgb, gray):
        assert out_rgb.dtype == np.uint8
        assert_jpeg_close(out_rgb, cv2_reference(path), path.name)
        assert_jpeg_close(out_gray, cv2_reference(path, gray=True), path.name)


@pytest.mark.slow
def test_every_flower_photo_matches_opencv():
    paths = sorted(_shared("flowers").glob("*/*.jpg"))
    assert len(paths) == 200
    for path, out in zip(paths, decode_files(paths)):
        assert_jpeg_close(out, cv2_reference(path), path.name)


@pytest.mark.slow
def test_backends_agree_on_real_photos(backend):
    """nvImageCodec and the OpenCV fallback on every shared JPEG and PNG, whole and cropped: identical."""
    if backend != "nvimgcodec":
        pytest.skip("compares both backends; runs once")
    paths = sorted(_shared("flowers").glob("*/*.jpg")) + sorted(_shared("jpeg_variants").glob("*/*.jpg")) + \
        sorted(_shared("png").glob("*.png"))
    datas = [np.fromfile(p, np.uint8) for p in paths]
    results = {}
    for name in ("nvimgcodec", "opencv"):
        config.update("decoder", name)
        results[name] = (decode(datas, num_threads=2)[0], decode(datas, op="decoders.image_random_crop", seed=5)[0],
                         decode(datas, output_type=types.GRAY)[0])
    for kind, a_batch, b_batch in zip(("rgb", "crop", "gray"), results["nvimgcodec"], results["opencv"]):
        for path, a, b in zip(paths, a_batch, b_batch):
            np.testing.assert_array_equal(a, b, err_msg=f"{kind}: {path.name}")


def test_png_files_decode_exactly():
    paths = sorted(_shared("png").glob("*.png"))
    rgb = decode_files(paths)
    native = decode_files(paths, output_type=types.ANY_DATA)
    for path, out, out_native in zip(paths, rgb, native):
        with Image.open(path) as im:
            np.testing.assert_array_equal(out, np.asarray(im.convert("RGB")), err_msg=path.name)
            mode = im.mode
            expected_native = np.asarray(im)
        channels = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
        assert out_native.shape == (*out.shape[:2], channels), path.name
        np.testing.assert_array_equal(out_native.reshape(expected_native.shape), expected_native, err_msg=path.name)


def test_reader_output_decodes_as_ragged_hwc_batch():
    root = _shared("flowers")

    def graph():
        jpegs, labels = fn.readers.file(file_root=str(root))
        return fn.decoders.image(jpegs, output_type=types.RGB), labels

    images, labels = run_graph(graph, batch_size=8)[0]
    assert len(images) == 8 and images.layout() == "HWC"
    first_class = sorted(d for d in root.iterdir() if d.is_dir())[0]
    first = sorted(first_class.glob("*.jpg"))[0]
    assert_jpeg_close(images.at(0), cv2_reference(first))


# -- output types and dtypes ---------------------------------------------------------------------

def test_output_types():
    path = sorted(_shared("jpeg_variants").glob("skimage/rocket.jpg"))[0]
    data = [np.fromfile(path, np.uint8)]
    rgb = decode(data)[0][0]
    bgr = decode(data, output_type=types.BGR)[0][0]
    gray = decode(data, output_type=types.GRAY)[0][0]
    ycbcr = decode(data, output_type=types.YCbCr)[0][0]
    np.testing.assert_array_equal(bgr, rgb[:, :, ::-1])
    assert gray.shape == rgb.shape[:2] + (1,)
    # BT.601 studio swing from RGB, as DALI: Y in [16, 235], chroma centred on 128.
    m = np.array([[65.481, 128.553, 24.966], [-37.797, -74.203, 112.0], [112.0, -93.786, -18.214]]) / 255
    expected = rgb.astype(np.float64) @ m.T + np.array([16.0, 128.0, 128.0])
    assert ycbcr.dtype == np.uint8 and ycbcr.shape == rgb.shape
    assert np.abs(ycbcr - np.rint(expected)).max() <= 1


def test_any_data_keeps_native_channels():
    rgba = np.dstack([gradient(), np.full(gradient().shape[:2], 77, np.uint8)])
    gray = gradient()[:, :, 0]
    out = decode([encode(rgba, "PNG"), encode(gray, "PNG"), encode(gradient(), "PNG")],
                 output_type=types.ANY_DATA)[0]
    np.testing.assert_array_equal(out[0], rgba)
    np.testing.assert_array_equal(out[1], gray[:, :, None])
    np.testing.assert_array_equal(out[2], gradient())


@pytest.mark.parametrize("dtype, np_dtype, expected", [
    (types.UINT8, np.uint8, lambda v: v),
    (types.FLOAT, np.float32, lambda v: v.astype(np.float32) / np.float32(255)),
    (types.UINT16, np.uint16, lambda v: v.astype(np.uint16) * 257),
    (types.INT16, np.int16, lambda v: np.rint(v / 255 * 32767)),
    (types.INT8, np.int8, lambda v: np.rint(v / 255 * 127)),
    (types.INT32, np.int32, lambda v: np.rint(v.astype(np.float64) / 255 * (2 ** 31 - 1))),
])
def test_dtype_rescales_to_the_dynamic_range(dtype, np_dtype, expected):
    src = gradient()
    out = decode([encode(src, "PNG")], dtype=dtype)[0][0]
    assert out.dtype == np_dtype
    tolerance = 1e-7 if np_dtype == np.float32 else (256 if np_dtype == np.int32 else 0)  # int32 via float32
    np.testing.assert_allclose(out.astype(np.float64), expected(src).astype(np.float64), rtol=0, atol=tolerance)


@pytest.mark.parametrize("ext", [".png", ".jp2", ".tiff"])
def test_sixteen_bit_png_native_and_rescaled(ext):
    src = (np.arange(37 * 53 * 3).reshape(37, 53, 3) * 41 % 65536).astype(np.uint16)
    ok, buf = cv2.imencode(ext, src[:, :, ::-1])
    assert ok
    as16 = decode([buf], dtype=types.UINT16)[0][0]
    as8 = decode([buf])[0][0]
    np.testing.assert_array_equal(as16, src)
    np.testing.assert_array_equal(as8, np.rint(src / 257).astype(np.uint8))


@pytest.mark.parametrize("dtype", [types.FLOAT16, types.FLOAT64, types.BOOL])
def test_unsupported_dtype_is_refused_at_build(dtype):
    with pytest.raises(OpArgumentError, match="fn.decoders.image: argument 'dtype' must be one of"):
        decode([encode(gradient(), "PNG")], dtype=dtype)


# -- formats --------------------------------------------------------------------------------------

def _lossless_files():
    src, gray = gradient(), gradient()[:, :, 1]
    ok, jp2 = cv2.imencode(".jp2", src[:, :, ::-1])
    assert ok
    return [
        ("png", encode(src, "PNG"), src),
        ("bmp", encode(src, "BMP"), src),
        ("tiff", encode(src, "TIFF"), src),
        ("tiff", encode(src, "TIFF", compression="tiff_lzw"), src),
        ("webp", encode(src, "WEBP", lossless=True), src),
        ("webp-opencv", encode(src, "WEBP", lossless=True, exif=exif_bytes(1)), src),
        ("jpeg2k", jp2.tobytes(), src),
        ("pnm", encode(src, "PPM"), src),
        ("pnm", encode(gray, "PPM"), np.repeat(gray[:, :, None], 3, axis=2)),
    ]


def test_lossless_formats_decode_exactly_and_report_their_decoder(backend):
    files = _lossless_files()
    outs = decode([f[1] for f in files])[0]
    for (path, data, expected), out in zip(files, outs):
        assert decode_path(np.frombuffer(data, np.uint8)) == _path_with(backend, path)
        assert _path_with(backend, path) in FORMAT_DECODERS
        np.testing.assert_array_equal(out, expected, err_msg=path)


def test_lossy_webp_and_jpeg_in_tiff_decode_close():
    src = smooth()
    files = [encode(src, "WEBP", quality=95), encode(src, "TIFF", compression="jpeg", quality=95)]
    for out in decode(files)[0]:
        assert out.shape == src.shape
        assert np.abs(out.astype(int) - src).mean() < 3


def test_gif_is_not_supported():
    gif = encode(gradient(), "GIF")
    with pytest.raises(ImageDecodeError, match="not a decodable image"):
        decode([gif])


# -- EXIF orientation -------------------------------------------------------------------------------

@pytest.mark.parametrize("orientation", range(1, 9))
def test_jpeg_exif_orientation_matches_pil(orientation, tmp_path):
    path = tmp_path / f"o{orientation}.jpg"
    Image.fromarray(smooth()).save(path, quality=95, exif=exif_bytes(orientation))
    assert exif_orientation(np.fromfile(path, np.uint8)) == orientation
    adjusted = decode_files([path])[0]
    stored = decode_files([path], adjust_orientation=False)[0]
    with Image.open(path) as im:
        assert_jpeg_close(adjusted, np.asarray(ImageOps.exif_transpose(im).convert("RGB")), f"o{orientation}")
    with Image.open(path) as im:
        assert_jpeg_close(stored, np.asarray(im.convert("RGB")), f"o{orientation} unadjusted")
    assert adjusted.shape == ((80, 48, 3) if orientation >= 5 else (48, 80, 3))


@pytest.mark.parametrize("fmt, kwargs", [("PNG", {}), ("TIFF", {}), ("WEBP", {"lossless": True})])
def test_exif_orientation_of_other_formats(fmt, kwargs):
    src = smooth()
    data = encode(src, fmt, exif=exif_bytes(6), **kwargs)  # 6: rotate 90 degrees clockwise to display
    assert exif_orientation(np.frombuffer(data, np.uint8)) == 6
    np.testing.assert_array_equal(decode([data])[0][0], np.rot90(src, k=-1))
    np.testing.assert_array_equal(decode([data], adjust_orientation=False)[0][0], src)


# -- errors -----------------------------------------------------------------------------------------

def _bad_files(good: bytes) -> dict[str, bytes]:
    png = encode(gradient(), "PNG")
    corrupt_png = bytearray(png)
    corrupt_png[len(png) // 2] ^= 0xFF  # a damaged byte inside the compressed data (CRC mismatch)
    return {
        "empty.jpg": b"",
        "garbage.jpg": b"this is not an image at all" * 10,
        "truncated.jpg": good[: len(good) // 2],
        "header_only.jpg": good[:100],
        "truncated.png": png[:60],
        "corrupt.png": bytes(corrupt_png),
    }


@pytest.mark.parametrize("op", ["image", "image_random_crop"])
@pytest.mark.parametrize("name", ["empty.jpg", "garbage.jpg", "truncated.jpg", "header_only.jpg", "truncated.png",
                                  "corrupt.png"])
def test_bad_file_error_names_the_file(name, op, tmp_path):
    good = encode(smooth(), "JPEG", quality=90)
    (tmp_path / "good.jpg").write_bytes(good)
    (tmp_path / name).write_bytes(_bad_files(good)[name])
    files = [str(tmp_path / "good.jpg"), str(tmp_path / name)]

    def graph():
        jpegs, _ = fn.readers.file(files=files)
        return getattr(fn.decoders, op)(jpegs)

    with pytest.raises(ImageDecodeError) as info:
        run_graph(graph, batch_size=2)
    message = str(info.value)
    assert message.startswith(f"fn.decoders.{op}: sample 1 (") and str(tmp_path / name) in message, message


def test_bad_sample_without_file_name_names_the_index():
    good = encode(smooth(), "JPEG", quality=90)
    with pytest.raises(ImageDecodeError, match=r"fn.decoders.image_random_crop: sample 2: .*empty \(0 bytes\)"):
        decode([good, good, b""], op="decoders.image_random_crop")


def test_input_must_be_bytes():
    with pytest.raises(TypeError, match="sample 0: the input must hold encoded bytes"):
        decode([np.zeros(10, np.float32)])


def test_any_data_without_native_decoding_says_so(backend):
    gray_alpha = Image.fromarray(np.dstack([gradient()[:, :, 0]] * 2), "LA")
    buf = io.BytesIO()
    gray_alpha.save(buf, format="PNG")
    if backend == "opencv":  # OpenCV gives grey + alpha as RGBA
        out = decode([buf.getvalue()], output_type=types.ANY_DATA)[0][0]
        np.testing.assert_array_equal(out, np.dstack([gradient()[:, :, 0]] * 4))
    else:
        with pytest.raises(ImageDecodeError, match="output_type=ANY_DATA"):
            decode([buf.getvalue()], output_type=types.ANY_DATA)
    assert decode([buf.getvalue()])[0][0].shape == (37, 53, 3)


def jpeg_claiming(width: int, height: int) -> bytes:
    """A small real JPEG whose frame header declares ``width`` x ``height`` (its data is for 80 x 48)."""
    jpeg = bytearray(encode(smooth(), "JPEG"))
    sof = jpeg.index(b"\xff\xc0")
    jpeg[sof + 5:sof + 9] = struct.pack(">HH", height, width)
    return bytes(jpeg)


def test_huge_header_is_refused_before_decoding():
    huge = png_claiming(100_000, 100_000)
    with pytest.raises(ImageDecodeError, match=r"fn.decoders.image: sample 0: the image header declares 100000 x "
                                               r"100000 = 10000000000 pixels, at or above the limit "
                                               r"max_image_pixels=178956970"):
        decode([huge])
    with pytest.raises(ImageDecodeError, match="declares 60000 x 60000"):
        decode([jpeg_claiming(60000, 60000)], op="decoders.image_random_crop")


@pytest.mark.filterwarnings("ignore::jaxdali.ops.decoders.LargeImageWarning")
def test_old_default_limit_is_refused_and_the_check_is_inclusive(tmp_path):
    # The old default, 2**28 pixels, let a 16384 x 16384 header through (the check was `>`): ~30-50 s and
    # ~7 GB for a batch of 8. Now the default refuses it, by name, before decoding.
    bomb = tmp_path / "bomb.jpg"
    bomb.write_bytes(jpeg_claiming(16384, 16384))

    def graph():
        jpegs, _ = fn.readers.file(files=[str(bomb)] * 8)
        return fn.decoders.image(jpegs)

    with pytest.raises(ImageDecodeError, match=rf"sample 0 \('{bomb}'\): the image header declares 16384 x 16384 = "
                                               r"268435456 pixels"):
        run_graph(graph, batch_size=8)
    # A limit equal to the declared size refuses it (inclusive), per operator as well as globally.
    with pytest.raises(ImageDecodeError, match="max_image_pixels=3840"):
        decode([encode(smooth(), "PNG")], max_image_pixels=80 * 48)
    assert decode([encode(smooth(), "PNG")], max_image_pixels=80 * 48 + 1)[0][0].shape == (48, 80, 3)


def test_large_image_warns_from_half_the_limit():
    data = encode(smooth(), "PNG")  # 3840 pixels
    with pytest.warns(LargeImageWarning, match="80 x 48 = 3840 pixels, at least half of max_image_pixels=7680"):
        decode([data], max_image_pixels=7680)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decode([data], max_image_pixels=7681)


@pytest.mark.slow
def test_big_header_with_truncated_data_is_an_error_not_a_grey_image():
    # 8000 x 8000 declared, 80 x 48 of data: libjpeg fills the rest with grey and only says "premature end of
    # data segment" on stderr; the decoder used to return the 99.7 % grey image without an error.
    with pytest.raises(ImageDecodeError, match=r"sample 0: its data ends early .*premature end of data segment"):
        decode([jpeg_claiming(8000, 8000)])


def _claim_size(data: bytes, fmt: str, width: int, height: int) -> bytes:
    """``data`` (a PIL-written BMP, TIFF or extended WebP) with its header's size set to width x height."""
    out = bytearray(data)
    if fmt == "BMP":
        struct.pack_into("<ii", out, 18, width, height)
    elif fmt == "TIFF":
        ifd = struct.unpack_from("<I", out, 4)[0]
        for k in range(struct.unpack_from("<H", out, ifd)[0]):
            entry = ifd + 2 + 12 * k
            tag, kind = struct.unpack_from("<HH", out, entry)
            if tag in (256, 257):  # ImageWidth, ImageLength
                struct.pack_into("<H" if kind == 3 else "<I", out, entry + 8, width if tag == 256 else height)
    else:  # WebP: the VP8X canvas (24-bit width - 1, height - 1)
        start = out.index(b"VP8X") + 8
        out[start + 4:start + 10] = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return bytes(out)


@pytest.mark.parametrize("fmt, kwargs, path", [
    ("BMP", {}, "bmp"), ("TIFF", {}, "tiff"),
    ("WEBP", {"lossless": True, "exif": exif_bytes(1)}, "webp-opencv"),  # size from our own WebP header parser
])
def test_huge_header_of_other_formats_is_refused(fmt, kwargs, path, backend):
    data = encode(gradient(), fmt, **kwargs)
    assert decode_path(np.frombuffer(data, np.uint8)) == _path_with(backend, path)
    huge = _claim_size(data, fmt, 60000, 50000)
    for op in ("decoders.image", "decoders.image_random_crop"):
        with pytest.raises(ImageDecodeError, match=rf"fn.{op}: sample 0: the image header declares 60000 x 50000 "):
            decode([huge], op=op)


@pytest.mark.filterwarnings("ignore::jaxdali.ops.decoders.LargeImageWarning")
def test_lowered_pixel_limit_refuses_normal_images():
    data = encode(smooth(), "PNG")  # 80 x 48 = 3840 pixels
    previous = config.get("max_image_pixels")
    config.update("max_image_pixels", 3840)
    try:
        with pytest.raises(ImageDecodeError, match="max_image_pixels=3840"):
            decode([data])
        config.update("max_image_pixels", 3841)
        assert decode([data])[0][0].shape == (48, 80, 3)
    finally:
        config.update("max_image_pixels", previous)


# -- arguments, aliases, devices -----------------------------------------------------------------------

_HINTS = dict(hw_decoder_load=0.9, preallocate_width_hint=5980, preallocate_height_hint=6430,
              device_memory_padding=211025920, host_memory_padding=140544512, device_memory_padding_jpeg2k=0,
              host_memory_padding_jpeg2k=0, hybrid_huffman_threshold=0, affine=False, split_stages=True,
              use_chunk_allocator=True, memory_stats=True, jpeg_fancy_upsampling=True)


def test_performance_hints_are_accepted():
    data = [encode(smooth(), "JPEG")]
    plain = decode(data)[0][0]
    np.testing.assert_array_equal(decode(data, cache_size=100, cache_type="threshold", **_HINTS)[0][0], plain)
    np.testing.assert_array_equal(decode(data, op="decoders.image_random_crop", seed=3, **_HINTS)[0][0],
                                  decode(data, op="decoders.image_random_crop", seed=3)[0][0])


def test_fast_idct_changes_jpeg_values_slightly(backend):
    if backend == "opencv":
        pytest.skip("OpenCV has no fast-IDCT switch: the fallback always runs the accurate IDCT")
    path = sorted(_shared("flowers").glob("*/*.jpg"))[0]
    exact = decode_files([path])[0]
    fast = decode_files([path], use_fast_idct=True)[0]
    err = np.abs(exact.astype(int) - fast)
    assert 0 < err.max() <= 16 and err.mean() < 1


def test_unknown_argument_is_an_error():
    with pytest.raises(OpArgumentError, match="fn.decoders.image: unknown argument 'random_area'"):
        decode([encode(smooth(), "PNG")], random_area=[0.5, 1.0])


def test_legacy_aliases_match_the_new_names():
    datas = [encode(smooth(), "JPEG"), encode(gradient(), "PNG")]
    for old, new in [("image_decoder", "decoders.image"), ("image_decoder_random_crop", "decoders.image_random_crop")]:
        for a, b in zip(decode(datas, op=old, seed=5)[0], decode(datas, op=new, seed=5)[0]):
            np.testing.assert_array_equal(a, b)
    decode(datas, op="image_decoder_random_crop", device_memory_padding=1 << 20, host_memory_padding=1 << 20)


@pytest.mark.parametrize("op", ["decoders.image", "decoders.image_random_crop"])
def test_mixed_device_gives_device_batches_equal_to_cpu(op):
    datas = [np.frombuffer(encode(smooth(), "JPEG"), np.uint8), np.frombuffer(encode(gradient(), "PNG"), np.uint8)]

    def graph():
        return getattr(fn.decoders, op.split(".")[1])(fn.external_source(source=lambda: list(datas), batch=True),
                                                      device="mixed", seed=9)

    out = run_graph(graph, batch_size=2, device_id=0)[0][0]
    assert type(out).__name__ == "TensorListGPU"
    for a, b in zip(_samples(out), decode(datas, op=op, seed=9)[0]):
        np.testing.assert_array_equal(a, b)


# -- random crop ------------------------------------------------------------------------------------

def _expected_windows(seed, iteration, shapes, **kw):
    keys = rng.sample_keys(seed, iteration, len(shapes))
    num_attempts = kw.get("num_attempts", 10)
    u = rng.uniform(keys, crop_window_draws(num_attempts), ImageRandomCropDecoder.STREAM)
    h, w = np.array([s[0] for s in shapes]), np.array([s[1] for s in shapes])
    return np.stack(random_crop_windows(h, w, u, **kw), axis=1)


def test_crop_is_the_drawn_window_of_the_full_decode(tmp_path):
    paths = sorted(_shared("flowers").glob("*/*.jpg"))[::20]
    rotated = tmp_path / "rotated.jpg"
    Image.fromarray(smooth(96, 160)).save(rotated, quality=95, exif=exif_bytes(6))
    paths.append(rotated)
    datas = [np.fromfile(p, np.uint8) for p in paths]
    full = decode(datas)[0]
    crops = decode(datas, op="decoders.image_random_crop", seed=123, iterations=2, random_area=[0.1, 0.5])
    for iteration, batch in enumerate(crops):
        windows = _expected_windows(123, iteration, [f.shape for f in full], random_area=(0.1, 0.5))
        for (y, x, h, w), image, crop, path in zip(windows, full, batch, paths):
            # Region decoding is exact: the same pixels as the full decode, edges included.
            np.testing.assert_array_equal(crop, image[y:y + h, x:x + w], err_msg=str(path))


@pytest.mark.parametrize("orientation", range(1, 9))
def test_region_decode_of_rotated_images_is_the_window_of_the_oriented_image(orientation):
    """Windows are drawn in the EXIF-oriented image and mapped into stored coordinates, so nvImageCodec
    never gets a region it rejects (it would return None): every crop is a real array, equal to the
    window cut from the oriented full decode, for every orientation and every format carrying EXIF."""
    src = smooth(96, 160)
    exif = exif_bytes(orientation)
    datas = [encode(src, "JPEG", quality=95, exif=exif), encode(src, "PNG", exif=exif), encode(src, "TIFF", exif=exif),
             encode(src, "WEBP", quality=90, exif=exif), encode(src, "WEBP", lossless=True, exif=exif)]
    full = decode(datas)[0]
    assert all(f.shape == ((160, 96, 3) if orientation >= 5 else (96, 160, 3)) for f in full)
    crops = decode(datas, op="decoders.image_random_crop", seed=orientation, iterations=3, random_area=[0.05, 0.5])
    for iteration, batch in enumerate(crops):
        windows = _expected_windows(orientation, iteration, [f.shape for f in full], random_area=(0.05, 0.5))
        for k, ((y, x, h, w), image, crop) in enumerate(zip(windows, full, batch)):
            assert isinstance(crop, np.ndarray) and crop.shape == (h, w, 3), (k, crop)
            np.testing.assert_array_equal(crop, image[y:y + h, x:x + w], err_msg=f"file {k}, iteration {iteration}")


def test_crops_depend_only_on_seed_iteration_and_sample():
    paths = sorted(_shared("flowers").glob("*/*.jpg"))[::10]
    datas = [np.fromfile(p, np.uint8) for p in paths]
    one = decode(datas, op="decoders.image_random_crop", seed=7, iterations=2, num_threads=1)
    two = decode(datas, op="decoders.image_random_crop", seed=7, iterations=2, num_threads=2)
    other = decode(datas, op="decoders.image_random_crop", seed=8, iterations=1)
    for batch_one, batch_two in zip(one, two):
        for a, b in zip(batch_one, batch_two):
            assert a.tobytes() == b.tobytes()
    assert any(a.shape != b.shape for a, b in zip(one[0], one[1]))  # a new window every iteration
    assert any(a.shape != b.shape for a, b in zip(one[0], other[0]))


@pytest.mark.slow
def test_crop_statistics_on_real_photos():
    root = _shared("flowers")

    def graph():
        jpegs, _ = fn.readers.file(file_root=str(root))
        return fn.decoders.image(jpegs), fn.decoders.image_random_crop(jpegs, seed=11)

    areas, ratios = [], []
    for full, crops in run_graph(graph, batch_size=100, iterations=6):
        for image, crop in zip(_samples(full), _samples(crops)):
            (H, W), (h, w) = image.shape[:2], crop.shape[:2]
            areas.append(h * w / (H * W))
            ratios.append(w / h)
            slack = (h + w + 1) / (H * W)
            assert 0.08 - slack <= areas[-1] <= 1.0 and 3 / 4 - 1 / h <= ratios[-1] <= 4 / 3 + 1 / h
    log_ratios = np.log(ratios)
    assert abs(log_ratios.mean()) < 0.05
    assert 0.35 < np.mean(areas) < 0.6  # U(0.08, 1) has mean 0.54; rejected big windows pull it down
    assert min(areas) < 0.12 and max(areas) > 0.9
