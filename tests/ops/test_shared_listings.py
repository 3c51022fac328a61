"""The pipelines an iterator builds together (``pipeline.share_host_threads``, one per device) list or
index their data set once per reader family, and still read their own shards; pipelines built on
their own list afresh (see ``jaxdali.ops.readers.shared_listing``; ``fn.readers.file`` is checked
through ``DALIGenericIterator`` in test_file_reader.py)."""

from __future__ import annotations

import io
import json
import tarfile

import numpy as np
import pytest

import jaxdali
from jaxdali import fn
from jaxdali.ops.readers import array_record, coco, lmdb_records, nemo_asr, recordio_format, storage, tfrecord
from jaxdali.ops.readers import tfrecord_format, video, wds_index
from jaxdali.pipeline.pipeline import share_host_threads
from tests.audio_clips import chirp, wav_bytes


def _payload(i: int) -> bytes:
    return f"sample {i}".encode() * (i + 1)


def _coco(tmp_path, request):
    for i in range(4):
        (tmp_path / f"{i}.jpg").write_bytes(_payload(i))
    doc = {"images": [{"id": i, "file_name": f"{i}.jpg", "width": 8, "height": 8} for i in range(4)],
           "annotations": [{"image_id": i, "bbox": [1, 1, 2 + i, 3], "category_id": 7} for i in range(4)],
           "categories": [{"id": 7}]}
    (tmp_path / "ann.json").write_text(json.dumps(doc))
    return fn.readers.coco, {"file_root": str(tmp_path), "annotations_file": str(tmp_path / "ann.json")}


def _tfrecord(tmp_path, request):
    path, index = str(tmp_path / "d.tfrecord"), str(tmp_path / "d.idx")
    rows = tfrecord_format.write_tfrecord(path, [tfrecord_format.encode_example({"x": _payload(i)}) for i in range(4)])
    (tmp_path / "d.idx").write_text(tfrecord_format.format_index(rows))
    return fn.readers.tfrecord, {"path": [path], "index_path": [index],
                                 "features": {"x": jaxdali.tfrecord.FixedLenFeature((), jaxdali.tfrecord.string, "")}}


def _webdataset(tmp_path, request):
    path = str(tmp_path / "d.tar")
    with tarfile.open(path, "w") as tar:
        for i in range(4):
            for ext, data in (("bin", _payload(i)), ("cls", str(i).encode())):
                info = tarfile.TarInfo(f"s{i}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return fn.readers.webdataset, {"paths": [path], "ext": ["bin", "cls"]}


def _array_record(tmp_path, request):
    module = pytest.importorskip("array_record.python.array_record_module")
    path = str(tmp_path / "d.array_record")
    writer = module.ArrayRecordWriter(path, "group_size:1")
    for i in range(4):
        writer.write(_payload(i))
    writer.close()
    return fn.readers.array_record, {"path": [path]}


def _mxnet(tmp_path, request):
    rec, idx = str(tmp_path / "d.rec"), str(tmp_path / "d.idx")
    records = [recordio_format.encode_record(float(i), _payload(i), i) for i in range(4)]
    recordio_format.write_recordio(rec, records, idx)
    return fn.readers.mxnet, {"path": [rec], "index_path": [idx]}


def _caffe(tmp_path, request):
    lmdb = pytest.importorskip("lmdb")
    from jaxdali.ops.readers.caffe import encode_datum

    env = lmdb.open(str(tmp_path / "db"), map_size=1 << 24)
    with env.begin(write=True) as txn:
        for i in range(4):
            txn.put(f"{i:04d}".encode(), encode_datum(_payload(i), i))
    env.close()
    return fn.readers.caffe, {"path": [str(tmp_path / "db")]}


def _sequence(tmp_path, request):
    cv2 = pytest.importorskip("cv2")
    for s in range(2):
        (tmp_path / f"stream{s}").mkdir()
        for f in range(3):
            frame = np.full((4, 6, 3), 40 * s + 10 * f, np.uint8)
            cv2.imwrite(str(tmp_path / f"stream{s}" / f"{f}.png"), frame)
    return fn.readers.sequence, {"file_root": str(tmp_path), "sequence_length": 2}


def _nemo_asr(tmp_path, request):
    entries = []
    for i in range(4):
        (tmp_path / f"{i}.wav").write_bytes(wav_bytes(chirp(800 * (i + 1), 16000), 16000).tobytes())
        entries.append({"audio_filepath": str(tmp_path / f"{i}.wav"), "text": f"clip {i}"})
    (tmp_path / "manifest.json").write_text("".join(json.dumps(e) + "\n" for e in entries))
    return fn.readers.nemo_asr, {"manifest_filepaths": [str(tmp_path / "manifest.json")]}


def _video(tmp_path, request):
    bunny = request.getfixturevalue("shared_data") / "video" / "bigbuckbunny.mp4"
    if not bunny.exists():
        pytest.skip(f"{bunny} not found")
    return fn.readers.video, {"filenames": [str(bunny)] * 2, "labels": [0, 1], "sequence_length": 1, "step": 1000,
                              "device": "cpu"}


# family: (data set and reader arguments, (module, function) listing or indexing it once per build)
FAMILIES = {
    "coco": (_coco, (coco, "parse_annotations")),
    "tfrecord": (_tfrecord, (tfrecord, "load_index")),
    "webdataset": (_webdataset, (wds_index, "scan_tar")),
    "array_record": (_array_record, (array_record, "read_index")),
    "mxnet": (_mxnet, (recordio_format, "parse_index")),
    "caffe": (_caffe, (lmdb_records, "_list_keys")),
    "sequence": (_sequence, (storage, "list_dir")),
    "nemo_asr": (_nemo_asr, (nemo_asr, "parse_manifest")),
    "video": (_video, (video, "index_video")),
}


def _count_calls(monkeypatch, module, name: str) -> list:
    calls = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def _pipe(reader, shard_id: int, args: dict):
    @jaxdali.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
    def p():
        out = reader(name="Reader", shard_id=shard_id, num_shards=2, **args)
        if isinstance(out, dict):
            return tuple(out.values())
        return tuple(out) if isinstance(out, (list, tuple)) else out

    return p()


def _batch(pipe) -> list:
    return [[(np.asarray(s).shape, np.asarray(s).tobytes()) for s in out.samples()] for out in pipe.run()]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_pipelines_built_together_list_once_and_read_their_shards(family, tmp_path, monkeypatch, request):
    make, (module, name) = FAMILIES[family]
    reader, args = make(tmp_path, request)
    calls = _count_calls(monkeypatch, module, name)
    together = [_pipe(reader, k, args) for k in range(2)]
    share_host_threads(together)
    once = len(calls)
    assert once >= 1
    alone = [_pipe(reader, k, args) for k in range(2)]
    for pipe in alone:
        pipe.build()
    assert len(calls) == 3 * once  # built on their own, each lists afresh
    shared = [_batch(pipe) for pipe in together]
    assert shared == [_batch(pipe) for pipe in alone]
    assert shared[0] != shared[1]  # each pipeline reads its own shard
    for pipe in together + alone:
        pipe.close()
