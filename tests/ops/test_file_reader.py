"""fn.readers.file: listing (class folders, file_list, files), sharding, padding, shuffling, errors."""

from __future__ import annotations

import os
import pathlib

import pytest

from jaxdali import fn, pipeline_def, types


def _pipe(batch_size=2, **reader_args):
    @pipeline_def(batch_size=batch_size, num_threads=2, device_id=None, seed=7, prefetch_queue_depth=1)
    def p():
        data, label = fn.readers.file(name="Reader", **reader_args)
        return data, label

    return p()


def _read(pipe, batches):
    """(contents as ints of one-byte files or byte-lengths, labels) per batch."""
    out = []
    for _ in range(batches):
        data, label = pipe.run()
        out.append(([int(d[0]) if len(d) == 1 else len(d) for d in data.samples()], label.as_array().ravel().tolist()))
    return out


def _tree(root: pathlib.Path, layout: dict[str, list[str]]) -> None:
    for folder, names in layout.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for name in names:
            (root / folder / name).write_bytes(name.encode())


def test_class_folders_sorted_labels_one_level_case_insensitive_filters(tmp_path):
    _tree(tmp_path, {"zebra": ["b.JPG", "a.jpg", "notes.txt"], "apple": ["x.png", "y.jpeg"],
                     "apple/nested": ["deep.jpg"], "empty": []})
    (tmp_path / "top.jpg").write_bytes(b"top")
    pipe = _pipe(batch_size=4, file_root=str(tmp_path))
    data, label = pipe.run()
    names = [bytes(s).decode() for s in data.samples()]
    assert names == ["x.png", "y.jpeg", "a.jpg", "b.JPG"]  # class by class, files sorted; no txt, no nesting
    assert label.as_array().ravel().tolist() == [0, 0, 2, 2]  # 'empty' is class 1
    assert label.dtype == types.INT32 and label.shape()[0] == (1,)
    assert data.dtype == types.UINT8 and data.ndim() == 1
    assert pipe.epoch_size("Reader") == 4


def test_file_filters_case_sensitive_and_dir_filters(tmp_path):
    _tree(tmp_path, {"a": ["1.JPG", "2.jpg", "3.bin"], "b": ["4.jpg"], "c": ["5.bin"]})
    assert _pipe(batch_size=1, file_root=str(tmp_path), case_sensitive_filter=True).epoch_size("Reader") == 2
    assert _pipe(batch_size=1, file_root=str(tmp_path), file_filters=["*.bin"]).epoch_size("Reader") == 2
    pipe = _pipe(batch_size=2, file_root=str(tmp_path), dir_filters=["a", "c"], file_filters=["*.bin"])
    data, label = pipe.run()
    assert [bytes(s).decode() for s in data.samples()] == ["3.bin", "5.bin"]
    assert label.as_array().ravel().tolist() == [0, 1]


def test_file_list_parsed_from_the_end_with_spaces_and_relative_paths(tmp_path):
    (tmp_path / "sub dir").mkdir()
    (tmp_path / "sub dir" / "my file 1.jpg").write_bytes(b"one")
    (tmp_path / "two.jpg").write_bytes(b"twotwo")
    (tmp_path / " lead.jpg").write_bytes(b"lead")  # a leading space belongs to the path (DALI 2.4)
    listing = tmp_path / "list.txt"
    listing.write_text("sub dir/my file 1.jpg 7\n\n   \ntwo.jpg\t-3  \n lead.jpg 4\n")
    pipe = _pipe(batch_size=3, file_list=str(listing))
    data, label = pipe.run()
    assert [bytes(s) for s in data.samples()] == [b"one", b"twotwo", b"lead"]
    assert label.as_array().ravel().tolist() == [7, -3, 4]
    # with file_root, paths are relative to it instead of the list's folder
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "two.jpg").write_bytes(b"x")
    listing2 = tmp_path / "list2.txt"
    listing2.write_text("two.jpg 1\n")
    data, _ = _pipe(batch_size=1, file_list=str(listing2), file_root=str(other)).run()
    assert bytes(data.at(0)) == b"x"


def test_file_list_bad_line_names_the_line(tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_text("a.jpg 1\nb.jpg\n")
    with pytest.raises(ValueError, match=r"line 2 of file_list .*'b.jpg'"):
        _pipe(file_list=str(listing)).build()


def test_files_with_and_without_labels(index_files):
    files = index_files(3)
    assert _read(_pipe(batch_size=3, files=files), 1) == [([0, 1, 2], [0, 1, 2])]
    assert _read(_pipe(batch_size=3, files=files, labels=[5, 6, 7]), 1) == [([0, 1, 2], [5, 6, 7])]
    rel = [os.path.basename(f) for f in files]
    assert _read(_pipe(batch_size=3, files=rel, file_root=os.path.dirname(files[0])), 1)[0][0] == [0, 1, 2]


@pytest.mark.parametrize("args,error,match", [
    (dict(labels=[1]), ValueError, "'labels' can only be used together with 'files'"),
    (dict(files=["a"], labels=[1, 2]), ValueError, "'files' has 1 entries but 'labels' has 2"),
    (dict(files=["a"], file_list="x"), ValueError, "mutually exclusive"),
    (dict(), ValueError, "give one of 'file_root', 'file_list' or 'files'"),
    (dict(file_root="/nonexistent/dir"), FileNotFoundError, "is not a directory"),
    (dict(files=["a", "b"], shard_id=2, num_shards=2), ValueError, "shard_id must be in"),
    (dict(files=["a", "b"], num_shards=3), ValueError, r"num_shards \(3\) is larger than the number of samples \(2\)"),
    (dict(files=["a"], random_shuffle=True, shuffle_after_epoch=True), ValueError, "mutually exclusive"),
    (dict(files=["a"], stick_to_shard=True, shuffle_after_epoch=True), ValueError, "implies stick_to_shard"),
])
def test_argument_errors(args, error, match):
    with pytest.raises(error, match=match):
        _pipe(**args).build()


def test_no_files_found(tmp_path):
    _tree(tmp_path, {"a": ["x.txt"]})
    with pytest.raises(RuntimeError, match="No files found"):
        _pipe(file_root=str(tmp_path)).build()


def test_negative_shard_id_rejected_when_defining():
    with pytest.raises(ValueError, match="'shard_id' must be >= 0"):
        _pipe(files=["a"], shard_id=-1)


def test_missing_file_error_names_the_path(tmp_path):
    pipe = _pipe(batch_size=1, files=[str(tmp_path / "gone.jpg")])
    with pytest.raises(FileNotFoundError) as info:
        pipe.run()
    assert "gone.jpg" in str(info.value) + "".join(getattr(info.value, "__notes__", []))


# Streams per spec dali_jax_plugin.md §2.1 (files 10, S=3: shards [0,1,2] [3,4,5] [6,7,8,9]).
@pytest.mark.parametrize("shard_id,stick,pad,bs,expected", [
    (0, False, False, 2, [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [0, 1]]),  # continues through the dataset
    (1, True, False, 2, [[3, 4], [5, 3], [4, 5], [3, 4]]),                    # cycles its own shard
    (0, False, True, 3, [[0, 1, 2], [2, 2, 2], [3, 4, 5], [5, 5, 5], [6, 7, 8], [9, 9, 9]]),  # pads, rotates
    (2, True, True, 3, [[6, 7, 8], [9, 9, 9], [6, 7, 8]]),
])
def test_shard_streams(index_files, shard_id, stick, pad, bs, expected):
    pipe = _pipe(batch_size=bs, files=index_files(10), num_shards=3, shard_id=shard_id, stick_to_shard=stick,
                 pad_last_batch=pad)
    assert [d for d, _ in _read(pipe, len(expected))] == expected


def test_random_shuffle_visits_each_shard_sample_once_per_epoch(index_files):
    files = index_files(10)
    pipe = _pipe(batch_size=3, files=files, num_shards=2, shard_id=1, random_shuffle=True, stick_to_shard=True)
    epochs = []
    stream = [x for d, _ in _read(pipe, 5) for x in d]  # 15 = 3 epochs of the 5-sample shard
    for e in range(3):
        epochs.append(stream[5 * e: 5 * e + 5])
    assert all(sorted(e) == sorted(epochs[0]) for e in epochs)
    assert len(set(epochs[0])) == 5
    assert epochs[0] != epochs[1] or epochs[1] != epochs[2]  # orders change between epochs
    other = _pipe(batch_size=5, files=files, num_shards=2, shard_id=0, random_shuffle=True, stick_to_shard=True)
    assert set(_read(other, 1)[0][0]).isdisjoint(epochs[0])  # fixed partition: shards never overlap


def test_shuffle_after_epoch_is_the_same_global_order_on_every_shard(index_files):
    files = index_files(12)
    shards = [_read(_pipe(batch_size=4, files=files, num_shards=3, shard_id=k, shuffle_after_epoch=True, seed=3), 2)
              for k in range(3)]
    for epoch in range(2):
        union = [x for k in range(3) for x in shards[k][epoch][0]]
        assert sorted(union) == list(range(12))
    assert [x for k in range(3) for x in shards[k][0][0]] != list(range(12))


def test_flowers_labels_follow_class_folders(flowers_root):
    pipe = _pipe(batch_size=40, file_root=flowers_root)
    labels = [_read(pipe, 1)[0][1] for _ in range(5)]
    assert labels == [[c] * 40 for c in range(5)]


def test_source_info_names_each_sample_as_dali_does(tmp_path):
    """DALI 2.4's values: 'class/file' under file_root; file_list and files entries as written."""
    _tree(tmp_path, {"cats": ["a.jpg", "b.jpg"]})
    (tmp_path / "list.txt").write_text(f"cats/b.jpg 4\n{tmp_path / 'cats' / 'a.jpg'} 5\n")
    cases = [
        (dict(file_root=str(tmp_path)), ["cats/a.jpg", "cats/b.jpg"]),
        (dict(file_list=str(tmp_path / "list.txt")), ["cats/b.jpg", str(tmp_path / "cats" / "a.jpg")]),
        (dict(file_root=str(tmp_path), files=["cats/b.jpg", str(tmp_path / "cats" / "a.jpg")]),
         ["cats/b.jpg", str(tmp_path / "cats" / "a.jpg")]),
    ]
    for args, expected in cases:
        data, label = _pipe(**args).run()
        assert [data[i].source_info() for i in range(2)] == expected, args
        assert [bytes(data[i].as_array()) for i in range(2)] == [os.path.basename(p).encode() for p in expected]
        assert [label[i].source_info() for i in range(2)] == ["", ""]  # labels have none, as in DALI


def _count_listings(monkeypatch) -> list:
    from jaxdali.ops.readers import storage

    listed = []
    real = storage.list_dir

    def counted(path, *args, **kwargs):
        listed.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(storage, "list_dir", counted)
    return listed


def test_pipelines_of_one_iterator_list_the_folder_once_and_others_list_afresh(tmp_path, monkeypatch):
    from jaxdali.plugin.jax import DALIGenericIterator

    _tree(tmp_path, {"a": ["1.jpg", "2.jpg"], "b": ["3.jpg", "4.jpg"]})
    listed = _count_listings(monkeypatch)

    def shard(k):
        @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=7)
        def p():
            data, label = fn.readers.file(file_root=str(tmp_path), shard_id=k, num_shards=2, name="Reader")
            return data, label

        return p()

    pipes = [shard(0), shard(1)]
    with DALIGenericIterator(pipes, ["data", "label"], reader_name="Reader") as it:
        assert len(listed) == 3  # the root and its two class folders, once for both pipelines
        batch = next(it)
        assert sorted(batch["label"].ravel().tolist()) == [0, 1]  # shard 0 holds "a", shard 1 "b"
    # A pipeline built on its own lists the folder as it is now.
    (tmp_path / "b" / "5.jpg").write_bytes(b"5")
    pipe = shard(0)
    pipe.build()
    assert len(listed) == 6
    assert pipe.reader_meta("Reader")["epoch_size"] == 5
    pipe.close()
