"""readers/storage.py on local paths and URLs: reads whatever the size hint, ranges past the end, joining."""

from __future__ import annotations

import pytest

from jaxdali.ops.readers import storage


@pytest.mark.parametrize("hint", [None, 0, 1, 7999, 8000, 8001, 1 << 20])
def test_read_file_gives_the_whole_file_whatever_the_size_hint(tmp_path, hint):
    path = tmp_path / "a.bin"
    path.write_bytes(bytes(range(256)) * 31 + b"end")
    assert storage.read_file(str(path), hint) == path.read_bytes()
    (tmp_path / "empty").write_bytes(b"")
    assert storage.read_file(str(tmp_path / "empty"), hint) == b""


def test_ranges_past_the_end_are_short(tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(b"0123456789")
    assert storage.read_range(str(path), 8, 5) == b"89"
    assert storage.read_ranges(str(path), [(0, 2), (5, 3), (9, 4), (20, 1)]) == [b"01", b"567", b"9", b""]
    assert storage.read_ranges(str(path), []) == []


def test_paths_and_urls_join_like_os_path_join(tmp_path):
    assert storage.is_remote("s3://bucket/key") and storage.is_remote("file:///tmp/x")
    assert not storage.is_remote("/tmp/x") and not storage.is_remote("relative/s3:/x")
    assert storage.join("s3://bucket/root/", "a", "b.npy") == "s3://bucket/root/a/b.npy"
    assert storage.join("s3://bucket/root", "gs://other/x") == "gs://other/x"
    assert storage.join("/data", "/abs/x") == "/abs/x" and storage.join("/data", "x") == "/data/x"
    assert storage.dirname("s3://bucket/root/list.txt") == "s3://bucket/root"
    (tmp_path / "d").mkdir()
    (tmp_path / "b.txt").write_text("x")
    assert storage.list_dir(str(tmp_path)) == [("b.txt", False), ("d", True)]
    assert storage.request_granularity("s3://b/k") > storage.request_granularity(str(tmp_path))
