"""fn.readers.webdataset on tar shards built here from real photos: bytes, DALI parity (with and without
index files), sharding, resume, every missing_component_behavior, dtypes and damaged archives."""

from __future__ import annotations

import io
import os
import pathlib
import subprocess
import sys
import tarfile
import warnings

import numpy as np
import pytest

from jaxdali import fn, pipeline_def, types
from jaxdali.core.checkpoint import CheckpointError
from jaxdali.ops.readers import wds_index
from jaxdali.tools import wds2idx

#: Operators these tests check against real DALI (collected by tests/test_operator_coverage.py).
COVERED_OPERATORS = ("readers.webdataset",)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def shards(flowers_root, shared_data, tmp_path_factory):
    """Two shards of 13 + 11 samples: a real photo (.jpg, or .png for every 5th), its label (.cls), a
    little-endian int32 pair (.ids); sample 7 has no .cls; a hidden file and a directory entry too.
    Returns (archives, indexes, expected samples as {ext: bytes})."""
    root = tmp_path_factory.mktemp("wds")
    photos = []
    for cls in sorted(os.listdir(flowers_root)):
        if os.path.isdir(os.path.join(flowers_root, cls)):
            photos += sorted(pathlib.Path(flowers_root, cls).glob("*.jpg"))[:5]
    pngs = sorted((shared_data / "png").glob("*.png"))
    samples = []
    for i in range(24):
        sample = {"png": pngs[i // 5 % len(pngs)].read_bytes()} if i % 5 == 0 else {"jpg": photos[i].read_bytes()}
        if i != 7:
            sample["cls"] = str(i % 5).encode()
        sample["ids"] = np.array([i, -i], "<i4").tobytes()
        samples.append(sample)
    archives, indexes = [], []
    for k, (lo, hi) in enumerate(((0, 13), (13, 24))):
        path = root / f"shard-{k}.tar"
        with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
            dirinfo = tarfile.TarInfo(f"part{k}")
            dirinfo.type = tarfile.DIRTYPE
            tar.addfile(dirinfo)
            for i in range(lo, hi):
                for ext, data in samples[i].items():
                    _add(tar, f"part{k}/s{i:03d}.{ext}", data)
                if i == lo + 2:
                    _add(tar, f"part{k}/.hidden.jpg", b"not a sample")
        assert wds2idx.main([str(path)]) == 0  # default index name: shard-k.idx
        archives.append(str(path))
        indexes.append(str(root / f"shard-{k}.idx"))
    return archives, indexes, samples


def _pipe(lib_fn, lib_pipeline_def, archives, indexes, ext, batch_size=4, **kw):
    @lib_pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=5, prefetch_queue_depth=1,
                      enable_checkpointing=kw.pop("enable_checkpointing", False))
    def p():
        out = lib_fn.readers.webdataset(paths=archives, index_paths=indexes, ext=ext, name="Reader", **kw)
        return tuple(out) if isinstance(out, (list, tuple)) else out

    return p


def _batches(pipe, n):
    return [[[np.array(s) for s in out] for out in pipe.run()] for _ in range(n)]


def test_bytes_and_labels_as_written(shards):
    archives, indexes, samples = shards
    p = _pipe(fn, pipeline_def, archives, indexes, ["jpg;png", "cls", "ids"], batch_size=24,
              dtypes=[types.UINT8, types.UINT8, types.INT32])()
    images, labels, ids = p.run()
    assert p.epoch_size("Reader") == 24
    assert ids.dtype == types.INT32
    for i, s in enumerate(samples):
        assert images.at(i).tobytes() == s.get("jpg", s.get("png"))
        assert labels.at(i).tobytes() == s.get("cls", b"")
        assert ids.at(i).tolist() == [i, -i]
    assert images.source_info[14].startswith(f"{archives[1]}:") and images.source_info[14].endswith(":part1/s014.jpg")
    assert labels.source_info[7] == ""


def test_index_tool_writes_what_dalis_wds2idx_writes(shards, tmp_path):
    creator = pytest.importorskip("wds2idx")  # installed with the DALI wheel
    archives, indexes, _ = shards
    theirs = tmp_path / "dali.idx"
    with creator.IndexCreator(archives[0], str(theirs), verbose=False) as c:
        c.create_index()
    assert pathlib.Path(indexes[0]).read_text() == theirs.read_text()


def test_index_tool_runs_as_a_module(shards, tmp_path, subprocess_env):
    archives, indexes, _ = shards
    out = tmp_path / "m.idx"
    done = subprocess.run([sys.executable, "-m", "jaxdali.tools.wds2idx", archives[1], str(out)],
                          env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == pathlib.Path(indexes[1]).read_text()
    (tmp_path / "cut.tar").write_bytes(pathlib.Path(archives[0]).read_bytes()[:3000])
    cut = subprocess.run([sys.executable, "-m", "jaxdali.tools.wds2idx", str(tmp_path / "cut.tar")],
                         env=subprocess_env, capture_output=True, text=True, timeout=120)
    assert cut.returncode == 1 and "cut.tar" in cut.stderr


# Without an index DALI makes an empty sample of each hidden file (its index tool drops them, as we do),
# so the unindexed case is compared with "skip", which drops that sample.
@pytest.mark.parametrize("missing,indexed,num_shards,pad", [("", True, 1, False), ("skip", True, 3, True),
                                                            ("empty", True, 2, False), ("skip", False, 2, False)])
def test_matches_dali_bit_exact(shards, missing, indexed, num_shards, pad):
    dali = pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn

    archives, indexes, _ = shards
    ext = ["jpg;png", "cls"]
    for shard in range(num_shards):
        kw = dict(missing_component_behavior=missing, shard_id=shard, num_shards=num_shards, pad_last_batch=pad)
        make = _pipe(fn, pipeline_def, archives, indexes if indexed else None, ext, enable_checkpointing=True, **kw)
        first = make()
        head = _batches(first, 2)
        ours = make(checkpoint=first.checkpoint())  # resumed: goes on as DALI does
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DALI warns about scanning without an index
            theirs = _pipe(dali_fn, dali.pipeline_def, archives, indexes if indexed else None, ext, **kw)()
            theirs.build()
        assert ours.reader_meta("Reader") == {k: v for k, v in theirs.reader_meta("Reader").items()
                                              if k in ours.reader_meta("Reader")}
        for a, b in zip(head + _batches(ours, 7), _batches(theirs, 9)):
            for x, y in zip(a, b):
                assert [s.tobytes() for s in x] == [t.tobytes() for t in y]


def test_scan_without_index_equals_the_index(shards):
    archives, indexes, _ = shards
    for k, (archive, index) in enumerate(zip(archives, indexes)):
        scanned = wds_index.group_samples(wds_index.scan_tar(archive))
        text = pathlib.Path(index).read_text()
        assert scanned == wds_index.parse_index(text, index, os.path.getsize(archive))
        assert len(scanned) == (13, 11)[k]
        assert [c.ext for c in scanned[0]] == [("png", "jpg")[k], "cls", "ids"]


def test_skip_error_and_case_insensitive_extensions(shards):
    archives, indexes, _ = shards
    p = _pipe(fn, pipeline_def, archives, indexes, ["jpg", "cls"], missing_component_behavior="skip")()
    assert p.epoch_size("Reader") == 24 - 5 - 1  # no png samples, not sample 7
    with pytest.raises(RuntimeError, match=r"sample 'part0/s000' of .*shard-0\.tar.* no component for output 0 "
                                           r"\(extensions 'jpg'\)"):
        _pipe(fn, pipeline_def, archives, indexes, ["jpg", "cls"], missing_component_behavior="error")().build()
    upper = _pipe(fn, pipeline_def, archives, indexes, ["JPG;PNG"], case_sensitive_extensions=False)()
    assert all(len(s) for s in upper.run()[0].samples())
    strict = _pipe(fn, pipeline_def, archives, indexes, ["JPG;PNG"])()
    assert not any(len(s) for s in strict.run()[0].samples())


def test_resumes_mid_epoch_from_a_checkpoint(shards):
    archives, indexes, _ = shards
    make = _pipe(fn, pipeline_def, archives, indexes, ["jpg;png", "cls"], random_shuffle=True, num_shards=2,
                 shard_id=0, enable_checkpointing=True)
    p = make()
    _batches(p, 4)
    saved = p.checkpoint()
    expected = _batches(p, 5)
    q = make(checkpoint=saved)
    assert [[[s.tobytes() for s in x] for x in b] for b in _batches(q, 5)] == \
        [[[s.tobytes() for s in x] for x in b] for b in expected]


def test_a_checkpoint_of_rewritten_shards_is_refused(tmp_path):
    archives = [str(tmp_path / f"{k}.tar") for k in range(2)]

    def write(split: int) -> None:  # 5 samples, the first `split` in shard 0
        for k, (lo, hi) in enumerate(((0, split), (split, 5))):
            with tarfile.open(archives[k], "w") as tar:
                for i in range(lo, hi):
                    _add(tar, f"s{i}.cls", str(i).encode())

    write(3)
    make = _pipe(fn, pipeline_def, archives, None, ["cls"], batch_size=2, enable_checkpointing=True)
    p = make()
    p.run()
    write(2)
    with pytest.raises(CheckpointError, match=r"listing.*0\.tar.*changed"):
        make(checkpoint=p.checkpoint()).build()


def test_damaged_archives_and_indexes_are_named(shards, tmp_path):
    archives, indexes, _ = shards
    blob = pathlib.Path(archives[0]).read_bytes()
    cut = tmp_path / "cut.tar"
    cut.write_bytes(blob[:len(blob) // 2])
    with pytest.raises(wds_index.ShardError, match=r"cut\.tar.*runs past the end .* truncated"):
        _pipe(fn, pipeline_def, [str(cut)], None, ["jpg;png"])().build()
    assert wds2idx.main([str(cut), str(tmp_path / "cut.idx")]) == 1
    with pytest.raises(wds_index.ShardError, match=r"index .*shard-0\.idx.*line \d+: .* beyond the end .*stale"):
        _pipe(fn, pipeline_def, [str(cut)], indexes[:1], ["jpg;png"])().build()
    garbage = tmp_path / "garbage.tar"
    garbage.write_bytes(blob[:1024] + os.urandom(4096))
    with pytest.raises(wds_index.ShardError, match=r"garbage\.tar"):
        wds_index.scan_tar(str(garbage))
    with pytest.raises(FileNotFoundError, match=r"index file .*nope\.idx.*wds2idx"):
        _pipe(fn, pipeline_def, archives[:1], [str(tmp_path / "nope.idx")], ["jpg"])().build()
    bad = tmp_path / "bad.idx"
    bad.write_text("v1.2 2\njpg 512 10 a.jpg\n")
    with pytest.raises(wds_index.ShardError, match=r"announces 2 samples but 1"):
        _pipe(fn, pipeline_def, archives[:1], [str(bad)], ["jpg"])().build()
    with pytest.raises(RuntimeError, match=r"'part0/s000.cls' .* 1 bytes, not a multiple of the 4-byte dtype"):
        _pipe(fn, pipeline_def, archives, indexes, ["cls"], dtypes=types.INT32)().build()
    with pytest.raises(ValueError, match="missing_component_behavior"):
        _pipe(fn, pipeline_def, archives, indexes, ["jpg"], missing_component_behavior="fill")().build()
