"""``pairwatch demo``: placeholder until the chaos server and HTTP integrations land."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser("demo", help="run the live demo")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    print("the demo arrives with the HTTP integrations")
    return 0
