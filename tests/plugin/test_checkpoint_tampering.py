"""Edited or damaged checkpoints are refused with a CheckpointError naming the field (issue 15, defect 5).

Every case here restored silently into other data (or raised a bare TypeError, OverflowError or
RecursionError) before checkpoints were validated field by field.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("jax")

from jaxdali import fn  # noqa: E402
from jaxdali.core.checkpoint import CheckpointCountError, CheckpointError  # noqa: E402
from jaxdali.plugin.jax import data_iterator  # noqa: E402

BATCH = 2
FILES = 40  # 20 batches per epoch


def make_class_folders(root, n: int = FILES) -> str:
    """Two class folders of one-byte files whose content is their index."""
    for i in range(n):
        folder = root / f"class{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:04d}.jpg").write_bytes(bytes([i]))
    return str(root)


@data_iterator(output_map=["data", "label"], reader_name="Reader")
def loader(root):
    data, label = fn.readers.file(file_root=root, name="Reader")
    return data, label


def make(root, checkpoints=None):
    return loader(root=root, batch_size=BATCH, enable_checkpointing=True, device_id=None, seed=1,
                  checkpoints=checkpoints)


def values(it, steps: int) -> list:
    return [np.asarray(next(it)["data"]).ravel().tolist() for _ in range(steps)]


@pytest.fixture
def saved(tmp_path):
    """(root, checkpoint after 7 batches as a dict, the 5 batches that follow)."""
    root = make_class_folders(tmp_path / "data")
    it = make(root)
    values(it, 7)
    (cp,) = it.checkpoints()
    return root, json.loads(cp), values(it, 5)


def edited(doc: dict, path: str, value=None, delete: bool = False) -> bytes:
    doc = json.loads(json.dumps(doc))
    *parents, last = path.split(".")
    target = doc
    for key in parents:
        target = target[key]
    if delete:
        del target[last]
    else:
        target[last] = value
    return json.dumps(doc).encode()


def test_the_unedited_checkpoint_restores(saved):
    root, doc, expected = saved
    assert values(make(root, [json.dumps(doc).encode()]), 5) == expected


@pytest.mark.parametrize("path, value, delete, field", [
    # the reader's state removed: DALI-like restores restarted the reader at 0
    ("pipeline.runner.ops.Reader", None, True, "pipeline.runner.ops.Reader"),
    ("pipeline.runner.ops.Reader.position", None, True, "pipeline.runner.ops.Reader.position"),
    ("pipeline.runner.ops.Ghost", {"position": 0}, False, "pipeline.runner.ops.Ghost"),
    ("pipeline.runner.iteration", -3, False, "pipeline.runner.iteration"),
    ("pipeline.runner.iteration", "7", False, "pipeline.runner.iteration"),  # was a TypeError
    ("pipeline.runner.iteration", 7.5, False, "pipeline.runner.iteration"),
    ("pipeline.runner.iteration", True, False, "pipeline.runner.iteration"),
    ("pipeline.runner.ops.Reader.position", -2, False, "pipeline.runner.ops.Reader.position"),
    ("pipeline.runner.ops.Reader.position", 20, False, "pipeline.runner.ops.Reader.position"),  # 7 batches: 14
    ("pipeline.runner.ops.Reader.resharded", "no", False, "pipeline.runner.ops.Reader.resharded"),
    ("pipeline.runner.ops.Reader.listing", None, True, "pipeline.runner.ops.Reader.listing"),
    ("pipeline.runner.ops.Reader.layout.num_samples", 38, False, "pipeline.runner.ops.Reader.layout"),
    ("pipeline.runner.ops.Reader.layout.shard_id", "0", False, "pipeline.runner.ops.Reader.layout"),
    ("pipeline.seed", -1, False, "pipeline.seed"),
    ("pipeline.last_iter", "no", False, "pipeline.last_iter"),
    ("fingerprint.batch_size", None, False, "fingerprint.batch_size"),
    # the iterator's counters: epochs of 38, 13 and 0 batches instead of 20, a moved counter
    ("iterator._size", 76, False, "iterator._size"),
    ("iterator._size", 26, False, "iterator._size"),
    ("iterator._size", 0, False, "iterator._size"),
    ("iterator._counter", 2, False, "iterator._counter"),
    ("iterator._counter", -14, False, "iterator._counter"),
    ("iterator._shards_id", [1], False, "iterator._shards_id"),
    ("iterator._counter_per_gpu", [3], False, "iterator._counter_per_gpu"),
    ("iterator._shard_sizes_per_gpu", [10 ** 30], False, "iterator._shard_sizes_per_gpu"),
    ("iterator._origin", {"iteration": 2, "shard_ids": [0]}, False, "iterator._counter"),
])
def test_an_edited_field_is_named(saved, path, value, delete, field):
    root, doc, _ = saved
    with pytest.raises(CheckpointError) as e:
        make(root, [edited(doc, path, value, delete)])
    assert field in str(e.value)


@pytest.mark.parametrize("text", [
    b'{"format": "jaxdali-checkpoint", "version": 2, "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"format": "jaxdali-checkpoint", "version": 2, "x": ' + b"[" * 40 + b"]" * 40 + b"}",
], ids=["depth-100000", "depth-40"])
def test_deep_nesting_is_refused_without_recursion_error(saved, text):
    root, _, _ = saved
    with pytest.raises(CheckpointError, match="nests containers deeper than"):
        make(root, [text])


@pytest.mark.parametrize("number", [b"1e400", b"NaN", b"Infinity", b"9" * 5000],
                         ids=["1e400", "NaN", "Infinity", "5000-digits"])
def test_numbers_no_checkpoint_holds_are_refused(saved, number):
    root, doc, _ = saved
    text = edited(doc, "pipeline.runner.iteration", "@").replace(b'"@"', number)
    with pytest.raises(CheckpointError, match="pipeline.runner.iteration|no checkpoint has"):
        make(root, [text])


@pytest.mark.parametrize("depth", [40, 2000])
def test_deep_iterator_data_is_refused(saved, depth):
    root, doc, _ = saved
    text = edited(doc, "iterator._size", "@").replace(b'"@"', b"[" * depth + b"]" * depth)
    with pytest.raises(CheckpointError, match="nests containers deeper than"):
        make(root, [text])


def test_a_renamed_file_with_the_same_count_is_refused(saved):
    root, doc, _ = saved
    os.rename(os.path.join(root, "class0", "0004.jpg"), os.path.join(root, "class0", "0004b.jpg"))
    with pytest.raises(CheckpointError, match=r"'pipeline.runner.ops.Reader.listing'.*file_root"):
        make(root, [json.dumps(doc).encode()])


def test_a_relabelled_file_list_is_refused(tmp_path):
    for i in range(6):
        (tmp_path / f"{i}.bin").write_bytes(bytes([i]))
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{i}.bin {i}\n" for i in range(6)))

    @data_iterator(output_map=["label"], reader_name="Reader")
    def listed():
        return fn.readers.file(file_list=str(listing), name="Reader")[1]

    it = listed(batch_size=2, enable_checkpointing=True, device_id=None)
    next(it)
    cps = it.checkpoints()
    listing.write_text("".join(f"{i}.bin {5 - i}\n" for i in range(6)))
    with pytest.raises(CheckpointError, match=r"listing.*file_list"):
        listed(batch_size=2, enable_checkpointing=True, device_id=None, checkpoints=cps)


def test_another_folder_names_file_root(saved, tmp_path):
    _, doc, _ = saved
    other = make_class_folders(tmp_path / "other")
    with pytest.raises(CheckpointError, match=r"operator 'Reader' \(fn.readers.file\): argument 'file_root' differs"):
        make(other, [json.dumps(doc).encode()])


def test_checkpoint_lists_must_match_the_pipelines(saved):
    root, doc, _ = saved
    cp = json.dumps(doc).encode()
    with pytest.raises(CheckpointCountError, match=r"number of checkpoints provided \(2\)"):
        make(root, [cp, b"garbage"])  # DALI ignores the extra entry
    with pytest.raises(RuntimeError, match=r"number of checkpoints provided \(2\)"):
        make(root, [cp, cp])  # also a RuntimeError, as DALI's wrong count is
    with pytest.raises(CheckpointError, match="empty list"):
        make(root, [])  # DALI starts afresh
    with pytest.raises(CheckpointError, match="not a single checkpoint"):
        make(root, cp)


def test_pipelines_restored_at_different_iterations_are_refused(tmp_path):
    root = make_class_folders(tmp_path / "data")

    def build(checkpoints=None):
        from jaxdali.plugin.jax import DALIGenericIterator
        from jaxdali import pipeline_def

        @pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=1, enable_checkpointing=True)
        def pipe(shard_id):
            return fn.readers.file(file_root=root, shard_id=shard_id, num_shards=2, name="Reader")[1]

        pipes = [pipe(k, checkpoint=None if checkpoints is None else checkpoints[k]) for k in range(2)]
        return DALIGenericIterator(pipes, ["label"], reader_name="Reader")

    it = build()
    early = it.checkpoints()
    next(it), next(it)
    late = it.checkpoints()
    with pytest.raises(CheckpointError, match="different iterations"):
        build([early[0], late[1]])
