"""The ``pairwatch`` command: one sub-command per module of this package.

Each module listed in :data:`COMMANDS` exposes ``register(subparsers)``, which adds its parser
and sets ``handler`` to a function taking the parsed namespace and returning an exit status.
The CLI uses pairwatch's public API only, like any other user of the library.  Every parser
reports usage errors on one line with status 2 (:class:`pairwatch.cli.args.OneLineParser`).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from pairwatch._version import __version__
from pairwatch.cli.args import OneLineParser

COMMANDS: tuple[str, ...] = ("demo", "serve", "audit", "dashboards", "sdk")


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="pairwatch", description="Make JSON-RPC 2.0 response pairing visible."
    )
    parser.add_argument("--version", action="version", version=f"pairwatch {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"pairwatch.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    status: int = args.handler(args)
    return status
