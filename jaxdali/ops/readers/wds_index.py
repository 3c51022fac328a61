"""WebDataset tar shards: listing their samples from the tar headers or from DALI's index files.

A shard is a tar archive whose regular files are grouped into samples: consecutive files with the
same *key* (the path up to the first dot of the file's base name) form one sample, and the rest of
the base name is each file's *extension*. Files whose base name starts with a dot and entries that
are not regular files are skipped.

DALI's index (``wds2idx``) is a line ``v1.2 <number of samples>``, then one line per sample listing
its files as ``<ext> <data offset> <size> <name>`` groups (``v1.1`` lines have no names).
"""

from __future__ import annotations

import dataclasses
import tarfile

from jaxdali.ops.readers import storage

__all__ = ["Component", "ShardError", "split_name", "scan_tar", "group_samples", "parse_index", "format_index",
           "INDEX_VERSION"]

INDEX_VERSION = "v1.2"


class ShardError(ValueError):
    """A malformed or stale WebDataset index, or a damaged tar; the message names the file."""


@dataclasses.dataclass(frozen=True)
class Component:
    """One file of a sample: its extension, where its bytes are in the tar, and its name there."""

    ext: str
    offset: int
    size: int
    name: str


def split_name(name: str) -> tuple[str, str]:
    """``(key, extension)`` of a tar member name: split at the first dot of the base name."""
    base = name.rfind("/") + 1
    dot = name.find(".", base)
    return (name, "") if dot < 0 else (name[:dot], name[dot + 1:])


def scan_tar(path: str) -> list[tuple[str, int, int]]:
    """``(name, data offset, size)`` of each regular file in the tar archive ``path``, in archive order.

    Raises ``ShardError`` naming the archive and the member for a damaged header or a member whose
    data runs past the end of the file.
    """
    size = storage.file_size(path)
    entries = []
    with storage.open_file(path) as f:
        try:
            with tarfile.open(fileobj=f, mode="r:") as archive:
                for member in archive:
                    if member.offset_data + member.size > size:
                        raise ShardError(f"{path!r}: tar member {member.name!r} (data at byte {member.offset_data}, "
                                          f"{member.size} bytes) runs past the end of the {size}-byte file: the "
                                          f"archive is truncated")
                    if member.isreg():
                        entries.append((member.name, member.offset_data, member.size))
        except tarfile.TarError as e:
            where = f"after member {entries[-1][0]!r}" if entries else "at its start"
            raise ShardError(f"{path!r}: not a readable tar archive {where}: {e}") from None
    return entries


def group_samples(entries: list[tuple[str, int, int]]) -> list[list[Component]]:
    """Consecutive entries with the same key as samples; hidden files (base name ``.*``) are dropped."""
    samples: list[list[Component]] = []
    last_key = None
    for name, offset, size in entries:
        key, ext = split_name(name)
        if not key or key.endswith("/"):
            continue
        if key != last_key:
            samples.append([])
            last_key = key
        samples[-1].append(Component(ext, offset, size, name))
    return samples


def parse_index(text: str, where: str, tar_size: int) -> list[list[Component]]:
    """The samples of a DALI WebDataset index (``v1.1`` or ``v1.2``), checked against the tar's size."""
    lines = text.splitlines()
    head = lines[0].split() if lines else []
    if len(head) != 2 or head[0] not in ("v1.1", "v1.2") or not head[1].isdigit():
        raise ShardError(f"{where}: not a WebDataset index: the first line must be 'v1.2 <number of samples>' "
                          f"(or v1.1), got {lines[0] if lines else ''!r}")
    width = 4 if head[0] == "v1.2" else 3
    body = [line for line in lines[1:] if line.strip()]
    if len(body) != int(head[1]):
        raise ShardError(f"{where}: the header announces {head[1]} samples but {len(body)} sample lines follow")
    samples = []
    for lineno, line in enumerate(body, 2):
        tokens = line.split()
        if not tokens or len(tokens) % width:
            raise ShardError(f"{where}: line {lineno} is not a list of '<ext> <offset> <size>"
                              f"{' <name>' if width == 4 else ''}' groups: {line!r}")
        sample = []
        for g in range(0, len(tokens), width):
            ext, offset, size = tokens[g], tokens[g + 1], tokens[g + 2]
            if not (offset.isdigit() and size.isdigit()):
                raise ShardError(f"{where}: line {lineno}: offset and size must be integers, got {offset!r} {size!r}")
            offset, size = int(offset), int(size)
            if offset + size > tar_size:
                raise ShardError(f"{where}: line {lineno}: component {ext!r} at offset {offset} ({size} bytes) lies "
                                  f"beyond the end of the {tar_size}-byte archive: the index is stale or belongs to "
                                  f"another archive; rebuild it with `python -m jaxdali.tools.wds2idx`")
            sample.append(Component(ext, offset, size, tokens[g + 3] if width == 4 else ""))
        samples.append(sample)
    return samples


def format_index(samples: list[list[Component]], where: str) -> str:
    """DALI's ``v1.2`` index text of ``samples``."""
    lines = [f"{INDEX_VERSION} {len(samples)}\n"]
    for sample in samples:
        for c in sample:
            if any(ch.isspace() for ch in c.name) or not c.ext or any(ch.isspace() for ch in c.ext):
                raise ShardError(f"{where}: member {c.name!r} cannot be written to an index (its name has white "
                                  f"space or no extension)")
        lines.append(" ".join(f"{c.ext} {c.offset} {c.size} {c.name}" for c in sample) + "\n")
    return "".join(lines)
