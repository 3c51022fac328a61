"""Writes DALI's index of a WebDataset tar shard (format ``v1.2``), for ``fn.readers.webdataset(index_paths=...)``.

Usage::

    python -m jaxdali.tools.wds2idx <archive.tar> [<index file>]

Without an index file name, the index goes next to the archive, named after it up to its first dot
with ``.idx`` (``shard-000.tar`` -> ``shard-000.idx``), as DALI's ``wds2idx`` does.
"""

from __future__ import annotations

import argparse
import os
import sys

from jaxdali.ops.readers import wds_index


def build_index(path: str) -> str:
    """The index text of the tar archive ``path``."""
    samples = wds_index.group_samples(wds_index.scan_tar(path))
    if not samples:
        raise wds_index.ShardError(f"{path!r}: the archive holds no sample (no regular, non-hidden file)")
    return wds_index.format_index(samples, repr(path))


def default_index_path(archive: str) -> str:
    """``archive`` up to the first dot of its base name, plus ``.idx``."""
    base = archive.rfind(os.sep) + 1
    dot = archive.find(".", base + 1)
    return (archive if dot < 0 else archive[:dot]) + ".idx"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jaxdali.tools.wds2idx",
                                     description="Writes the index of a WebDataset tar shard "
                                                 "for fn.readers.webdataset.")
    parser.add_argument("archive", help="the tar archive")
    parser.add_argument("index", nargs="?", help="the index file to write (default: <archive name>.idx)")
    args = parser.parse_args(argv)
    try:
        text = build_index(args.archive)
    except (OSError, wds_index.ShardError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    with open(args.index or default_index_path(args.archive), "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
