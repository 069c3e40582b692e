"""pairwatch benchmarks: what instrumentation costs next to the bare client.

Usage (from the repository root, with the dev extras installed)::

    python benchmarks/run.py                 # everything, a few minutes; plain-text table
    python benchmarks/run.py --markdown      # the same, as Markdown tables
    python benchmarks/run.py --markdown --write docs/performance.md   # into the page's tables
    python benchmarks/run.py --short         # CI: a few seconds, exits 1 only on a gross
                                             # regression: a median above twice its target
                                             # (twice the known median where a documented
                                             # gap misses the target)
    python benchmarks/run.py --only ledger,memory
    python benchmarks/run.py --only instructions   # opt-in: valgrind instruction counts
    python benchmarks/run.py --only instructions --seeds 1,2,3,4   # paired, per hash seed

Ratios are instrumented / bare, paired per repeat (see ``_common.py``); min, median and max
are over repeats.  Servers run in their own processes.  Targets come from issues 7 and 16.
The fault-injecting servers' faults are diagnosed on the ``pairwatch`` logger by design; a
benchmark shows only its tables, so that logger is kept to errors here.
"""

from __future__ import annotations

import argparse
import logging
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Results, Row, chaos_server, fast_server, server_process
from _targets import render_targets

import pairwatch

SECTIONS = ("ledger", "floor", "stream", "http", "chaos", "web3", "mcp", "memory", "instructions")
OPT_IN = {"instructions"}  # minutes under valgrind: only when asked for by name


def _fmt(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}"
    if unit in ("B/id", "B/batch"):
        return f"{value:,.1f}"
    return f"{value:.3f}"


def _target(row: Row) -> str:
    if row.target is None:
        return ""
    if row.unit == "x":
        return f"≤ {row.target:.2f}"
    return f"≤ {row.target:g} {row.unit}"


def render(results: Results, markdown: bool) -> str:
    header = ["section", "case", "min", "median", "max", "target", "met", "notes"]
    lines: list[list[str]] = []
    for r in results.rows:
        if r.skipped:
            lines.append([r.section, r.case, "", "", "", "", "skipped", r.skipped])
            continue
        unit = "" if r.unit == "x" else f" {r.unit}"
        vals = [
            _fmt(min(r.values), r.unit),
            _fmt(r.median, r.unit) + unit,
            _fmt(max(r.values), r.unit),
        ]
        met = {None: "", True: "yes", False: "**no**" if markdown else "NO"}[r.met]
        lines.append([r.section, r.case, *vals, _target(r), met, r.note])
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(cells) + " |" for cells in lines]
        return "\n".join(out)
    widths = [
        max(len(h), *(len(c[i]) for c in lines)) if lines else len(h) for i, h in enumerate(header)
    ]
    fmt = "  ".join(f"{{:{w}}}" for w in widths[:-1]) + "  {}"
    return "\n".join(fmt.format(*row) for row in [header, *lines])


BEGIN, END = "<!-- benchmarks/run.py tables: begin -->", "<!-- benchmarks/run.py tables: end -->"


def write_tables(page: Path, tables: str) -> None:
    """Replace what stands between ``page``'s two table markers with ``tables``."""
    text = page.read_text()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{page}: no {BEGIN} ... {END} markers to write between")
    page.write_text(text[: start + len(BEGIN)] + "\n" + tables + text[end:])


def _seeds(text: str) -> tuple[int, ...]:
    """``1,2,3``: PYTHONHASHSEED values (0 turns hashing randomisation off, also a seed)."""
    try:
        seeds = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated integers: {text!r}") from None
    if not seeds or any(not 0 <= seed <= 4294967295 for seed in seeds):
        raise argparse.ArgumentTypeError(f"hash seeds are 0 to 4294967295: {text!r}")
    return seeds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="CI mode: seconds, gross only")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument(
        "--write",
        metavar="PAGE",
        help="with --markdown: put the tables into PAGE between its table markers",
    )
    parser.add_argument("--only", help=f"comma-separated sections of {', '.join(SECTIONS)}")
    parser.add_argument(
        "--seeds",
        type=_seeds,
        help="instructions: comma-separated hash seeds, one paired count each (default 1)",
    )
    args = parser.parse_args(argv)
    logging.getLogger("pairwatch").setLevel(logging.ERROR)
    only = set(args.only.split(",")) if args.only else set(SECTIONS) - OPT_IN
    short = args.short
    results = Results()
    if short:
        only -= {"chaos", "web3", "mcp"}

    if "ledger" in only:
        from _core import run_ledger

        run_ledger(results, repeats=5 if short else 15, per_block=100 if short else 400)
    if "floor" in only:
        from _floor import run_floor

        run_floor(
            results,
            sizes=(1, 100) if short else (1, 100, 1000),
            repeats=5 if short else 15,
            per_block=200 if short else 1000,
        )
        from _minimal import run_minimal

        run_minimal(
            results,
            sizes=(1,) if short else (1, 100),
            repeats=5 if short else 15,
            per_block=200 if short else 1000,
        )
    if "stream" in only:
        from _stream import run_stream

        run_stream(
            results,
            outstanding=(10, 10_000) if short else (10, 10_000, 100_000),
            repeats=5 if short else 9,
            per_block=500 if short else 2000,
        )
    if "http" in only or "chaos" in only:
        from _http import run_http

        servers = []
        if "http" in only:
            servers.append(("plain", fast_server()))
        if "chaos" in only:
            servers.append(("chaos", chaos_server()))
        for name, cmd in servers:
            with server_process(cmd) as url:
                run_http(
                    results,
                    name,
                    url,
                    libraries=("httpx",) if short else ("httpx", "requests", "aiohttp"),
                    sizes=(1, 100) if short else (1, 100, 1000),
                    repeats=5 if short else 15,
                    budget_s=1.0 if short else 8.0,
                )
    if "web3" in only:
        from _ext import run_web3

        run_web3(results, size=100, repeats=15, per_block=5)  # anvil swings: more repeats
    if "mcp" in only:
        from _ext import run_mcp

        run_mcp(results, repeats=9, per_block=50)
    if "memory" in only:
        from _core import run_memory

        run_memory(
            results, closed=20_000 if short else 1_000_000, open_=10_000 if short else 100_000
        )

    if "instructions" in only:
        from _instructions import SEEDS, run_instructions

        libraries = ("httpx-mock", "httpx", "requests", "aiohttp")
        run_instructions(results, libraries, (1, 100), args.seeds or SEEDS)

    heading = (
        f"pairwatch {pairwatch.__version__}, Python {platform.python_version()}, "
        f"{platform.machine()}; {'short' if short else 'full'} run"
    )
    tables = (
        f"{render(results, args.markdown)}\n\nThe targets, from the rows above:\n\n"
        f"{render_targets(results, args.markdown)}"
    )
    if args.write:
        if not args.markdown:
            parser.error("--write goes with --markdown")
        write_tables(Path(args.write), f"{heading}.\n\n{tables}\n")
    else:
        if not args.markdown:
            print(heading)
        print(tables)
    gross = [r for r in results.rows if r.gross]
    if gross:
        for r in gross:
            print(
                f"GROSS REGRESSION: {r.section} / {r.case}: median {_fmt(r.median, r.unit)} "
                f"> 2 x target {r.target}",
                file=sys.stderr,
            )
        return 1 if short else 0
    if short:
        missed = [r for r in results.rows if r.met is False]
        print(
            f"\n--short: {len(missed)} target(s) missed (the gaps docs/performance.md "
            "documents), no median above twice its gate: passed"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
