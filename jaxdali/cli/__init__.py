"""The ``jaxdali`` command: ``bench``, ``preview``, ``inspect`` and ``info`` on an image folder.

Run ``jaxdali --help`` (or ``python -m jaxdali --help``); each subcommand lives in its own module
with ``add_parser(subparsers)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from jaxdali.cli import bench, info, inspect_folder, preview
from jaxdali.cli.common import UsageError

__all__ = ["main"]

_COMMANDS = (bench, preview, inspect_folder, info)


def main(argv: Sequence[str] | None = None) -> int:
    """Parses ``argv`` (default ``sys.argv[1:]``), runs the subcommand and returns its exit status."""
    parser = argparse.ArgumentParser(prog="jaxdali", description="jaxdali's command-line tools.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in _COMMANDS:
        command.add_parser(subparsers)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except UsageError as e:
        print(f"jaxdali {args.command}: error: {e}", file=sys.stderr)
        return 2
