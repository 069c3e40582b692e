"""``pairwatch serve``: the fault-injecting JSON-RPC test server, as a documented command.

The same server the demo and the tests use (:mod:`pairwatch.chaos`); its own parser does the
work, so ``python -m pairwatch.chaos`` and this command never disagree.
"""

from __future__ import annotations

import argparse

from pairwatch.chaos import cli as chaos_cli

__all__ = ["register"]

PROG = "pairwatch serve"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "serve",
        help="run the fault-injecting JSON-RPC 2.0 test server (pairwatch serve --help)",
        add_help=False,
        prefix_chars="\0",  # every argument, --help included, goes to the server's own parser
    )
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    status: int = chaos_cli.main(args.rest or ["--help"], prog=PROG)
    return status
