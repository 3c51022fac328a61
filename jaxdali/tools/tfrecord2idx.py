"""Writes DALI's index of a TFRecord file: one ``"<offset> <size>"`` line per record.

Usage::

    python -m jaxdali.tools.tfrecord2idx <tfrecord file> <index file> [--check-crc]

The file is read through ``jaxdali.ops.readers.storage``; a truncated last record is an error
(naming the record), not a shorter index.
"""

from __future__ import annotations

import argparse
import sys

from jaxdali.ops.readers import storage
from jaxdali.ops.readers import tfrecord_format as fmt


def build_index(path: str, check_crc: bool = False) -> str:
    """The index text of the TFRecord file ``path``."""
    blob = memoryview(storage.read_file(path))
    rows = fmt.scan_records(blob, f"tfrecord2idx: {path!r}")
    if check_crc:
        for i, (offset, size) in enumerate(rows.tolist()):
            fmt.check_frame(blob[offset:offset + size], f"tfrecord2idx: record {i} of {path!r} (offset {offset})", True)
    return fmt.format_index(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jaxdali.tools.tfrecord2idx",
                                     description="Writes the index of a TFRecord file for fn.readers.tfrecord.")
    parser.add_argument("tfrecord", help="the TFRecord file")
    parser.add_argument("index", help="the index file to write")
    parser.add_argument("--check-crc", action="store_true", help="verify every record's CRC-32C checksums")
    args = parser.parse_args(argv)
    try:
        text = build_index(args.tfrecord, args.check_crc)
    except (OSError, fmt.RecordError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    with open(args.index, "w", encoding="ascii") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
