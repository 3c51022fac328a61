"""fn.readers.array_record: records written by array_record's own writer come back byte for byte, in order
or globally shuffled, sharded and resumed exactly through the shared reader machinery, and decodable."""

from __future__ import annotations

import io

import numpy as np
import pytest

array_record_module = pytest.importorskip("array_record.python.array_record_module")

import jaxdali  # noqa: E402
from jaxdali import fn, types  # noqa: E402


def write(path, records, options="group_size:1") -> str:
    writer = array_record_module.ArrayRecordWriter(str(path), options)
    for r in records:
        writer.write(r)
    writer.close()
    return str(path)


def record(i: int) -> bytes:
    """Distinct records of varied sizes (including empty) whose first 4 bytes are the index."""
    return i.to_bytes(4, "little") + bytes((i * 7 + k) % 256 for k in range(i % 9))


@pytest.fixture
def files(tmp_path):
    return [write(tmp_path / "a.array_record", [record(i) for i in range(10)]),
            write(tmp_path / "b.array_record", [record(i) for i in range(10, 23)], options="group_size:4,zstd")]


def _pipe(batch_size=4, checkpoint=None, **args):
    @jaxdali.pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=9,
                          enable_checkpointing=checkpoint is not None, checkpoint=checkpoint or None)
    def p():
        return fn.readers.array_record(name="Reader", **args)

    return p()


def _indices(pipe, batches):
    out = []
    for _ in range(batches):
        (data,) = pipe.run()
        out.append([int.from_bytes(bytes(s[:4]), "little") for s in data.samples()])
    return out


def test_records_are_the_bytes_written_in_order(files):
    pipe = _pipe(batch_size=5, path=files)
    seen = []
    for _ in range(5):
        (data,) = pipe.run()
        assert data.dtype == types.UINT8 and data.ndim() == 1
        seen += [bytes(s) for s in data.samples()]
    assert seen[:23] == [record(i) for i in range(23)] and seen[23:] == [record(i) for i in range(2)]
    assert [data[i].source_info() for i in (0, 3)] == [f"{files[1]} at record 10", f"{files[0]} at record 0"]
    assert pipe.reader_meta("Reader") == {"epoch_size": 23, "epoch_size_padded": 23, "number_of_shards": 1,
                                         "shard_id": 0, "pad_last_batch": False, "stick_to_shard": False}


def test_matches_grains_data_source(files):
    grain_source = pytest.importorskip("array_record.python.array_record_data_source")
    source = grain_source.ArrayRecordDataSource(files)
    pipe = _pipe(batch_size=23, path=files)
    (data,) = pipe.run()
    assert [bytes(s) for s in data.samples()] == [source[i] for i in range(len(source))]


@pytest.mark.parametrize("shuffle", ["random_shuffle", "shuffle_after_epoch"])
def test_global_shuffle_covers_every_record_and_resumes_exactly(files, shuffle):
    args = dict(path=files, num_shards=2, shard_id=1, pad_last_batch=True, **{shuffle: True})
    original = _pipe(checkpoint="", **args)
    epoch = sum(_indices(original, 3), [])  # shard 1: 12 records, 3 batches of 4
    assert sorted(epoch) != epoch and len(set(epoch)) == 12
    if shuffle == "random_shuffle":
        # The shards partition one permutation of the whole set: not a contiguous range of records.
        assert max(epoch) - min(epoch) > 11
    checkpoint = original.checkpoint()
    expected = _indices(original, 7)
    assert _indices(_pipe(checkpoint=checkpoint, **args), 7) == expected


def test_records_holding_images_go_to_the_decoder(tmp_path, flowers_root):
    Image = pytest.importorskip("PIL.Image")
    import glob

    paths = sorted(glob.glob(f"{flowers_root}/daisy/*.jpg"))[:3]
    pngs = []
    for p in paths:
        buf = io.BytesIO()
        Image.open(p).convert("RGB").resize((40, 30)).save(buf, format="PNG")
        pngs.append(buf.getvalue())
    path = write(tmp_path / "images.array_record", pngs)

    @jaxdali.pipeline_def(batch_size=3, num_threads=1, device_id=None)
    def p():
        return fn.decoders.image(fn.readers.array_record(path=path), output_type=types.RGB)

    (images,) = p().run()
    for got, png in zip(images.samples(), pngs):
        np.testing.assert_array_equal(got, np.asarray(Image.open(io.BytesIO(png))))


def test_bad_files_are_named(tmp_path, files):
    with pytest.raises(FileNotFoundError, match="readers.array_record: ArrayRecord file .*missing"):
        _pipe(path=[files[0], str(tmp_path / "missing.array_record")]).run()
    truncated = tmp_path / "truncated.array_record"
    truncated.write_bytes(open(files[0], "rb").read()[:100])
    with pytest.raises(ValueError, match="truncated.array_record' is not a readable ArrayRecord file"):
        _pipe(path=str(truncated)).run()
    with pytest.raises(ValueError, match="readers.array_record: argument 'path': 's3://bucket/a.array_record' is a "
                                         "URL.*local paths only"):
        _pipe(path=[files[0], "s3://bucket/a.array_record"]).run()
