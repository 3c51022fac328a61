"""Readers on object storage: a real S3-compatible server (moto's server mode) on localhost serves a small
dataset (flower photos, .npy files, TFRecord files, tar shards, a COCO annotations file and ArrayRecord
files), and every file-based reader reads it as it reads the same files from disk: identical batches,
identical resume."""

from __future__ import annotations

import io
import json
import pathlib
import shutil
import socket
import tarfile

import numpy as np
import pytest

from jaxdali import fn, pipeline_def
from jaxdali import tfrecord as tfrec
from jaxdali.ops.readers import storage
from jaxdali.ops.readers import tfrecord_format
from jaxdali.tools import tfrecord2idx, wds2idx

fsspec = pytest.importorskip("fsspec")
pytest.importorskip("s3fs")
boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")

BUCKET = "jaxdali-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def local_dataset(tmp_path_factory, flowers_root) -> pathlib.Path:
    """Three photos of each of two flower classes, .npy arrays (C and Fortran order) and a list file."""
    root = tmp_path_factory.mktemp("remote_src")
    for cls in ("daisy", "tulips"):
        (root / "flowers" / cls).mkdir(parents=True)
        for photo in sorted(pathlib.Path(flowers_root, cls).iterdir())[:3]:
            shutil.copy(photo, root / "flowers" / cls / photo.name)
    rng = np.random.default_rng(5)
    (root / "arrays" / "more").mkdir(parents=True)
    for k in range(5):
        a = rng.standard_normal((6 + k, 5)).astype(np.float32)
        np.save(root / "arrays" / f"{k}.npy", a)
        np.save(root / "arrays" / "more" / f"f{k}.npy", np.asfortranarray(a))
    (root / "arrays" / "list.txt").write_text("more/f1.npy\n2.npy\nmore/f3.npy\n")
    _write_containers(root, sorted((root / "flowers").rglob("*.jpg")))
    return root


def _write_containers(root: pathlib.Path, photos: list[pathlib.Path]) -> None:
    """The photos as two TFRecord files and two tar shards (each with its index), in a COCO annotations
    file (one or two made-up boxes each) and, when array_record is installed, in two ArrayRecord files."""
    (root / "records").mkdir()
    for k, part in enumerate((photos[:4], photos[4:])):
        path = str(root / "records" / f"part-{k}.tfrecord")
        tfrecord_format.write_tfrecord(path, [tfrecord_format.encode_example(
            {"image/encoded": p.read_bytes(), "label": [i], "box": np.arange(4 * (i % 3), dtype=np.float32)})
            for i, p in enumerate(part)])
        assert tfrecord2idx.main([path, str(root / "records" / f"part-{k}.idx")]) == 0
        tar_path = root / "records" / f"shard-{k}.tar"
        with tarfile.open(tar_path, "w") as tar:
            for i, p in enumerate(part):
                for ext, data in (("jpg", p.read_bytes()), ("cls", str(i).encode())):
                    info = tarfile.TarInfo(f"s{k}_{i:03d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        assert wds2idx.main([str(tar_path)]) == 0
    Image = pytest.importorskip("PIL.Image")
    images, annotations = [], []
    for i, p in enumerate(photos):
        w, h = Image.open(p).size
        images.append({"id": 10 + i, "file_name": p.relative_to(root / "flowers").as_posix(), "width": w, "height": h})
        for j in range(1 + i % 2):
            annotations.append({"id": len(annotations) + 1, "image_id": 10 + i, "category_id": 1 + j, "iscrowd": 0,
                                "bbox": [j * 5.0, 3.0, w / 3, h / 4],
                                "segmentation": [[j * 5.0, 3.0, w / 3, 3.0, w / 3, h / 4]]})
    (root / "coco.json").write_text(json.dumps({"images": images, "annotations": annotations,
                                                 "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]}))
    try:
        from array_record.python.array_record_module import ArrayRecordWriter
    except ImportError:
        return
    for k, (part, options) in enumerate(((photos[:4], "group_size:1"), (photos[4:], "group_size:2,zstd"))):
        writer = ArrayRecordWriter(str(root / "records" / f"{k}.array_record"), options)
        for p in part:
            writer.write(p.read_bytes())
        writer.close()


@pytest.fixture(scope="module")
def s3_root(local_dataset, monkeypatch_module) -> str:
    """``s3://`` URL of ``local_dataset`` uploaded to a moto S3 server on a free localhost port."""
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for var, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch_module.setenv(var, value)
    # fsspec's own configuration is how users point s3fs at an endpoint (FSSPEC_S3_ENDPOINT_URL does the same).
    monkeypatch_module.setitem(fsspec.config.conf, "s3", {"endpoint_url": endpoint})
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    for path in local_dataset.rglob("*"):
        if path.is_file():
            client.upload_file(str(path), BUCKET, path.relative_to(local_dataset).as_posix())
    yield f"s3://{BUCKET}"
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    server.stop()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def _file_pipe(root: str, checkpoint=None):
    @pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=1, enable_checkpointing=True)
    def p():
        data, label = fn.readers.file(file_root=root, shuffle_after_epoch=True, name="Reader")
        return data, label

    pipe = p(checkpoint=checkpoint)
    pipe.build()
    return pipe


def _numpy_pipe(checkpoint=None, **args):
    @pipeline_def(batch_size=2, num_threads=2, device_id=None, seed=1, enable_checkpointing=True)
    def p():
        return fn.readers.numpy(name="Reader", random_shuffle=True, **args)

    pipe = p(checkpoint=checkpoint)
    pipe.build()
    return pipe


def _batches(pipe, n: int) -> list:
    out = []
    for _ in range(n):
        outputs = pipe.run()
        out.append([([bytes(np.array(s).tobytes()) for s in t.samples()], t.source_info) for t in outputs])
    return out


def test_storage_lists_and_reads_s3_as_local(s3_root, local_dataset):
    assert storage.list_dir(f"{s3_root}/arrays") == storage.list_dir(str(local_dataset / "arrays"))
    assert storage.isdir(f"{s3_root}/flowers") and not storage.isfile(f"{s3_root}/flowers")
    local = local_dataset / "arrays" / "3.npy"
    remote = f"{s3_root}/arrays/3.npy"
    assert storage.file_size(remote) == local.stat().st_size
    assert storage.read_file(remote) == local.read_bytes()
    assert storage.read_ranges(remote, [(0, 6), (100, 40)]) == [local.read_bytes()[:6], local.read_bytes()[100:140]]
    with storage.open_file(remote) as f:
        f.seek(10)
        assert f.read(5) == local.read_bytes()[10:15]


def test_file_reader_reads_the_same_batches_from_s3_and_disk_and_resumes(s3_root, local_dataset):
    local, remote = _file_pipe(str(local_dataset / "flowers")), _file_pipe(f"{s3_root}/flowers")
    assert remote.reader_meta("Reader") == local.reader_meta("Reader")
    assert _batches(remote, 2) == _batches(local, 2)
    checkpoint = remote.checkpoint()
    expected = _batches(local, 3)
    assert _batches(remote, 3) == expected
    assert _batches(_file_pipe(f"{s3_root}/flowers", checkpoint=checkpoint), 3) == expected


@pytest.mark.parametrize("args", [dict(), dict(roi_start=[1, 1], roi_end=[4, 3]),
                                  dict(rel_roi_start=[0.5], roi_axes=[0], cache_header_information=True)])
def test_numpy_reader_reads_the_same_arrays_from_s3_and_disk_and_resumes(s3_root, local_dataset, args):
    local = _numpy_pipe(file_root=str(local_dataset / "arrays"), **args)
    remote = _numpy_pipe(file_root=f"{s3_root}/arrays", **args)
    assert _batches(remote, 3) == _batches(local, 3)
    checkpoint = remote.checkpoint()
    expected = _batches(local, 4)
    assert _batches(remote, 4) == expected
    assert _batches(_numpy_pipe(file_root=f"{s3_root}/arrays", checkpoint=checkpoint, **args), 4) == expected


def test_numpy_file_list_on_s3(s3_root, local_dataset):
    local = _numpy_pipe(file_list=str(local_dataset / "arrays" / "list.txt"))
    remote = _numpy_pipe(file_list=f"{s3_root}/arrays/list.txt")
    assert _batches(remote, 3) == _batches(local, 3)


def _reader_pipe(reader, checkpoint=None, **args):
    @pipeline_def(batch_size=3, num_threads=2, device_id=None, seed=1, enable_checkpointing=True)
    def p():
        out = reader(name="Reader", **args)
        return tuple(out.values()) if isinstance(out, dict) else tuple(out) if isinstance(out, list) else out

    pipe = p(checkpoint=checkpoint)
    pipe.build()
    return pipe


def _same_from_s3_and_disk_with_resume(reader, local_root: pathlib.Path, s3_root: str, args) -> None:
    """Batches (source_info with the root swapped), reader_meta and a mid-epoch resume of ``reader`` from
    S3 equal those from disk; ``args(root)`` gives the reader's arguments for a root."""
    def batches(pipe, n: int, root: str) -> list:
        return [[(data, [i.replace(root, "<root>") for i in info or ()]) for data, info in batch]
                for batch in _batches(pipe, n)]

    local, remote = _reader_pipe(reader, **args(str(local_root))), _reader_pipe(reader, **args(s3_root))
    assert remote.reader_meta("Reader") == local.reader_meta("Reader")
    assert batches(remote, 2, s3_root) == batches(local, 2, str(local_root))
    checkpoint = remote.checkpoint()
    expected = batches(local, 4, str(local_root))
    assert batches(remote, 4, s3_root) == expected
    assert batches(_reader_pipe(reader, checkpoint=checkpoint, **args(s3_root)), 4, s3_root) == expected


@pytest.mark.parametrize("indexed", [True, False])
def test_container_readers_read_the_same_records_from_s3_and_disk(s3_root, local_dataset, indexed):
    def args(root: str) -> dict:
        paths = [f"{root}/records/shard-{k}.tar" for k in range(2)]
        return dict(paths=paths, index_paths=[p[:-3] + "idx" for p in paths] if indexed else None,
                    ext=["jpg", "cls"], random_shuffle=True)

    _same_from_s3_and_disk_with_resume(fn.readers.webdataset, local_dataset, s3_root, args)
    if not indexed:
        return
    features = {"image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                "label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
                "box": tfrec.VarLenFeature([4], tfrec.float32, 0.0)}

    def tf_args(root: str) -> dict:
        return dict(path=[f"{root}/records/part-{k}.tfrecord" for k in range(2)],
                    index_path=[f"{root}/records/part-{k}.idx" for k in range(2)], features=features,
                    random_shuffle=True)

    _same_from_s3_and_disk_with_resume(fn.readers.tfrecord, local_dataset, s3_root, tf_args)


@pytest.mark.parametrize("masks", [dict(), dict(polygon_masks=True, image_ids=True)])
def test_coco_reads_the_same_images_and_objects_from_s3_and_disk(s3_root, local_dataset, masks):
    def args(root: str) -> dict:
        return dict(file_root=f"{root}/flowers", annotations_file=f"{root}/coco.json", shuffle_after_epoch=True,
                    **masks)

    _same_from_s3_and_disk_with_resume(fn.readers.coco, local_dataset, s3_root, args)


def test_array_record_reads_the_same_records_from_s3_and_disk(s3_root, local_dataset):
    if not (local_dataset / "records" / "0.array_record").exists():
        pytest.skip("array_record is not installed")

    def args(root: str) -> dict:
        return dict(path=[f"{root}/records/{k}.array_record" for k in range(2)], random_shuffle=True)

    _same_from_s3_and_disk_with_resume(fn.readers.array_record, local_dataset, s3_root, args)


def test_memory_urls_and_missing_files_name_the_url():
    fs = fsspec.filesystem("memory")
    fs.pipe("/jaxdali-test/a.bin", b"hello")
    assert storage.read_range("memory://jaxdali-test/a.bin", 1, 3) == b"ell"
    assert storage.join("memory://jaxdali-test/", "a.bin") == "memory://jaxdali-test/a.bin"
    assert storage.dirname("memory://jaxdali-test/a.bin") == "memory://jaxdali-test"
    with pytest.raises(FileNotFoundError) as e:
        _numpy_pipe(files=["memory://jaxdali-test/missing.npy"]).run()
    assert "missing.npy" in str(e.value) + "".join(getattr(e.value, "__notes__", []))


def test_url_without_fsspec_names_the_extra(monkeypatch):
    monkeypatch.setattr(storage, "_fsspec", lambda: None)
    with pytest.raises(ImportError, match=r"needs fsspec.*jaxdali\[remote\]"):
        storage.read_file("s3://bucket/key")
    assert storage.read_file(__file__)  # local paths never need it
