"""Where readers get their bytes: one small interface over local paths and remote URLs.

Every reader reads files through these functions only, so a storage backend is added here once
and reaches every reader. A plain path takes the fast local route (``open``, ``os.pread``,
``os.scandir``). A URL with a scheme (``s3://bucket/key``, ``gs://...``, ``memory://...``,
``file:///...``) goes through `fsspec <https://filesystem-spec.readthedocs.io>`_, installed with
the ``remote`` extra (``pip install "jaxdali[remote]"``: fsspec and s3fs; add gcsfs, adlfs, ... for
other stores). Credentials and endpoints are fsspec's own configuration, e.g. the usual AWS
environment variables or ``FSSPEC_S3_ENDPOINT_URL=http://localhost:9000`` for an S3-compatible
server.

Remote stores answer each request after a round trip, so readers should not issue them one by one
in their decode path: ``jaxdali.ops.readers.read_ahead`` (used through ``Reader.fetch_all``) reads
upcoming batches concurrently, and ``read_ranges`` fetches many ranges of one file at once.
"""

from __future__ import annotations

import functools
import mmap
import os
import re
from typing import Any, BinaryIO, Sequence

import numpy as np

from jaxdali.ops.schema import OpArgumentError

__all__ = ["dirname", "file_size", "is_remote", "isdir", "isfile", "join", "list_dir", "map_file", "open_file",
           "read_file", "read_range", "read_ranges", "request_granularity"]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")

#: Bytes one request may read past what is needed at no real extra cost: locally the kernel reads
#: whole pages anyway; a remote request costs a round trip, worth far more than a few hundred KiB.
LOCAL_GRANULARITY = 4096
REMOTE_GRANULARITY = 256 * 1024


def is_remote(path: str) -> bool:
    """Whether ``path`` is a URL served through fsspec (rather than a local path)."""
    return _URL.match(path) is not None


def require_local(op: str, path: str, why: str) -> None:
    """Refuses a URL in argument ``path`` of a reader whose library opens local files only (``why``)."""
    if is_remote(path):
        raise OpArgumentError(f"fn.{op}: argument 'path': {path!r} is a URL, but {why}; copy the data to a local "
                              "folder first")


def request_granularity(path: str) -> int:
    """Bytes worth reading past what a request needs rather than issuing another request."""
    return REMOTE_GRANULARITY if is_remote(path) else LOCAL_GRANULARITY


@functools.lru_cache(maxsize=None)
def _fsspec():
    try:
        import fsspec
    except ImportError:
        return None
    return fsspec


def _fs(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path inside it) of ``url``."""
    fsspec = _fsspec()
    if fsspec is None:
        raise ImportError(f"reading {url!r} needs fsspec, which is not installed: pip install 'jaxdali[remote]' "
                          "(fsspec + s3fs; gcsfs etc. for other stores)")
    return fsspec.core.url_to_fs(url)


def read_file(path: str, size_hint: int | None = None) -> bytes:
    """The whole content of the file at ``path``.

    ``size_hint``: the size the caller expects (e.g. that of the previous file of a data set of
    equal-sized files); when right, a local read needs no ``fstat``. Any value gives the same bytes.
    """
    if not is_remote(path):
        # os-level calls: about half the cost of open().read() for the small files readers read by the thousand
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size if size_hint is None else size_hint
            data = os.read(fd, size + 1)  # one byte more: a short read proves the end of the file
            if len(data) > size:  # a wrong hint, a huge file or one that grew: read the rest
                parts = [data]
                while chunk := os.read(fd, 1 << 24):
                    parts.append(chunk)
                data = b"".join(parts)
            return data
        finally:
            os.close(fd)
    fs, p = _fs(path)
    return fs.cat_file(p)


def read_range(path: str, offset: int, length: int) -> bytes:
    """``length`` bytes of ``path`` from byte ``offset`` (fewer at the end of the file)."""
    if not is_remote(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            return os.pread(fd, length, offset)
        finally:
            os.close(fd)
    fs, p = _fs(path)
    return fs.cat_file(p, start=offset, end=offset + length)


def read_ranges(path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
    """The bytes of each ``(offset, length)`` range of ``path`` (fewer at the end of the file).

    Locally the file is opened once; remote ranges are requested concurrently where the store's
    fsspec implementation is asynchronous (s3fs, gcsfs, http).
    """
    if not ranges:
        return []
    if not is_remote(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            return [os.pread(fd, length, offset) for offset, length in ranges]
        finally:
            os.close(fd)
    fs, p = _fs(path)
    return fs.cat_ranges([p] * len(ranges), [o for o, _ in ranges], [o + n for o, n in ranges], on_error="raise")


def map_file(path: str) -> np.ndarray:
    """The whole local file at ``path`` memory-mapped, as a read-only 1-D uint8 array (slices of it are
    zero-copy views that keep the mapping alive). The file must not shrink while mapped."""
    if is_remote(path):
        raise ValueError(f"map_file: {path!r} is a URL; only local files can be memory-mapped")
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return np.zeros(0, np.uint8)
        return np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), np.uint8)


def open_file(path: str) -> BinaryIO:
    """``path`` opened for binary reading (a seekable file object); the caller closes it."""
    if not is_remote(path):
        return open(path, "rb")
    fs, p = _fs(path)
    return fs.open(p, "rb")


def file_size(path: str) -> int:
    """The size of ``path`` in bytes."""
    if not is_remote(path):
        return os.path.getsize(path)
    fs, p = _fs(path)
    return int(fs.size(p))


def isdir(path: str) -> bool:
    """Whether ``path`` is a directory (a prefix with entries, on object stores)."""
    if not is_remote(path):
        return os.path.isdir(path)
    fs, p = _fs(path)
    return bool(fs.isdir(p))


def isfile(path: str) -> bool:
    """Whether ``path`` is a regular file."""
    if not is_remote(path):
        return os.path.isfile(path)
    fs, p = _fs(path)
    return bool(fs.isfile(p))


def join(base: str, *names: str) -> str:
    """``names`` joined under ``base``; a name that is itself absolute (a URL or, locally, an absolute
    path) replaces what comes before it, as with ``os.path.join``."""
    out = base
    for name in names:
        if is_remote(name) or (not is_remote(out) and os.path.isabs(name)):
            out = name
        elif is_remote(out):
            out = out.rstrip("/") + "/" + name if name else out.rstrip("/") + "/"
        else:
            out = os.path.join(out, name)
    return out


def dirname(path: str) -> str:
    """The folder holding ``path`` (absolute for a local path)."""
    if not is_remote(path):
        return os.path.dirname(os.path.abspath(path))
    scheme, rest = path.split("://", 1)
    return scheme + "://" + rest.rstrip("/").rpartition("/")[0]


def list_dir(path: str) -> list[tuple[str, bool]]:
    """The entries of directory ``path`` as (name, is_directory) pairs, sorted by name."""
    if not is_remote(path):
        with os.scandir(path) as it:
            return sorted((e.name, e.is_dir()) for e in it)
    fs, p = _fs(path)
    base = p.rstrip("/")
    entries = []
    for info in fs.ls(p, detail=True):
        name = info["name"].rstrip("/").rpartition("/")[2]
        if info["name"].rstrip("/") == base or not name:
            continue  # some stores list the folder itself
        entries.append((name, info["type"] == "directory"))
    return sorted(entries)
