"""``fn.experimental.readers.fits`` against astropy, which writes the files and reads them back.

DALI 2.4's CPU FITS reader needs a CUDA driver, so there is no DALI oracle here: the values, shapes and
types are astropy's (CFITSIO's equivalent types where astropy differs, stated at the case), the schema is
DALI's (names and defaults), and the reader machinery (shards, shuffles, checkpoints, reader_meta) is
checked as for the other readers.
"""

from __future__ import annotations

import inspect
import io

import numpy as np
import pytest

import jaxdali
from jaxdali import fn, types
from jaxdali.ops.schema import registry

fits = pytest.importorskip("astropy.io.fits")

COVERED_OPERATORS = ("experimental.readers.fits",)

RNG = np.random.default_rng(22)
IMAGES = {
    "uint8": RNG.integers(0, 256, (5, 7), dtype=np.uint8),
    "int8": RNG.integers(-128, 128, (3, 4), dtype=np.int8),
    "int16": RNG.integers(-30000, 30000, (2, 3, 4), dtype=np.int16),
    "uint16": RNG.integers(0, 65536, (6, 9), dtype=np.uint16),
    "int32": RNG.integers(-2 ** 31, 2 ** 31 - 1, (3, 3), dtype=np.int32),
    "uint32": RNG.integers(0, 2 ** 32 - 1, (4, 2), dtype=np.uint32),
    "int64": RNG.integers(-2 ** 62, 2 ** 62, (3, 3), dtype=np.int64),
    "uint64": RNG.integers(0, 2 ** 64 - 1, (2, 2), dtype=np.uint64),
    "float32": RNG.standard_normal((4, 5)).astype(np.float32),
    "float64": RNG.standard_normal((2, 4, 3)),
}


def _write(path, *images, primary=None, extra=()) -> str:
    fits.HDUList([fits.PrimaryHDU(primary)] + [fits.ImageHDU(i) for i in images] + list(extra)).writeto(path)
    return str(path)


def _read(batch_size=2, checkpoint=None, **args) -> jaxdali.Pipeline:
    @jaxdali.pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=3,
                          enable_checkpointing=checkpoint is not None, checkpoint=checkpoint or None)
    def pipe():
        out = fn.experimental.readers.fits(name="Reader", **args)
        return tuple(out) if isinstance(out, list) else out

    p = pipe()
    p.build()
    return p


def _batch(pipe) -> list[list[np.ndarray]]:
    return [[np.array(s) for s in out.samples()] for out in pipe.run()]


@pytest.fixture
def stack(tmp_path) -> list[str]:
    """Six files, each with two image extensions (a 2-D uint16 and a 3-D float32 image) numbered by the file."""
    paths = []
    for i in range(6):
        paths.append(_write(tmp_path / f"f{i}.fits", np.full((3, 4), i, np.uint16) + IMAGES["uint16"][:3, :4],
                            np.full((2, 2, 3), i, np.float32)))
    return paths


def test_schema_matches_dalis():
    dali_fn = pytest.importorskip("nvidia.dali.fn")
    theirs = inspect.signature(dali_fn.experimental.readers.fits).parameters
    ours = {a.name: a.default for a in registry()["experimental.readers.fits"].all_args}
    assert set(theirs) - {"device", "name"} == set(ours)
    for name, default in ours.items():
        expected = theirs[name].default
        if name in ("seed", "bytes_per_sample_hint", "dtypes", "hdu_indices"):
            continue
        assert default == expected, (name, default, expected)
    assert ours["hdu_indices"] == tuple(theirs["hdu_indices"].default) == (2,)


@pytest.mark.parametrize("kind", sorted(IMAGES))
def test_every_bitpix_and_unsigned_convention_reads_as_astropy(tmp_path, kind):
    path = _write(tmp_path / "a.fits", IMAGES[kind], IMAGES[kind][::-1].copy())
    (first, second) = _batch(_read(batch_size=1, files=[path], hdu_indices=[2, 3]))
    with fits.open(path) as f:
        for got, hdu in ((first[0], f[1]), (second[0], f[2])):
            assert got.dtype == hdu.data.dtype.newbyteorder("=") == IMAGES[kind].dtype and got.dtype.isnative
            np.testing.assert_array_equal(got, hdu.data)


def test_primary_image_and_several_hdus_with_declared_dtypes(tmp_path):
    path = _write(tmp_path / "a.fits", IMAGES["int16"], IMAGES["float64"], primary=IMAGES["uint8"])
    out = _batch(_read(batch_size=1, files=[path], hdu_indices=[3, 1, 2],
                       dtypes=[types.FLOAT64, types.UINT8, types.INT16]))
    for got, want in zip(out, ("float64", "uint8", "int16")):
        np.testing.assert_array_equal(got[0], IMAGES[want])


@pytest.mark.parametrize("bitpix_type, bscale, bzero, dtype", [
    (np.int16, 1, 100, np.int32),       # CFITSIO: the smallest integer type holding -32668..32867 (astropy: float32)
    (np.uint8, 2, -1, np.int16),        # -1..509
    (np.int16, 0.5, 10.0, np.float32),  # not integral: float32 for 8/16-bit data
    (np.int32, 0.25, 0.0, np.float64),  # and float64 for 32/64-bit data
    (np.float32, 2.0, 1.0, np.float32),
])
def test_bscale_bzero_are_applied_in_cfitsios_equivalent_type(tmp_path, bitpix_type, bscale, bzero, dtype):
    stored = RNG.integers(-100, 100, (4, 6)).astype(bitpix_type) if bitpix_type != np.uint8 else \
        RNG.integers(0, 255, (4, 6)).astype(np.uint8)
    hdu = fits.ImageHDU(stored)
    hdu.header["BSCALE"], hdu.header["BZERO"] = bscale, bzero
    path = str(tmp_path / "s.fits")
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)   # astropy keeps the raw values and writes the keywords
    ((got,),) = _batch(_read(batch_size=1, files=[path]))
    with fits.open(path, do_not_scale_image_data=True) as f:
        assert (f[1].header["BSCALE"], f[1].header["BZERO"]) == (bscale, bzero)
        np.testing.assert_array_equal(f[1].data, stored)
    with fits.open(path) as f:
        expected = f[1].data  # astropy scales on read
        assert got.dtype == dtype
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=1e-7)
        np.testing.assert_array_equal(got, (stored.astype(np.float64) * bscale + bzero).astype(dtype))


@pytest.mark.parametrize("listing", ["file_root", "file_list", "files"])
def test_listing_modes_shards_and_reader_meta(tmp_path, stack, listing):
    (tmp_path / "notes.txt").write_text("not fits")
    args = {"file_root": {"file_root": str(tmp_path)},
            "file_list": {"file_list": _list(tmp_path, ["f0.fits", "f1.fits", "f2.fits", "f3.fits", "f4.fits",
                                                        "f5.fits"])},
            "files": {"files": [f"f{i}.fits" for i in range(6)], "file_root": str(tmp_path)}}[listing]
    seen = []
    for shard in range(2):
        p = _read(batch_size=3, num_shards=2, shard_id=shard, hdu_indices=[2, 3], **args)
        first, second = _batch(p)
        seen += [int(s[0, 0, 0]) for s in second]
        assert all(s.shape == (3, 4) and s.dtype == np.uint16 for s in first)
        meta = p.reader_meta("Reader")
        assert (meta["epoch_size"], meta["number_of_shards"], meta["shard_id"]) == (6, 2, shard)
        p.close()
    assert sorted(seen) == list(range(6))


def _list(folder, names) -> str:
    path = folder / "list.txt"
    path.write_text("\n".join(names) + "\n")
    return str(path)


@pytest.mark.parametrize("args", [{"random_shuffle": True}, {"shuffle_after_epoch": True},
                                  {"num_shards": 2, "shard_id": 1, "pad_last_batch": True}])
def test_resumes_mid_epoch_exactly(stack, args):
    def ids(pipe, batches):
        return [[int(s[0, 0, 0]) for s in _batch(pipe)[1]] for _ in range(batches)]

    original = _read(batch_size=4, checkpoint="", files=stack, hdu_indices=[2, 3], **args)
    ids(original, 2)
    checkpoint = original.checkpoint()
    expected = ids(original, 4)
    assert len({i for batch in expected for i in batch}) >= 3
    assert ids(_read(batch_size=4, checkpoint=checkpoint, files=stack, hdu_indices=[2, 3], **args), 4) == expected


def _fits_bytes(*images) -> bytes:
    import io

    buffer = io.BytesIO()
    fits.HDUList([fits.PrimaryHDU()] + [fits.ImageHDU(i) for i in images]).writeto(buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("case, args, message", [
    ("text", {}, r"HDU 1 at byte 0 does not start with SIMPLE: not a FITS file"),
    ("truncated_data", {}, r"truncated: HDU 2's image needs 108 bytes from byte 5760, the file has 50"),
    ("truncated_header", {}, r"truncated: the header of HDU 2 \(from byte 2880\) has no END card"),
    ("ok", {"hdu_indices": [4]}, r"hdu_indices asks for HDU 4, but the file has 2"),
    ("ok", {"hdu_indices": [1]}, r"HDU 1 has no image \(NAXIS = 0\)"),
    ("table", {}, r"HDU 2 is a 'BINTABLE' extension; only image HDUs are read"),
    ("ok", {"dtypes": [types.FLOAT]}, r"HDU 2 holds int32 values, but 'dtypes' declares float32 for output 0"),
])
def test_bad_files_raise_errors_naming_the_file(tmp_path, case, args, message):
    good = _fits_bytes(np.arange(27, dtype=np.int32).reshape(3, 9))
    data = {"text": b"SIMPLE? no, just text\n" * 200, "truncated_data": good[:5760 + 50],
            "truncated_header": good[:2880 + 2880 // 2], "ok": good}
    path = tmp_path / f"{case}.fits"
    if case == "table":
        fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns([fits.Column("a", "J", array=[1, 2])])]
                     ).writeto(path)
    else:
        path.write_bytes(data[case])
    with pytest.raises(ValueError, match=message) as info:
        _read(batch_size=1, files=[str(path)], **args).run()
    assert str(path) in str(info.value) + "".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize("args, message", [
    ({"dtypes": [types.UINT8, types.UINT8]}, r"'dtypes' has 2 entries but 'hdu_indices' asks for 1 outputs"),
    ({"dtypes": [types.BOOL]}, r"argument 'dtypes': bool is not a FITS image type"),
    ({"hdu_indices": [0]}, r"argument 'hdu_indices' must list HDU numbers >= 1"),
    ({"files": [], "file_root": None}, r"No files found in 'files'"),
])
def test_bad_arguments_name_the_argument(stack, args, message):
    with pytest.raises((ValueError, RuntimeError), match=f"fn.experimental.readers.fits: {message}"):
        _read(batch_size=1, **{"files": stack, **args})


def test_a_batch_mixing_types_is_refused_naming_both_files(tmp_path):
    a = _write(tmp_path / "a.fits", IMAGES["uint8"])
    b = _write(tmp_path / "b.fits", IMAGES["int16"])
    with pytest.raises(ValueError, match=r"Inconsistent data.*a\.fits.*uint8 with 2 dimensions.*b\.fits.* int16 with 3"):
        _read(batch_size=2, files=[a, b]).run()


# -- tile-compressed images -------------------------------------------------------------------------------

COMPRESSED = [(kind, method) for method in ("RICE_1", "GZIP_1", "GZIP_2", "NOCOMPRESS")
              for kind in ("uint8", "int16", "uint16", "int32")] + \
    [("float32", "GZIP_1"), ("float64", "GZIP_2"), ("float32", "RICE_1")]


@pytest.mark.parametrize("kind, method", COMPRESSED)
def test_tile_compressed_images_read_as_astropy(tmp_path, kind, method):
    image = IMAGES[kind] if IMAGES[kind].ndim > 1 and IMAGES[kind].size > 20 else IMAGES["uint16"].astype(kind)
    image = np.concatenate([image] * 5)   # rows and tiles of several Rice blocks
    args = {"quantize_level": 0} if kind == "float64" else {}   # lossless; float32 is quantized (no dither)
    hdus = [fits.CompImageHDU(image, compression_type=method, **args),
            fits.CompImageHDU(image[:, ::-1].copy(), compression_type=method,
                              tile_shape=(4, 5) if image.ndim == 2 else (3, 2, 3), **args)]   # tiles cut every axis
    path = str(tmp_path / "c.fits")
    fits.HDUList([fits.PrimaryHDU()] + hdus).writeto(path)
    first, second = _batch(_read(batch_size=1, files=[path], hdu_indices=[2, 3]))
    with fits.open(path) as f:
        for got, want in ((first[0], f[1].data), (second[0], f[2].data)):
            assert got.dtype == want.dtype.newbyteorder("=") and got.shape == want.shape == image.shape
            np.testing.assert_array_equal(got, want)
    if kind != "float32":
        np.testing.assert_array_equal(first[0], image)


def test_rice_codes_of_every_kind_of_block_decode_exactly():
    from jaxdali.ops.readers.fits_tiles import rice_decode

    smooth = np.full((3, 200), 7, np.int16)                  # blocks of equal pixels (zero differences)
    noise = RNG.integers(-2 ** 15, 2 ** 15, (3, 200)).astype(np.int16)  # raw ("high entropy") blocks
    ramp = (np.arange(600).reshape(3, 200) * 3 - 900).astype(np.int16)
    image = np.concatenate([smooth, noise, ramp])
    path = "in memory"
    buffer = io.BytesIO()
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(image, compression_type="RICE_1")]).writeto(buffer)
    with fits.open(io.BytesIO(buffer.getvalue())) as f:
        assert np.array_equal(f[1].data, image)
    from jaxdali.ops.readers import fits_format, fits_tiles

    data = buffer.getvalue()
    hdus = fits_format.read_hdus(lambda o, n: data[o:o + n], 2, path)
    np.testing.assert_array_equal(fits_tiles.read_compressed_image(hdus[1], lambda o, n: data[o:o + n], path), image)
    with pytest.raises(ValueError, match="truncated RICE_1 tile"):
        rice_decode(b"\x00\x07\xff", 64, 2, 32, "x")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("method, dither, tiles", [("RICE_1", 1, None), ("GZIP_2", 2, None), ("RICE_1", 2, (7, 9)),
                                                   ("RICE_1", 1, (110, 100)), ("GZIP_1", -1, (5, 5))])
def test_quantized_floats_with_and_without_dither_read_as_astropy(tmp_path, dtype, method, dither, tiles):
    """Dithered tiles take their values from the standard's 10,000-value table from ZDITHER0 on (a tile of
    11,000 pixels wraps around it); SUBTRACTIVE_DITHER_2 keeps zeros exact; NaN are ZBLANK."""
    image = RNG.standard_normal((110, 100)).astype(dtype)
    image[0, :5], image[1, 1] = 0, np.nan
    path = str(tmp_path / "q.fits")
    hdu = fits.CompImageHDU(image, compression_type=method, quantize_method=dither, dither_seed=77, tile_shape=tiles)
    fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(path)
    ((got,),) = _batch(_read(batch_size=1, files=[path]))
    with fits.open(path) as f:
        want = f[1].data
        assert got.dtype == want.dtype.newbyteorder("=") == image.dtype
        np.testing.assert_array_equal(got, want)
    assert np.isnan(got[1, 1]) and np.nanmax(np.abs(got - image)) < 0.2
    if dither == 2:
        assert not got[0, :5].any()


def test_unsupported_compressions_are_errors_naming_the_file(tmp_path):
    path = str(tmp_path / "u.fits")
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(IMAGES["uint8"].astype(np.int16), compression_type="PLIO_1")]
                 ).writeto(path)
    with pytest.raises(ValueError, match=r"u.fits: HDU 2 \(tile-compressed\).*compression 'PLIO_1' is not supported"):
        _read(batch_size=1, files=[path]).run()


@pytest.mark.parametrize("bytepix", [1, 2, 4])
def test_compiled_rice_decoder_equals_the_numpy_decoder(bytepix):
    """Both decoders on random streams (every kind of block occurs): the same pixels, or both find the data
    too short."""
    from jaxdali import config
    from jaxdali.ops.readers import fits_tiles

    if fits_tiles.decoder_status()[0] != "compiled kernel":
        pytest.skip(f"compiled Rice decoder not in use: {fits_tiles.decoder_status()[1]}")
    rng = np.random.default_rng(bytepix)
    outcomes = set()
    for trial in range(60):
        data = rng.integers(0, 256, int(rng.integers(1, 400)), dtype=np.uint8).tobytes()
        count, blocksize = int(rng.integers(1, 300)), int(rng.choice([16, 32]))
        results = []
        for disabled in (False, True):
            config.update("disable_kernel", disabled)
            try:
                results.append(fits_tiles.rice_decode(data, count, bytepix, blocksize, "x"))
            except ValueError as e:
                assert "truncated RICE_1 tile" in str(e)
                results.append(None)
            finally:
                config.update("disable_kernel", False)
        kernel, numpy = results
        assert (kernel is None) == (numpy is None), trial
        if kernel is not None:
            assert kernel.dtype == numpy.dtype == np.dtype(f"u{bytepix}")
            np.testing.assert_array_equal(kernel, numpy)
        outcomes.add(kernel is None)
    assert outcomes == {True, False}   # both decoded and truncated streams were met


def test_a_truncated_compressed_image_is_an_error_naming_the_file(tmp_path):
    buffer = io.BytesIO()
    fits.HDUList([fits.PrimaryHDU(), fits.CompImageHDU(IMAGES["int16"], compression_type="RICE_1")]).writeto(buffer)
    path = tmp_path / "cut.fits"
    path.write_bytes(buffer.getvalue()[:2880 * 2 + 100])
    with pytest.raises(ValueError, match=r"cut.fits: HDU 2 \(tile-compressed\): truncated: the table and heap need"):
        _read(batch_size=1, files=[str(path)]).run()


def test_damaged_files_fail_with_fits_errors_only():
    """400 seeded mutations of plain and tile-compressed files (header characters, random bytes, cuts): each
    reads, or raises FitsError (the reader adds the file name); never another exception."""
    from jaxdali.ops.readers import fits_format, fits_tiles

    rng = np.random.default_rng(7)
    image = RNG.integers(-500, 500, (20, 30)).astype(np.int16)
    bases = []
    for hdu in (fits.ImageHDU(image), fits.CompImageHDU(image, compression_type="RICE_1"),
                fits.CompImageHDU(image, compression_type="GZIP_2"),
                fits.CompImageHDU(image.astype(np.float32) / 7, quantize_method=2)):
        buffer = io.BytesIO()
        fits.HDUList([fits.PrimaryHDU(), hdu]).writeto(buffer)
        bases.append(buffer.getvalue())
    outcomes = set()
    for trial in range(400):
        data = bytearray(bases[trial % len(bases)])
        for _ in range(int(rng.integers(1, 4))):
            where = int(rng.integers(0, min(len(data), 5760))) if data else 0
            if not data:
                break
            kind = rng.integers(0, 3)
            if kind == 0:
                data[where] = int(rng.choice(list(b"0123456789 -'=TFEND.AXISZ")))
            elif kind == 1:
                data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
            else:
                data = data[:int(rng.integers(0, len(data)))]
        data = bytes(data)

        def read(offset, length, data=data):
            return data[offset:offset + length]

        try:
            hdus = fits_format.read_hdus(read, 2, "damaged")
            if len(hdus) == 2:
                hdu = hdus[1]
                (fits_tiles.read_compressed_image if hdu.is_compressed_image else fits_format.read_image)(
                    hdu, read, "damaged")
                outcomes.add("read")
        except fits_format.FitsError as e:
            assert str(e).startswith("damaged"), e
            outcomes.add("error")
    assert outcomes == {"read", "error"}
