"""The issue's target table, filled from the rows one run measured.

Why a second table: the full table has a row per case and variant; a reader (and the
acceptance of issue 16) asks the few questions the targets pose: is every HTTP client within
1.10x wall and 1.15x CPU at every size, what does one tracked exchange cost, does the
default install take the fast path, and so on.  Each line names the worst measured median
among the rows it covers, so one line cannot hide a miss behind a good row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from _common import Results, Row

from pairwatch.pairing import _fast, wire

Line = tuple[str, str, str, str]  # case, measured, target, met


def _medians(rows: Iterable[Row]) -> list[tuple[str, float]]:
    return [(f"{r.section} / {r.case}", r.median) for r in rows if r.values]


def _line(
    case: str, rows: list[Row], target: float, unit: str, fmt: Callable[[float], str]
) -> Line | None:
    found = _medians(rows)
    if not found:
        return None
    worst_name, worst = max(found, key=lambda item: item[1])
    best = min(value for _, value in found)
    measured = fmt(worst) if len(found) == 1 else f"{fmt(best)} to {fmt(worst)}"
    measured += unit
    met = "yes" if worst <= target else "no"
    return case, f"{measured} (worst: {worst_name})", f"≤ {fmt(target)}{unit}", met


def _x(value: float) -> str:
    return f"{value:.2f}x"


def target_lines(results: Results) -> list[Line]:
    rows = [r for r in results.rows if not r.skipped]

    def pick(section: str, case: str) -> list[Row]:
        return [r for r in rows if re.search(section, r.section) and re.search(case, r.case)]

    plain = r"^(httpx|requests|aiohttp) \d+-request batch, plain server$"
    lines: list[Line | None] = [
        _line(
            "httpx, requests, aiohttp; metrics; 1-, 100-, 1000-request batches, plain server: wall",
            pick(plain, r"^metrics, wall$"), 1.10, "", _x,
        ),
        _line(
            "the same: whole-process CPU",
            pick(plain, r"^metrics, whole-process CPU$"), 1.15, "", _x,
        ),
        _line(
            "fixed cost of one tracked exchange (1-request batch) above bare",
            pick(plain, r"^fixed cost"), 15.0, " µs", lambda v: f"{v:.0f}",
        ),
        _line(
            "stream channel: per-request cost at 10^4 and 10^5 outstanding vs 10",
            pick(r"^stream channel", r"outstanding vs 10$"), 1.2, "", _x,
        ),
        _line(
            "per-id spans, AlwaysOn sampler, 100-request batch",
            pick(r"^(httpx|requests|aiohttp) 100-request batch, plain", r"^spans, wall$"),
            2.0, "", _x,
        ),
        _line(
            "per-id spans, ParentBased(TraceIdRatio 0.01), every size",
            pick(plain, r"^sampled, wall$"), 1.12, "", _x,
        ),
        _line(
            "web3 HTTPProvider + anvil, 100-request batch, spans on",
            pick(r"^web3", r"^spans$"), 1.05, "", _x,
        ),
        _line(
            "ledger alone, µs per paired response (healthy path)",
            pick(r"^ledger alone", r"^µs per paired response$"), 0.25, " µs",
            lambda v: f"{v:.3f}",
        ),
        _line(
            "memory per pending id, single requests",
            pick(r"^memory$", r"open batches of 1$"), 300.0, " B", lambda v: f"{v:.0f}",
        ),
    ]  # fmt: skip
    fast = wire.parse_plain is _fast.plain  # msgspec is a required dependency: wire uses it
    lines.insert(
        3,
        (
            "the default install takes the fast decoder",
            "msgspec path active" if fast else "stdlib path only",
            "the fast path",
            "yes" if fast else "no",
        ),
    )
    return [line for line in lines if line is not None]


def render_targets(results: Results, markdown: bool) -> str:
    lines = target_lines(results)
    header = ("case", "measured (median)", "target", "met")
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|---|---|---|---|"]
        met = {"yes": "yes", "no": "**no**"}
        out += [f"| {c} | {m} | {t} | {met[ok]} |" for c, m, t, ok in lines]
        return "\n".join(out)
    width = max(len(c) for c, _, _, _ in lines)
    return "\n".join(f"{c:{width}}  {ok.upper():3}  {t:10}  {m}" for c, m, t, ok in lines)
