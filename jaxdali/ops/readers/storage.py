"""Where readers get their bytes: one small interface over local paths (and, later, remote URLs).

Every reader reads files through these functions only, so a new storage backend (fsspec URLs such
as ``s3://`` or ``gs://``) is added here once and reaches every reader.
"""

from __future__ import annotations

import os
from typing import BinaryIO

__all__ = ["file_size", "isdir", "isfile", "join", "list_dir", "open_file", "read_file", "read_range"]


def read_file(path: str) -> bytes:
    """The whole content of the file at ``path``."""
    with open(path, "rb") as f:
        return f.read()


def read_range(path: str, offset: int, length: int) -> bytes:
    """``length`` bytes of ``path`` from byte ``offset`` (fewer at the end of the file)."""
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


def open_file(path: str) -> BinaryIO:
    """``path`` opened for binary reading (a seekable file object); the caller closes it."""
    return open(path, "rb")


def file_size(path: str) -> int:
    """The size of ``path`` in bytes."""
    return os.path.getsize(path)


def isdir(path: str) -> bool:
    """Whether ``path`` is a directory."""
    return os.path.isdir(path)


def isfile(path: str) -> bool:
    """Whether ``path`` is a regular file."""
    return os.path.isfile(path)


def join(base: str, *names: str) -> str:
    """``names`` joined under ``base``."""
    return os.path.join(base, *names)


def list_dir(path: str) -> list[tuple[str, bool]]:
    """The entries of directory ``path`` as (name, is_directory) pairs, sorted by name."""
    with os.scandir(path) as it:
        return sorted((e.name, e.is_dir()) for e in it)
