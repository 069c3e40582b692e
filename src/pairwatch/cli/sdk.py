"""``pairwatch sdk``: which shortcuts through the OpenTelemetry SDK are on here, and why.

pairwatch takes a few shortcuts past the public OpenTelemetry API (:mod:`pairwatch.otel.sdk`),
each checked against the public API the first time it is wanted.  This runs those checks
now and prints one line per shortcut.  With ``--check`` the status says whether one is off
on an SDK version the shortcuts are tested on (1), or only warns on another version (0):
the SDK range job runs it on both ends of the range ``pyproject.toml`` allows.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pairwatch.otel import sdk


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "sdk",
        help="show which OpenTelemetry SDK shortcuts are on, and why",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when a shortcut's own check turned it off on a tested SDK version",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    version = sdk.sdk_version()
    tested = version in sdk.TESTED
    print(
        f"opentelemetry-sdk {version} "
        f"({'tested' if tested else 'not among the tested ' + ', '.join(sdk.TESTED)})"
    )
    off = []
    for name, (_, why) in sdk.status().items():
        print(f"  {name:14} {why}  ({sdk.SHORTCUTS[name]})")
        if sdk.fell_back(name):
            off.append(name)
    if not args.check or not off:
        return 0
    if tested:
        print(f"error: {', '.join(off)} fell back on a tested SDK version", file=sys.stderr)
        return 1
    print(f"warning: {', '.join(off)} fell back on an untested SDK version", file=sys.stderr)
    return 0
