"""``pairwatch dashboards export DIR``: write the Grafana dashboard, Prometheus rules and runbook.

A pip user has no checkout, so the monitoring files ship inside the wheel (``hatch_build.py``
puts the repository's ``dashboards/`` at ``pairwatch/_dashboards``) and this command writes
them out, like a monitoring mixin's build output: a directory to copy into Grafana
provisioning and Prometheus ``rule_files``.  In a checkout (an editable install) the files
come straight from ``dashboards/``, so what is exported is always what the tests check.

``--runbook-url`` points the alerts' ``runbook_url`` annotations and the dashboard's links at
wherever the team publishes the runbook, since the shipped links cannot know that address.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:
    from importlib.abc import Traversable

from pairwatch.cli.args import fail

PROG = "pairwatch dashboards"
PACKAGED = "_dashboards"
TOOLING_SUFFIXES = (".py", ".pyc")  # generators and renderers: they need the dev extras
TEXT_SUFFIXES = (".json", ".yaml", ".yml", ".md")
# Any absolute address of the runbook: the part before the ``#anchor`` is replaced.
RUNBOOK = re.compile(r"https?://[^\s\"'#)<>]*runbook\.md|(?<=\")dashboards/runbook\.md")


def source() -> Traversable | None:
    """Where the shipped files are: the installed package data, else the checkout."""
    packaged = resources.files("pairwatch").joinpath(PACKAGED)
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[3] / "dashboards"
    if (checkout / "pairwatch.json").is_file():
        return checkout
    return None


def walk(
    folder: Traversable, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Traversable]]:
    """Every file to export, as (relative parts, file), sorted for a stable listing."""
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name == "__pycache__" or entry.name.startswith("."):
            continue
        if entry.is_dir():
            yield from walk(entry, (*prefix, entry.name))
        elif not entry.name.endswith(TOOLING_SUFFIXES):
            yield (*prefix, entry.name), entry


def export(target: Path, *, runbook_url: str | None = None, force: bool = False) -> list[Path]:
    """Write every shipped file under ``target``; return the paths written.

    Refuses to overwrite an existing file unless ``force``: the user may have edited it.
    """
    folder = source()
    if folder is None:
        raise FileNotFoundError("no dashboards in this installation (reinstall pairwatch)")
    files = list(walk(folder))
    if not force:
        clash = [target.joinpath(*parts) for parts, _ in files if target.joinpath(*parts).exists()]
        if clash:
            raise FileExistsError(f"{clash[0]} exists (use --force to overwrite)")
    written = []
    for parts, entry in files:
        path = target.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = entry.read_bytes()
        if runbook_url and path.suffix in TEXT_SUFFIXES:
            data = RUNBOOK.sub(runbook_url, data.decode("utf-8")).encode("utf-8")
        path.write_bytes(data)
        written.append(path)
    return written


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "dashboards",
        help="write the Grafana dashboard, Prometheus rules and runbook to a directory",
        description=(
            "The monitoring files shipped with pairwatch: the Grafana dashboard "
            "(pairwatch.json) and its provisioning, the Prometheus recording and alert rules "
            "(rules/, with their promtool tests), and the runbook the alerts link to."
        ),
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    e = actions.add_parser("export", help="write the files under DIR")
    e.add_argument("dir", metavar="DIR", type=Path, help="target directory (created if absent)")
    e.add_argument(
        "--runbook-url",
        metavar="URL",
        help="where your team publishes runbook.md; replaces the address in the alerts' "
        "runbook_url annotations and the dashboard's links (anchors are kept)",
    )
    e.add_argument("--force", action="store_true", help="overwrite files that already exist")
    e.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.runbook_url and not re.match(r"https?://\S+$", args.runbook_url):
        return fail(PROG, f"--runbook-url {args.runbook_url!r} is not an http(s) URL")
    try:
        written = export(args.dir, runbook_url=args.runbook_url, force=args.force)
    except FileExistsError as e:
        return fail(PROG, str(e))
    except (FileNotFoundError, OSError) as e:
        return fail(PROG, f"cannot export to {args.dir}: {e}")
    for path in written:
        print(path)
    return 0
