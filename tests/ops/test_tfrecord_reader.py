"""fn.readers.tfrecord on TFRecord files written here from real photos: values, DALI parity, sharding,
resume, the index tool and errors for missing, stale and truncated data."""

from __future__ import annotations

import os
import pathlib
import struct
import subprocess
import sys

import numpy as np
import pytest

from jaxdali.ops.readers.protowire import encode_varint
from jaxdali import fn, pipeline_def, types
from jaxdali import tfrecord as tfrec
from jaxdali.core.checkpoint import CheckpointError
from jaxdali.ops.readers import tfrecord_format as fmt
from jaxdali.tools import tfrecord2idx

#: Operators these tests check against real DALI (collected by tests/test_operator_coverage.py).
COVERED_OPERATORS = ("readers.tfrecord",)

PHOTOS = 30


def _photos(flowers_root: str) -> list[tuple[bytes, int]]:
    """(JPEG bytes, class label) of PHOTOS real photos, a few from each class."""
    classes = sorted(d for d in os.listdir(flowers_root) if os.path.isdir(os.path.join(flowers_root, d)))
    out = []
    for label, cls in enumerate(classes):
        names = sorted(os.listdir(os.path.join(flowers_root, cls)))[:PHOTOS // len(classes)]
        out += [(pathlib.Path(flowers_root, cls, n).read_bytes(), label) for n in names]
    return out


def _values(i: int, label: int) -> dict:
    """Everything record i holds besides its photo: fixed and ragged numbers, incl. multi-byte varints."""
    return {
        "image/class/label": [label],
        "image/class/text": f"class-{label}",
        "boxes": np.arange(4 * (i % 3), dtype=np.float32) / 7,  # 0, 1 or 2 boxes of 4 floats
        "ids": np.array([i - 5, 300 * i, -(2 ** 40) * i, 2 ** 62] if i % 4 else [], np.int64),
        "pair": np.array([i, -i], np.int64),
    }


@pytest.fixture(scope="module")
def tfrecords(flowers_root, tmp_path_factory):
    """Two TFRecord files (18 + 12 records) with index files made by the tool; and the written values."""
    root = tmp_path_factory.mktemp("tfrecords")
    photos = _photos(flowers_root)
    records = [{"image/encoded": jpeg, **_values(i, label)} for i, (jpeg, label) in enumerate(photos)]
    paths, indexes = [], []
    for k, part in enumerate((records[:18], records[18:])):
        path, index = str(root / f"part-{k}.tfrecord"), str(root / f"part-{k}.idx")
        fmt.write_tfrecord(path, [fmt.encode_example(r) for r in part])
        assert tfrecord2idx.main([path, index, "--check-crc"]) == 0
        paths.append(path)
        indexes.append(index)
    return paths, indexes, records


FEATURES = {
    "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
    "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
    "boxes": tfrec.VarLenFeature([4], tfrec.float32, 0.0),
    "ids": tfrec.VarLenFeature(tfrec.int64, 0),
    "pair": tfrec.FixedLenFeature([2], tfrec.int64, 0),
}


def _pipe(lib_fn, lib_pipeline_def, paths, indexes, features, batch_size=4, **kw):
    @lib_pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=3, prefetch_queue_depth=1,
                      enable_checkpointing=kw.pop("enable_checkpointing", False))
    def p():
        out = lib_fn.readers.tfrecord(path=paths, index_path=indexes, features=features, name="Reader", **kw)
        return tuple(out[k] for k in features)

    return p


def _batches(pipe, n):
    return [[[np.array(s) for s in out.as_cpu()] if hasattr(out, "as_cpu") else [np.array(s) for s in out]
             for out in pipe.run()] for _ in range(n)]


def test_every_feature_reads_back_as_written(tfrecords):
    paths, indexes, records = tfrecords
    features = dict(FEATURES, absent=tfrec.FixedLenFeature([3], tfrec.float32, 2.5),
                    absent_text=tfrec.FixedLenFeature((), tfrec.string, "none"),
                    absent_list=tfrec.VarLenFeature([2], tfrec.int64, 0),
                    text=tfrec.FixedLenFeature((), tfrec.string, ""))
    features["image/class/text"] = features.pop("text")
    p = _pipe(fn, pipeline_def, paths, indexes, features, batch_size=len(records))()
    out = dict(zip(features, p.run()))
    assert p.epoch_size("Reader") == len(records)
    assert [o.dtype for o in out.values()] == [types.UINT8, types.INT64, types.FLOAT, types.INT64, types.INT64,
                                               types.FLOAT, types.UINT8, types.INT64, types.UINT8]
    for i, r in enumerate(records):
        assert out["image/encoded"].at(i).tobytes() == r["image/encoded"]
        assert out["image/class/label"].at(i).tolist() == r["image/class/label"]
        np.testing.assert_array_equal(out["boxes"].at(i), r["boxes"].reshape(-1, 4))
        assert out["ids"].at(i).tolist() == list(r["ids"])
        assert out["pair"].at(i).tolist() == r["pair"].tolist()
        assert out["absent"].at(i).tolist() == [2.5] * 3
        assert out["absent_text"].at(i).tobytes() == b"none"
        assert out["absent_list"].at(i).shape == (0, 2)
        assert out["image/class/text"].at(i).tobytes() == r["image/class/text"].encode()
    assert out["image/encoded"].source_info[19] == f"{paths[1]} at index {int(open(indexes[1]).read().split()[2])}"


def test_index_tool_matches_a_scan_and_dalis_format(tfrecords):
    paths, indexes, _ = tfrecords
    blob = pathlib.Path(paths[0]).read_bytes()
    rows = np.array(pathlib.Path(indexes[0]).read_text().split(), dtype=np.int64).reshape(-1, 2)
    assert rows[0].tolist() == [0, struct.unpack_from("<Q", blob)[0] + 16]
    assert (rows[1:, 0] == rows[:-1].sum(axis=1)).all() and rows[-1].sum() == len(blob)


def test_index_tool_runs_as_a_module(tfrecords, tmp_path, subprocess_env):
    paths, indexes, _ = tfrecords
    out = tmp_path / "m.idx"
    done = subprocess.run([sys.executable, "-m", "jaxdali.tools.tfrecord2idx", paths[1], str(out), "--check-crc"],
                          env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == pathlib.Path(indexes[1]).read_text()
    missing = subprocess.run([sys.executable, "-m", "jaxdali.tools.tfrecord2idx", str(tmp_path / "nope.tfrecord"),
                              str(tmp_path / "nope.idx")], env=subprocess_env, capture_output=True, text=True,
                             timeout=120)
    assert missing.returncode == 1 and "nope.tfrecord" in missing.stderr


def test_crc32c_matches_a_bitwise_reference():
    def reference(data: bytes) -> int:
        crc = 0xFFFFFFFF
        for byte in data:
            crc ^= byte
            for _ in range(8):
                crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        return crc ^ 0xFFFFFFFF

    rng = np.random.default_rng(0)
    assert fmt.crc32c(b"123456789") == 0xE3069283
    for n in (0, 1, 3, 4, 5, 1023, 1024, 1025, 2500):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert fmt.crc32c(data) == reference(data), n


@pytest.mark.parametrize("num_shards,pad,stick", [(1, False, False), (3, False, False), (3, True, False),
                                                  (4, True, True)])
def test_matches_dali_bit_exact_with_sharding(tfrecords, num_shards, pad, stick):
    dali = pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import tfrecord as dali_tfrec

    paths, indexes, records = tfrecords
    dali_features = {
        "image/encoded": dali_tfrec.FixedLenFeature((), dali_tfrec.string, ""),
        "image/class/label": dali_tfrec.FixedLenFeature([1], dali_tfrec.int64, -1),
        "boxes": dali_tfrec.VarLenFeature([4], dali_tfrec.float32, 0.0),
        "ids": dali_tfrec.VarLenFeature(dali_tfrec.int64, 0),
        "pair": dali_tfrec.FixedLenFeature([2], dali_tfrec.int64, 0),
    }
    batches = -(-len(records) // 4) + 3  # past the end of an epoch: shard rotation and padding
    for shard in range(num_shards):
        kw = dict(shard_id=shard, num_shards=num_shards, pad_last_batch=pad, stick_to_shard=stick)
        make = _pipe(fn, pipeline_def, paths, indexes, FEATURES, enable_checkpointing=True, **kw)
        ours = make()
        head = _batches(ours, 3)
        ours = make(checkpoint=ours.checkpoint())  # and resumed from a checkpoint, it goes on as DALI does
        theirs = _pipe(dali_fn, dali.pipeline_def, paths, indexes, dali_features, **kw)()
        theirs.build()
        for a, b in zip(head + _batches(ours, batches - 3), _batches(theirs, batches)):
            for x, y in zip(a, b):
                assert len(x) == len(y)
                for s, t in zip(x, y):
                    assert s.dtype == t.dtype and s.shape == t.shape
                    np.testing.assert_array_equal(s, t)
        assert ours.reader_meta("Reader") == {k: v for k, v in theirs.reader_meta("Reader").items()
                                              if k in ours.reader_meta("Reader")}


def test_resumes_mid_epoch_from_a_checkpoint(tfrecords):
    paths, indexes, _ = tfrecords
    make = _pipe(fn, pipeline_def, paths, indexes, FEATURES, random_shuffle=True, num_shards=2, shard_id=1,
                 enable_checkpointing=True)
    p = make()
    _batches(p, 5)  # into the second epoch
    saved = p.checkpoint()
    expected = _batches(p, 6)
    q = make(checkpoint=saved)
    for a, b in zip(_batches(q, 6), expected):
        for x, y in zip(a, b):
            assert all(np.array_equal(s, t) for s, t in zip(x, y))


def test_a_checkpoint_of_rewritten_files_is_refused(tmp_path):
    paths, indexes = [str(tmp_path / f"{k}.tfrecord") for k in range(2)], [str(tmp_path / f"{k}.idx") for k in range(2)]
    features = {"pair": FEATURES["pair"]}

    def write(split: int) -> None:  # 5 records, the first `split` in file 0
        records = [fmt.encode_example({"pair": np.array([i, -i], np.int64)}) for i in range(5)]
        for path, index, part in zip(paths, indexes, (records[:split], records[split:])):
            fmt.write_tfrecord(path, part)
            assert tfrecord2idx.main([path, index]) == 0

    write(3)
    make = _pipe(fn, pipeline_def, paths, indexes, features, batch_size=2, enable_checkpointing=True)
    p = make()
    p.run()
    write(2)  # same arguments, same count: the records moved
    with pytest.raises(CheckpointError, match=r"listing.*0\.tfrecord.*changed"):
        make(checkpoint=p.checkpoint()).build()


def test_records_in_any_valid_protobuf_layout(tmp_path):
    """Value before key in a map entry, unpacked numbers, several packed runs, an empty Feature: the
    one-by-one parser reads what TensorFlow's own writer never produces but protobuf allows."""
    def field(number, wire, payload):
        return encode_varint(number << 3 | wire) + (encode_varint(len(payload)) if wire == 2 else b"") \
            + payload

    def entry(name, feature, value_first=False):
        key, value = field(1, 2, name.encode()), field(2, 2, feature)
        return field(1, 2, value + key if value_first else key + value)

    unpacked_ints = field(3, 2, b"".join(field(1, 0, encode_varint(v)) for v in (7, -3)))
    two_runs = field(2, 2, field(1, 2, np.float32([1, 2]).tobytes()) + field(1, 2, np.float32([3]).tobytes()))
    odd = encode_varint(1 << 3 | 2) + encode_varint(0)  # an empty Features message first
    example = odd + field(1, 2, entry("a", unpacked_ints, value_first=True) + entry("f", two_runs)
                          + entry("e", b""))
    path, index = str(tmp_path / "odd.tfrecord"), str(tmp_path / "odd.idx")
    empty = [fmt.encode_example({}), b"", fmt.encode_example({}), b""]  # no features, or no bytes at all
    rows = fmt.write_tfrecord(path, [example, fmt.encode_example({"a": [7, -3], "f": [1.0, 2.0, 3.0]})] + empty)
    pathlib.Path(index).write_text(fmt.format_index(rows))
    features = {"a": tfrec.VarLenFeature(tfrec.int64, 0), "f": tfrec.VarLenFeature(tfrec.float32, 0.0),
                "e": tfrec.VarLenFeature(tfrec.float32, 0.0), "d": tfrec.FixedLenFeature([2], tfrec.int64, 4)}
    a, f, e, d = _pipe(fn, pipeline_def, [path], [index], features, batch_size=6)().run()
    assert a.at(0).tolist() == a.at(1).tolist() == [7, -3]
    assert f.at(0).tolist() == f.at(1).tolist() == [1.0, 2.0, 3.0]
    assert e.at(0).shape == e.at(1).shape == (0,)
    assert [a.at(i).shape for i in range(2, 6)] == [(0,)] * 4
    assert d.as_array().tolist() == [[4, 4]] * 6


def _run(paths, indexes, features=FEATURES, **kw):
    return _pipe(fn, pipeline_def, paths, indexes, features, **kw)().run()


def test_missing_and_stale_index_and_truncated_file_errors(tfrecords, tmp_path):
    paths, indexes, _ = tfrecords
    with pytest.raises(FileNotFoundError, match=r"index file .*nope\.idx.*tfrecord2idx"):
        _run(paths[:1], [str(tmp_path / "nope.idx")])
    # Another file's index: its records do not line up with this file's.
    with pytest.raises(fmt.RecordError, match=r"part-1\.tfrecord.*stale"):
        _run(paths[1:], indexes[:1])
    # Offsets shifted by 8 bytes: the record headers do not match the sizes any more.
    rows = np.array(pathlib.Path(indexes[0]).read_text().split(), dtype=np.int64).reshape(-1, 2)
    rows[3, 0] += 8
    shifted = tmp_path / "shifted.idx"
    shifted.write_text(fmt.format_index(rows[:5]))
    with pytest.raises(fmt.RecordError, match=r"record 3 of .*part-0\.tfrecord.*header says .*stale index"):
        _run(paths[:1], [str(shifted)], batch_size=5)
    # A file cut inside its last record: the index no longer fits, and the tool names the record.
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(pathlib.Path(paths[1]).read_bytes()[:-100])
    with pytest.raises(fmt.RecordError, match=r"record 11 \(offset \d+, size \d+\) does not fit"):
        _run([str(cut)], indexes[1:])
    assert tfrecord2idx.main([str(cut), str(tmp_path / "cut.idx")]) == 1
    with pytest.raises(fmt.RecordError, match=r"record 11 at offset \d+ is truncated"):
        tfrecord2idx.build_index(str(cut))
    with pytest.raises(ValueError, match="index_path"):
        _run(paths, indexes[:1])


def test_corrupted_record_fails_its_crc_check_only_when_asked(tfrecords, tmp_path):
    paths, indexes, records = tfrecords
    blob = bytearray(pathlib.Path(paths[0]).read_bytes())
    blob[2000] ^= 0xFF  # inside record 0's JPEG
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(blob))
    data = _run([str(bad)], indexes[:1], {"image/encoded": FEATURES["image/encoded"]})[0]
    assert data.at(0).tobytes() != records[0]["image/encoded"]
    with pytest.raises(fmt.RecordError, match=r"record 0 of .*bad\.tfrecord.*CRC mismatch"):
        _run([str(bad)], indexes[:1], check_crc=True)


def test_feature_spec_errors_name_feature_and_record(tfrecords):
    paths, indexes, _ = tfrecords
    with pytest.raises(fmt.RecordError, match=r"record 0 of .*part-0.*feature 'pair' has 2 values, .*shape \[3\]"):
        _run(paths, indexes, {"pair": tfrec.FixedLenFeature([3], tfrec.int64, 0)})
    with pytest.raises(fmt.RecordError, match=r"feature 'pair' is a int64_list, but the feature spec reads float_list"):
        _run(paths, indexes, {"pair": tfrec.FixedLenFeature([2], tfrec.float32, 0)})
    with pytest.raises(fmt.RecordError, match=r"feature 'boxes' has 4 values, not a multiple of .*\[3\]"):
        _run(paths, indexes, {"boxes": tfrec.VarLenFeature([3], tfrec.float32, 0)}, shard_id=1, num_shards=30,
             batch_size=1)
    with pytest.raises(ValueError, match="tensors of strings are not supported"):
        tfrec.VarLenFeature(tfrec.string, "")
    with pytest.raises(ValueError, match="features"):
        _run(paths, indexes, {"x": "not a feature"})


def test_batches_of_mixed_layouts_read_exactly(tmp_path):
    """Records with different feature sets (names that prefix each other), lengths on both sides of the
    one/two/three-byte varint boundaries and empty lists, shuffled into the same batches: every value
    comes back, whichever layout or fallback read it."""
    rng = np.random.default_rng(7)
    names = ["a", "ab", "abc", "blob", "x"]
    records, written = [], []
    for i in range(120):
        present = {}
        for name in names:
            if rng.random() < 0.7:
                n = int(rng.choice([0, 1, 5, 127, 128, 200, 20000 if name == "blob" else 3000]))
                if name == "blob":
                    present[name] = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
                elif name == "x":
                    present[name] = rng.normal(size=n).astype(np.float32)
                else:
                    present[name] = rng.integers(-2 ** 40, 2 ** 40, n, dtype=np.int64)
        records.append(fmt.encode_example(present))
        written.append(present)
    path, index = str(tmp_path / "mixed.tfrecord"), str(tmp_path / "mixed.idx")
    pathlib.Path(index).write_text(fmt.format_index(fmt.write_tfrecord(path, records)))
    features = {n: tfrec.VarLenFeature(tfrec.int64, 0) for n in ("a", "ab", "abc")}
    features["x"] = tfrec.VarLenFeature(tfrec.float32, 0.0)
    features["blob"] = tfrec.FixedLenFeature((), tfrec.string, "missing")
    pipe = _pipe(fn, pipeline_def, [path], [index], features, batch_size=40, random_shuffle=True)()
    seen = 0
    for _ in range(6):
        outs = dict(zip(features, pipe.run()))
        order = [int(s.split(" at index ")[1]) for s in outs["a"].source_info]
        offsets = [int(o) for o in pathlib.Path(index).read_text().split()[::2]]
        for k, off in enumerate(order):
            w = written[offsets.index(off)]
            for name in ("a", "ab", "abc", "x"):
                np.testing.assert_array_equal(outs[name].at(k), w.get(name, np.zeros(0)))
            assert outs["blob"].at(k).tobytes() == w.get("blob", b"missing")
            seen += 1
    assert seen == 240
