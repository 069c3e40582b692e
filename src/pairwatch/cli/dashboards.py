"""``pairwatch dashboards export DIR``: write the Grafana dashboard, Prometheus rules and runbook.

A pip user has no checkout, so the monitoring files ship inside the wheel (``hatch_build.py``
puts the repository's ``dashboards/`` at ``pairwatch/_dashboards``) and this command writes
them out, like a monitoring mixin's build output: a directory to copy into Grafana
provisioning and Prometheus ``rule_files``.  In a checkout (an editable install) the files
come straight from ``dashboards/``, so what is exported is always what the tests check.

The Prometheus rules are not copied but rendered for the operator's configuration, like a
mixin's ``_config``: the series selector, the grouping labels, the availability objective,
the scrape-down alert on or off, and the links. ``pairwatch.alerting`` (standard library
only, part of the package) renders them, so a pip-installed pairwatch needs no checkout and
no extra to export. An alert whose link goes nowhere wakes someone up for nothing, so the
export refuses to write rules without ``--runbook-url`` unless told ``--no-runbook-links``.
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

from pairwatch.alerting import render, slo_tests, threshold_tests
from pairwatch.alerting.rules import DEFAULT_OBJECTIVE, Config, group_by_labels
from pairwatch.cli.args import fail, number

PROG = "pairwatch dashboards"
PACKAGED = "_dashboards"
TOOLING_SUFFIXES = (".py", ".pyc")  # generators and renderers: they need the dev extras
TEXT_SUFFIXES = (".json", ".yaml", ".yml", ".md")
# Any absolute address of the runbook: the part before the ``#anchor`` is replaced.
RUNBOOK = re.compile(r"https?://[^\s\"'#)<>]*runbook\.md|(?<=\")dashboards/runbook\.md")
# A pinned runbook_url in a hand-written promtool test's expected annotations.
PINNED_RUNBOOK = re.compile(r"^(\s+)runbook_url: .*$", re.M)
RULE_TESTS = ("rules", "tests")
# Hand-written rule tests that pin annotations: they hold for the default grouping labels and
# objective only (the generated tests follow any configuration).
PINNED_TESTS = ("rules", "tests", "pairwatch-alerts.test.yaml")


def generated(cfg: Config) -> dict[tuple[str, ...], str]:
    """The files rendered for ``cfg`` instead of copied (relative parts -> text)."""
    return {
        ("rules", "pairwatch-alerts.yaml"): render.render(cfg),
        ("rules", "pairwatch-slo.yaml"): render.render_slo(cfg),
        ("alertmanager", "pairwatch-inhibit.yaml"): render.render_inhibit(cfg),
        ("rules", "tests", "pairwatch-thresholds.test.yaml"): threshold_tests.render(),
        ("rules", "tests", "pairwatch-slo.test.yaml"): slo_tests.render(cfg),
        ("rules", "tests", "pairwatch-liveness.test.yaml"): slo_tests.render_liveness(cfg),
    }


OPERATORS = "operators.md"
"""The export's README: what each file is and how to load it (the repository's own
``dashboards/README.md`` is for people changing the files, and is not exported)."""


def operators_readme(template: str, cfg: Config) -> str:
    """The operators' README with the configuration this export was rendered for."""
    from pairwatch import __version__

    values = {
        "@VERSION@": __version__,
        "@OBJECTIVE@": f"{cfg.objective * 100:g}",
        "@SELECTOR@": f"`{{{cfg.selector}}}`" if cfg.selector else "none (every series)",
        "@GROUP_BY@": ", ".join(f"`{label}`" for label in cfg.group_by),
        "@RUNBOOK@": f"`{cfg.runbook_url}`" if cfg.runbook_url else "none",
        "@SCRAPE@": "on (`PairwatchScrapeDown`)" if cfg.scrape_alert else "off",
    }
    for key, value in values.items():
        template = template.replace(key, value)
    return template


def pinned_tests_hold(cfg: Config) -> bool:
    """Whether the hand-written scenario tests' pinned descriptions hold for ``cfg``."""
    default = Config()
    return cfg.group_by == default.group_by and cfg.objective == default.objective


def _pinned_links(text: str, cfg: Config) -> str:
    """A hand-written rule test's expected annotations, with the links ``cfg`` renders."""

    def one(match: re.Match[str]) -> str:
        indent = match.group(1)
        lines = [] if cfg.runbook_url is None else [match.group(0)]
        if cfg.dashboard_url is not None:
            lines.append(f'{indent}dashboard_url: "{cfg.dashboard_url}"')
        return "\n".join(lines)

    text = PINNED_RUNBOOK.sub(one, text)
    return text.replace("\n\n            exp_annotations", "\n            exp_annotations")


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


def export(
    target: Path,
    *,
    runbook_url: str | None = None,
    force: bool = False,
    config: Config | None = None,
) -> list[Path]:
    """Write every shipped file under ``target``, the rules rendered for ``config``; return
    the paths written.

    Refuses to overwrite an existing file unless ``force``: the user may have edited it.
    With a series selector the promtool tests are left out: their synthetic series carry
    ``job="app"`` and the like, which the selector may not match.
    """
    cfg = config or Config(runbook_url=runbook_url)
    folder = source()
    if folder is None:
        raise FileNotFoundError("no dashboards in this installation (reinstall pairwatch)")
    rendered = generated(cfg)
    operators = folder.joinpath(OPERATORS)
    if operators.is_file():  # the export's README is the operators', not the contributors'
        rendered[("README.md",)] = operators_readme(operators.read_text("utf-8"), cfg)
    files: list[tuple[tuple[str, ...], Traversable | str]] = [
        (parts, rendered.get(parts, entry))
        for parts, entry in walk(folder)
        if parts != (OPERATORS,)
    ]
    files += [(parts, text) for parts, text in rendered.items() if parts not in dict(files)]
    if cfg.selector:
        files = [(parts, data) for parts, data in files if parts[:2] != RULE_TESTS]
    if not pinned_tests_hold(cfg):
        files = [(parts, data) for parts, data in files if parts != PINNED_TESTS]
    files.sort(key=lambda item: item[0])
    if not force:
        clash = [target.joinpath(*parts) for parts, _ in files if target.joinpath(*parts).exists()]
        if clash:
            raise FileExistsError(f"{clash[0]} exists (use --force to overwrite)")
    written = []
    for parts, entry in files:
        path = target.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(entry, str):
            data = entry.encode("utf-8")
        else:
            data = entry.read_bytes()
            if path.suffix in TEXT_SUFFIXES:
                text = data.decode("utf-8")
                if cfg.runbook_url:
                    text = RUNBOOK.sub(cfg.runbook_url, text)
                if parts[:2] == RULE_TESTS:
                    text = _pinned_links(text, cfg)
                data = text.encode("utf-8")
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
    links = e.add_mutually_exclusive_group()
    links.add_argument(
        "--runbook-url",
        metavar="URL",
        help="where your team publishes runbook.md: every alert's runbook_url and the "
        "dashboard's links point there (anchors are kept); required, or --no-runbook-links",
    )
    links.add_argument(
        "--no-runbook-links",
        action="store_true",
        help="write the rules without runbook_url annotations",
    )
    e.add_argument(
        "--dashboard-url",
        metavar="URL",
        help="your Grafana dashboard's address, written as every alert's dashboard_url",
    )
    e.add_argument(
        "--objective",
        metavar="PERCENT",
        type=number(float, low=OBJECTIVE_RANGE[0], high=OBJECTIVE_RANGE[1]),
        default=DEFAULT_OBJECTIVE * 100,
        help="percent of requests that must be answered, the availability SLO the burn-rate "
        f"alerts guard, {OBJECTIVE_RANGE[0]:g} to {OBJECTIVE_RANGE[1]:g} "
        f"(default {DEFAULT_OBJECTIVE * 100:g})",
    )
    e.add_argument(
        "--selector",
        metavar="MATCHERS",
        default="",
        help="PromQL label matchers every rule adds to its series, e.g. 'job=~\"api.*\"' "
        "(the promtool tests are then not written: their series may not match)",
    )
    e.add_argument(
        "--group-by",
        metavar="LABELS",
        default="",
        help="comma-separated labels one page is per, besides job, server and side, "
        "e.g. cluster,namespace",
    )
    e.add_argument(
        "--no-scrape-alert",
        action="store_true",
        help="leave out PairwatchScrapeDown (up == 0) where another mixin alerts on it",
    )
    e.add_argument("--force", action="store_true", help="overwrite files that already exist")
    e.set_defaults(handler=run)


# Below 95% a 14.4x burn is more than every request; past 99.99% the shipped tests' traffic is
# too small to show a burn (and a budget that small is rarely what a team means).
OBJECTIVE_RANGE = (95.0, 99.99)
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*$")


def config(args: argparse.Namespace) -> Config | str:
    """The rule configuration the flags ask for, or a one-line complaint."""
    for flag, url in (("--runbook-url", args.runbook_url), ("--dashboard-url", args.dashboard_url)):
        if url is not None and not re.match(r"https?://\S+$", url):
            return f"{flag} {url!r} is not an http(s) URL"
    if args.runbook_url is None and not args.no_runbook_links:
        return (
            "--runbook-url URL is required (where on-call people open runbook.md; every "
            "alert links to it), or --no-runbook-links"
        )
    labels = [label.strip() for label in args.group_by.split(",") if label.strip()]
    bad = [label for label in labels if not LABEL.match(label)]
    if bad:
        return f"--group-by {bad[0]!r} is not a Prometheus label name"
    return Config(
        selector=args.selector.strip().strip("{}").strip(),
        group_by=group_by_labels(labels),
        objective=round(args.objective / 100, 10),
        runbook_url=args.runbook_url,
        dashboard_url=args.dashboard_url,
        scrape_alert=not args.no_scrape_alert,
    )


def run(args: argparse.Namespace) -> int:
    cfg = config(args)
    if isinstance(cfg, str):
        return fail(PROG, cfg)
    try:
        written = export(args.dir, force=args.force, config=cfg)
    except FileExistsError as e:
        return fail(PROG, str(e))
    except (FileNotFoundError, OSError) as e:
        return fail(PROG, f"cannot export to {args.dir}: {e}")
    for path in written:
        print(path)
    if cfg.selector:
        print(
            f"{PROG}: note: rules/tests/ not written: its series may not match --selector",
            file=sys.stderr,
        )
    elif not pinned_tests_hold(cfg):
        print(
            f"{PROG}: note: {'/'.join(PINNED_TESTS)} not written: it pins the descriptions "
            "of the default --group-by and --objective",
            file=sys.stderr,
        )
    return 0
