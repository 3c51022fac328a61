"""fn.readers.mxnet, fn.readers.sequence and fn.decoders.numpy against real NVIDIA DALI (CPU): the same
bytes, labels, frames and arrays, bit for bit, with the same sample order, sharding and reader_meta."""

from __future__ import annotations

import io
import pathlib
import warnings

import numpy as np
import pytest

dali = pytest.importorskip("nvidia.dali")

import jaxdali  # noqa: E402
from jaxdali.ops.readers import recordio_format  # noqa: E402
from tests.differential.twin import PHOTOS, run_both  # noqa: E402

COVERED_OPERATORS = ("readers.mxnet", "readers.sequence", "decoders.numpy")


def _run(lib: str, body, batch_size: int, iterations: int):
    """Per output, the samples of ``iterations`` batches; each sample's source info; the reader's meta."""
    module = dali if lib == "dali" else jaxdali
    from nvidia.dali import fn as dali_fn, types as dali_types

    fn, types = (dali_fn, dali_types) if lib == "dali" else (jaxdali.fn, jaxdali.types)

    @module.pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=3)
    def graph():
        out = body(fn, types)
        return tuple(out) if isinstance(out, (list, tuple)) else out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # DALI deprecates readers.sequence
        pipe = graph()
        pipe.build()
    outputs, infos, layouts = None, [], []
    for _ in range(iterations):
        result = pipe.run()
        outputs = outputs or [[] for _ in result]
        for k, tl in enumerate(result):
            outputs[k] += [np.array(tl.at(i)) for i in range(len(tl))]
        infos += [result[0][i].source_info() for i in range(batch_size)]
        layouts = [tl.layout() for tl in result]
    meta = {key: int(value) for key, value in pipe.reader_meta("R").items()}
    return outputs, infos, layouts, meta


def _assert_same(body, batch_size: int, iterations: int, same_source_info: bool = True) -> None:
    ours, theirs = _run("jaxdali", body, batch_size, iterations), _run("dali", body, batch_size, iterations)
    for k, (a_out, b_out) in enumerate(zip(ours[0], theirs[0], strict=True)):
        for i, (a, b) in enumerate(zip(a_out, b_out, strict=True)):
            assert a.dtype == b.dtype and a.shape == b.shape, (k, i, a.dtype, b.dtype, a.shape, b.shape)
            np.testing.assert_array_equal(a, b, err_msg=f"output {k} sample {i}")
    if same_source_info:
        assert ours[1] == theirs[1]
    assert ours[2] == theirs[2] and ours[3] == theirs[3]


# -- readers.mxnet ------------------------------------------------------------------------------------

def _thumbnails(count: int) -> list[bytes]:
    """Small JPEGs of the shared photos."""
    from PIL import Image

    out = []
    for path in sorted(PHOTOS.rglob("*.jpg"))[:count]:
        with Image.open(path) as im:
            im.thumbnail((24, 24))
            buffer = io.BytesIO()
            im.convert("RGB").save(buffer, "JPEG", quality=80)
        out.append(buffer.getvalue())
    return out


@pytest.fixture(scope="module")
def recordio(tmp_path_factory) -> tuple[list[str], str]:
    """Two .rec files of real JPEGs with one index over both: single and multiple labels, one record whose
    image holds the magic word (stored as a multi-frame record), index lines out of offset order."""
    root = tmp_path_factory.mktemp("mxnet")
    jpegs = _thumbnails(11)
    magic = recordio_format.MAGIC.to_bytes(4, "little")
    payloads = [recordio_format.encode_record(float(i), jpeg, i) for i, jpeg in enumerate(jpegs)]
    payloads[3] = recordio_format.encode_record([1.5, -2.0, 7.25], jpegs[3], 3)
    payloads[5] = recordio_format.encode_record(5.0, b"abcd" + magic + jpegs[5][:20] + magic + magic + b"tail", 5)
    assert len(recordio_format.split_payload(payloads[5])) == 4
    first = recordio_format.write_recordio(str(root / "a.rec"), payloads[:6])
    size = (root / "a.rec").stat().st_size
    second = recordio_format.write_recordio(str(root / "b.rec"), payloads[6:], start=size)
    lines = [f"{k}\t{o}" for k, o in enumerate(first + second)]
    (root / "all.idx").write_text("\n".join(lines[5:] + lines[:5]) + "\n")
    return [str(root / "a.rec"), str(root / "b.rec")], str(root / "all.idx")


@pytest.mark.parametrize("sharding", [{}, {"num_shards": 3, "shard_id": 1, "pad_last_batch": True},
                                      {"num_shards": 2, "shard_id": 1, "stick_to_shard": True}])
def test_mxnet_records_labels_and_order(recordio, sharding):
    paths, index = recordio
    _assert_same(lambda fn, types: fn.readers.mxnet(path=paths, index_path=[index], name="R", **sharding),
                 batch_size=4, iterations=5)


# -- readers.sequence ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def streams(tmp_path_factory) -> str:
    """Three streams of JPEG frames cut from real photos (5, 4 and 2 frames, one size per stream), plus a
    stray text file in a stream and at the root (ignored)."""
    import cv2

    root = tmp_path_factory.mktemp("streams")
    photos = sorted(PHOTOS.rglob("*.jpg"))
    k = 0
    for name, count, size in (("s0", 5, (40, 30)), ("s1", 4, (24, 32)), ("s2", 2, (20, 20))):
        (root / name).mkdir()
        for f in range(count):
            frame = cv2.resize(cv2.imread(str(photos[k])), size, interpolation=cv2.INTER_AREA)
            cv2.imwrite(str(root / name / f"{f:05d}.jpg"), frame)
            k += 1
    (root / "s0" / "notes.txt").write_text("not a frame")
    (root / "readme.txt").write_text("not a stream")
    return str(root)


@pytest.mark.parametrize("args", [{"sequence_length": 2}, {"sequence_length": 2, "step": 2, "stride": 2},
                                  {"sequence_length": 3, "num_shards": 2, "shard_id": 1, "pad_last_batch": True},
                                  {"sequence_length": 1, "image_type": "GRAY"}])
def test_sequence_frames_and_order(streams, args):
    def body(fn, types):
        kw = dict(args)
        if "image_type" in kw:
            kw["image_type"] = getattr(types, kw["image_type"])
        return fn.readers.sequence(file_root=streams, name="R", **kw)

    # DALI gives no source info; jaxdali names each sequence's first frame.
    _assert_same(body, batch_size=3, iterations=4, same_source_info=False)


# -- decoders.numpy -----------------------------------------------------------------------------------

def _npy(array: np.ndarray) -> np.ndarray:
    out = io.BytesIO()
    np.save(out, array)
    return np.frombuffer(out.getvalue(), np.uint8)


DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
          "float64")


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_decoder_every_type(dtype):
    rng = np.random.default_rng(len(dtype))
    arrays = [(rng.standard_normal(shape) * 100).astype(dtype) for shape in ((3, 4), (2, 5), (0, 7))]
    ours, theirs = run_both(lambda fn, types, x: fn.decoders.numpy(x), [[_npy(a) for a in arrays]])
    for a, b, original in zip(ours[0], theirs[0], arrays):
        assert a.dtype == b.dtype == original.dtype
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, original)


def test_numpy_decoder_scalars_and_conversion():
    """Types may differ within a batch when ``dtype`` converts them (rounding, saturating); 0-D arrays."""
    batches = [[np.array([-3.5, 0.49, 300.0, 70000.7]), np.arange(6, dtype=np.int64) * 9e3,
                np.array([1, 0, 1], bool)], [np.array(2.5), np.array(-7, np.int16)]]
    for arrays in batches:
        for dtype in ("UINT8", "INT16", "FLOAT16", "BOOL", None):
            args = {} if dtype is None else {"dtype": dtype}
            if dtype is None and len({a.dtype for a in arrays}) > 1:
                continue
            ours, theirs = run_both(lambda fn, types, x: fn.decoders.numpy(
                x, **{k: getattr(types, v) for k, v in args.items()}), [[_npy(a) for a in arrays]])
            for a, b in zip(ours[0], theirs[0]):
                assert a.dtype == b.dtype and a.shape == b.shape, dtype
                np.testing.assert_array_equal(a, b, err_msg=str(dtype))
