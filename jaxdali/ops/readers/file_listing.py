"""The files of a file-per-sample reader (``readers.numpy``, ``experimental.readers.fits``): DALI's three ways
to name them, ``file_root`` (+ ``file_filter``), ``file_list`` or ``files``."""

from __future__ import annotations

import dataclasses
import fnmatch
from typing import Any, Mapping

from jaxdali.ops.readers import storage
from jaxdali.ops.readers.shared_listing import frozen, listing
from jaxdali.ops.schema import Arg, OpArgumentError

__all__ = ["FileListing", "file_args", "list_files", "parse_file_list", "resolve_files"]


@dataclasses.dataclass(frozen=True)
class FileListing:
    """``names`` as DALI reports them (source info), ``paths`` where they are read from, ``where`` for messages."""

    names: list[str]
    paths: list[str]
    where: str


def file_args(file_filter: str, kind: str) -> tuple[Arg, ...]:
    """The four listing arguments, with the reader's default ``file_filter``; ``kind`` names its files."""
    return (
        Arg("file_root", "str", None, f"Folder whose {kind} files (and its sub-folders' files) are read, or the base "
            "of relative paths in 'file_list'/'files'; a local path or an fsspec URL."),
        Arg("file_filter", "str", file_filter, "Glob (case-sensitive) on the file names found under 'file_root'."),
        Arg("file_list", "str", None, "Text file naming one file per line, relative to its folder or 'file_root'."),
        Arg("files", "strs", None, "Explicit list of file paths (relative to 'file_root' if given)."),
    )


def list_files(root: str, file_filter: str) -> list[str]:
    """Files matching ``file_filter`` (a case-sensitive glob on the file name) directly in ``root``,
    named ``./name``, then in each sub-folder of ``root`` (sorted), named ``folder/name``.

    Only one level of sub-folders is read; files are sorted by name within each folder (as DALI).
    """
    entries = storage.list_dir(root)
    names = [f"./{n}" for n, is_dir in entries if not is_dir and fnmatch.fnmatchcase(n, file_filter)]
    for folder in (n for n, is_dir in entries if is_dir):
        names += [f"{folder}/{n}" for n, is_dir in storage.list_dir(storage.join(root, folder))
                  if not is_dir and fnmatch.fnmatchcase(n, file_filter)]
    return names


def parse_file_list(list_path: str) -> list[str]:
    """The file names in ``list_path``: one per line, taken whole (spaces included); empty lines skipped."""
    return [line for line in storage.read_file(list_path).decode("utf-8").splitlines() if line]


def resolve_files(op: str, args: Mapping[str, Any]) -> FileListing:
    """The files named by the reader ``fn.<op>``'s ``file_root``/``file_filter``/``file_list``/``files``
    arguments; an error naming the operator when they are contradictory, missing or name no file.
    Shared by the readers of the pipelines an iterator builds together (``shared_listing``)."""
    key = (op, args["file_root"], args["file_list"], frozen(args["files"]), args["file_filter"])
    return listing(key, lambda: _resolve_files(op, args))


def _resolve_files(op: str, args: Mapping[str, Any]) -> FileListing:
    root, file_list, files = args["file_root"], args["file_list"], args["files"]
    if file_list is not None and files is not None:
        raise OpArgumentError(f"fn.{op}: 'file_list' and 'files' are mutually exclusive")
    if file_list is not None:
        names = parse_file_list(file_list)
        paths = [storage.join(root if root is not None else storage.dirname(file_list), n) for n in names]
        where = f"file_list {file_list!r}"
    elif files is not None:
        names = list(files)
        paths = names if root is None else [storage.join(root, n) for n in names]
        where = "'files'"
    elif root is not None:
        if not storage.isdir(root):
            raise FileNotFoundError(f"fn.{op}: file_root {root!r} is not a directory")
        names = list_files(root, args["file_filter"])
        paths = [storage.join(root, n[2:] if n.startswith("./") else n) for n in names]
        where = f"{root!r} and its sub-folders matching {args['file_filter']!r}"
    else:
        raise OpArgumentError(f"fn.{op}: give one of 'file_root', 'file_list' or 'files'")
    if not names:
        raise RuntimeError(f"fn.{op}: No files found in {where}")
    return FileListing(names, paths, where)
