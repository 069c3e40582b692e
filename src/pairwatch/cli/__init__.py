"""The ``pairwatch`` command: one sub-command per module of this package.

Each module listed in :data:`COMMANDS` exposes ``register(subparsers)``, which adds its parser
and sets ``handler`` to a function taking the parsed namespace and returning an exit status.
The CLI uses pairwatch's public API only, like any other user of the library.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

COMMANDS: tuple[str, ...] = ("demo", "audit")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pairwatch", description="Make JSON-RPC 2.0 response pairing visible."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"pairwatch.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    status: int = args.handler(args)
    return status
