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


def test_a_checkpoint_of_rewritten_files_is_refused(tmp_path):
    from jaxdali.core.checkpoint import CheckpointError

    paths = [str(tmp_path / f"{k}.array_record") for k in range(2)]
    for path, part in zip(paths, (range(3), range(3, 5))):
        write(path, [record(i) for i in part])
    pipe = _pipe(checkpoint="", path=paths)
    pipe.run()
    for path, part in zip(paths, (range(2), range(2, 5))):  # same count, records moved
        write(path, [record(i) for i in part])
    with pytest.raises(CheckpointError, match=r"listing.*0\.array_record.*changed"):
        _pipe(checkpoint=pipe.checkpoint(), path=paths).build()


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


def _varied(count: int, seed: int = 0) -> list[bytes]:
    """Empty, tiny, repetitive and incompressible records up to 40 KB: chunks cross 64 KiB block boundaries."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        size = int(rng.choice([0, 1, 7, 300, 5000, 40000]))
        body = rng.integers(0, 256, size, dtype=np.uint8).tobytes() if i % 2 else bytes([i % 251]) * size
        out.append(body)
    return out


NATIVE = ["group_size:1", "group_size:1,uncompressed", "group_size:5,zstd:1", "group_size:3,uncompressed",
          "group_size:4,brotli", "group_size:64,zstd,window_log:18", "group_size:2,pad_to_block_boundary:true"]


@pytest.mark.parametrize("options", NATIVE + ["group_size:2,snappy", "group_size:3,transpose"])
def test_every_record_matches_the_librarys_read(tmp_path, monkeypatch, options):
    from jaxdali.ops.readers import array_record as reader_module

    if "brotli" in options:
        pytest.importorskip("brotli")
    if options in NATIVE:  # decoded by jaxdali alone: the library must not be needed
        monkeypatch.setattr(reader_module, "_open_library", lambda op, path: pytest.fail(f"library opened {path}"))
    records = _varied(61)
    path = write(tmp_path / "v.array_record", records, options)
    library = array_record_module.ArrayRecordReader(path)
    expected = library.read(list(range(61)))
    library.close()
    assert expected == records
    pipe = _pipe(batch_size=16, path=[path], random_shuffle=True, pad_last_batch=True)
    seen = {}
    for _ in range(8):  # two epochs, shuffled
        (data,) = pipe.run()
        for i in range(len(data)):
            r = int(data[i].source_info().rpartition(" ")[2])
            assert bytes(data.at(i)) == expected[r], (options, r)
            seen[r] = seen.get(r, 0) + 1
    assert sorted(seen) == list(range(61))


@pytest.mark.parametrize("dont_use_mmap", [False, True])
def test_without_zstandard_the_library_reads_zstd_chunks(files, monkeypatch, dont_use_mmap):
    from jaxdali.ops.readers import riegeli_format

    expected = [bytes(s) for s in _pipe(batch_size=23, path=files).run()[0].samples()]
    real = riegeli_format.codec_available
    monkeypatch.setattr(riegeli_format, "codec_available", lambda c: c != riegeli_format.ZSTD and real(c))
    pipe = _pipe(batch_size=23, path=files, dont_use_mmap=dont_use_mmap)
    assert [bytes(s) for s in pipe.run()[0].samples()] == expected


def test_fsspec_urls_read_like_local_files(files):
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    urls = []
    for k, f in enumerate(files):
        memory.pipe(f"/array-record-test/{k}.array_record", open(f, "rb").read())
        urls.append(f"memory://array-record-test/{k}.array_record")
    local, remote = _pipe(batch_size=23, path=files), _pipe(batch_size=23, path=urls)
    assert [bytes(s) for s in remote.run()[0].samples()] == [bytes(s) for s in local.run()[0].samples()]


def test_bad_files_are_named(tmp_path, files):
    with pytest.raises(FileNotFoundError, match="readers.array_record: ArrayRecord file .*missing"):
        _pipe(path=[files[0], str(tmp_path / "missing.array_record")]).run()
    truncated = tmp_path / "truncated.array_record"
    truncated.write_bytes(open(files[0], "rb").read()[:100])
    with pytest.raises(ValueError, match="truncated.array_record' is not a readable ArrayRecord file: 100 bytes"):
        _pipe(path=str(truncated)).run()
    cut = tmp_path / "cut.array_record"
    cut.write_bytes(open(files[0], "rb").read()[:70000])
    with pytest.raises(ValueError, match="cut.array_record' is not a readable ArrayRecord file: no ArrayRecord "
                                         "postscript"):
        _pipe(path=str(cut)).run()


@pytest.mark.parametrize("options", ["group_size:1", "group_size:4,zstd", "group_size:3,uncompressed"])
def test_corrupt_chunks_name_the_file_and_records(tmp_path, options):
    from jaxdali.ops.readers.array_record_format import read_index

    path = write(tmp_path / "c.array_record", [bytes([i]) * (50 + i) for i in range(12)], options)
    index = read_index(path)
    raw = bytearray(open(path, "rb").read())
    begin = int(index.chunk_begin[1])
    raw[begin + 40:begin + 44] = b"\xff\xff\xff\xff"  # the chunk's compression byte and size-table size
    open(path, "wb").write(bytes(raw))
    first, count = int(index.num_records[0]), int(index.num_records[1])
    with pytest.raises(OSError, match=f"c.array_record', records {first} to {first + count - 1} "
                                      f"\\(the chunk at byte {begin}\\)"):
        _pipe(batch_size=12, path=path).run()
