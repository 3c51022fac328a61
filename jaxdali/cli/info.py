"""``jaxdali info``: version, JAX backend and devices, the active decoders and kernels."""

from __future__ import annotations

import argparse

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("info", help="version, JAX devices, active decoders and kernels", description=__doc__)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from jaxdali.config import runtime_info

    info = runtime_info()
    width = max(map(len, info))
    for key, value in info.items():
        print(f"{key:<{width}}  {value}")
    return 0
