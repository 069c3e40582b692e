"""Turn audited files into the report: a dict for ``--json``, text for a terminal, and the
``--fail-on`` verdict that makes an audit usable as a CI gate.

Everything numeric comes from the exported metrics (:mod:`pairwatch.audit.metrics`); only the
"worst batches" list comes from the ``on_batch_closed`` hook, because ids never become
metric attributes.
"""

from __future__ import annotations

import json
import operator
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from pairwatch.audit.feed import FileAudit
from pairwatch.audit.metrics import COUNTERS, groups
from pairwatch.pairing import diagnosis

FORMAT_NAMES: Final = {"har": "HAR", "jsonl": "JSON Lines", "stdio": "stdio transcript"}


def summarize(audit: FileAudit) -> dict[str, Any]:
    found, internal = groups(audit.reader)
    stats = audit.stats
    channels = []
    for g in found:
        counters = dict(g.counters)
        counters["not_ok"] = sum(n for d, n in g.diagnoses.items() if d != diagnosis.OK)
        channels.append(
            {
                "transport": g.transport,
                "counters": counters,
                "diagnoses": dict(sorted(g.diagnoses.items())),
                "close_reasons": dict(sorted(g.close_reasons.items())),
                "latency_seconds": g.latency.summary() if stats.timed else None,
            }
        )
    return {
        "path": audit.path,
        "format": audit.format,
        "unit": stats.unit,
        "read": stats.units,
        "skipped": dict(sorted(stats.skipped.items())),
        "bodies_absent": dict(sorted(stats.absent.items())),
        "bodies_from_side_files": stats.attached,
        "timed": stats.timed,
        "clock_went_back": audit.clock_went_back,
        "internal_errors": internal,
        "channels": channels,
        "worst": [asdict(d) for d in audit.worst],
    }


def totals(files: Sequence[dict[str, Any]]) -> dict[str, int]:
    out = dict.fromkeys([*COUNTERS, "not_ok"], 0)
    for f in files:
        for ch in f["channels"]:
            for k, v in ch["counters"].items():
                out[k] += v
        out["internal_errors"] += f["internal_errors"]
    return out


# ---------------------------------------------------------------- thresholds
_OPS: Final[dict[str, Callable[[float, float], bool]]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
    "=": operator.eq,
}
_RULE: Final = re.compile(r"^\s*([A-Za-z_.]+)\s*(>=|<=|==|!=|>|<|=)\s*([0-9]+(?:\.[0-9]*)?)\s*$")


def _aliases() -> dict[str, str]:
    out = {short: short for short in [*COUNTERS, "not_ok"]}
    for short, instrument in COUNTERS.items():
        out[instrument] = short
        out[instrument.replace(".", "_")] = short
        out[instrument.replace(".", "_") + "_total"] = short
    return out


ALIASES: Final = _aliases()


@dataclass(frozen=True)
class Threshold:
    """``NAME OP NUMBER`` (``missing>0``, ``unknown_id>=3``): breached when it holds."""

    text: str
    counter: str
    op: str
    limit: float

    def breached(self, value: float) -> bool:
        return _OPS[self.op](value, self.limit)


def parse_threshold(text: str) -> Threshold:
    """Parse one ``--fail-on`` rule; ``ValueError`` names what is wrong with it."""
    m = _RULE.match(text)
    if m is None:
        raise ValueError(f"{text!r} is not NAME OP NUMBER (e.g. missing>0, unknown_id>=3)")
    name, op, limit = m.groups()
    counter = ALIASES.get(name)
    if counter is None:
        raise ValueError(f"unknown counter {name!r}; one of {', '.join([*COUNTERS, 'not_ok'])}")
    return Threshold(text.strip(), counter, op, float(limit))


def verdicts(rules: Sequence[Threshold], total: dict[str, int]) -> list[dict[str, Any]]:
    return [
        {
            "rule": r.text,
            "counter": r.counter,
            "value": total[r.counter],
            "failed": r.breached(total[r.counter]),
        }
        for r in rules
    ]


#: Exit statuses, as ``pairwatch audit`` documents them.
STATUS_OK: Final = 0
STATUS_RULE_BREACHED: Final = 1
STATUS_UNREADABLE: Final = 2
STATUS_BODIES_ABSENT: Final = 3

REMEDY: Final = (
    "record with bodies (Playwright: record_har_content='embed', or 'attach' keeping the side "
    "files beside the .har or inside its .zip; browser devtools: 'Save all as HAR with content')"
)


def absent_bodies(f: dict[str, Any]) -> int:
    return sum(f["bodies_absent"].values())


def build(audits: Sequence[FileAudit], rules: Sequence[Threshold]) -> dict[str, Any]:
    """The report; its status is 3 when any capture lacks bodies, since then no count (and no
    ``--fail-on`` verdict) covers the exchanges those bodies belonged to, else 1 or 0."""
    files = [summarize(a) for a in audits]
    total = totals(files)
    checks = verdicts(rules, total)
    status = STATUS_RULE_BREACHED if any(c["failed"] for c in checks) else STATUS_OK
    if any(absent_bodies(f) for f in files):
        status = STATUS_BODIES_ABSENT
    return {"files": files, "totals": total, "thresholds": checks, "status": status}


def absence_message(f: dict[str, Any]) -> str | None:
    """One line on the bodies a capture does not hold, or ``None`` when it holds them all."""
    n = absent_bodies(f)
    if not n:
        return None
    what = "; ".join(
        f"{k} {why if k == 1 else why.replace(' body ', ' bodies ', 1)}"
        for why, k in f["bodies_absent"].items()
    )
    if f["channels"]:
        are = "1 body is" if n == 1 else f"{n} bodies are"
        lead = f"{are} not in the capture ({what}): the counts cover only the rest"
    else:
        lead = f"the capture holds no bodies to pair ({what})"
    return f"{lead}; {REMEDY}"


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=False)


# ---------------------------------------------------------------------- text
def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.2f}"


def _ids(ids: list[Any]) -> str:
    return ", ".join(json.dumps(i) for i in ids)


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
        ]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def _file_text(f: dict[str, Any]) -> list[str]:
    lines = [f"{f['path']}  ({FORMAT_NAMES.get(f['format'], f['format'])})"]
    unit = f["unit"] if f["read"] == 1 else {"entry": "entries"}.get(f["unit"], f["unit"] + "s")
    read = f"  {f['read']} {unit} read"
    if f["skipped"]:
        read += "; skipped: " + ", ".join(f"{n} {why}" for why, n in f["skipped"].items())
    if f["bodies_from_side_files"]:
        read += f"; {f['bodies_from_side_files']} bodies read from side files"
    lines.append(read)
    absence = absence_message(f)
    if absence is not None:
        lines += textwrap.wrap(
            "bodies absent: " + absence, 96, initial_indent="  ", subsequent_indent="    "
        )
    if not f["timed"]:
        lines.append("  the capture has no timestamps: no latencies, no timeouts")
    if f["clock_went_back"]:
        lines.append(f"  {f['clock_went_back']} steps went back in time (kept at the latest time)")
    if f["internal_errors"]:
        lines.append(f"  pairwatch internal errors: {f['internal_errors']}")
    channels = f["channels"]
    if not channels:
        if absence is None:
            lines.append("  no JSON-RPC traffic found")
        return lines
    rows = [["channel kind", *(c["transport"] for c in channels)]]
    for short, instrument in COUNTERS.items():
        if short != "internal_errors":
            rows.append([instrument, *(str(c["counters"][short]) for c in channels)])
    names = sorted({d for c in channels for d in c["diagnoses"]}, key=diagnosis.ALL.index)
    rows += [[f"diagnosis {d}", *(str(c["diagnoses"].get(d, 0)) for c in channels)] for d in names]
    if f["timed"]:
        for key in ("p50", "p95", "p99", "max"):
            rows.append(
                [
                    f"latency {key} (ms)",
                    *(_ms((c["latency_seconds"] or {}).get(key)) for c in channels),
                ]
            )
    lines += _table(rows)
    if f["worst"]:
        lines.append("  worst batches:")
    for i, w in enumerate(f["worst"], 1):
        lines.append(f"  {i}. {w['where']}  [{w['transport']}]")
        lines.append(
            f"     {w['diagnosis']} ({w['close_reason']}): {w['requests']} requests, "
            f"{w['paired']} paired, {w['missing']} missing, {w['unknown']} unknown-id, "
            f"{w['null']} null-id" + (", out of order" if w["out_of_order"] else "")
        )
        for label, key in (
            ("missing ids", "missing_ids"),
            ("unknown ids", "unknown_ids"),
            ("duplicate ids", "duplicate_ids"),
        ):
            if w[key]:
                lines.append(f"     {label}: {_ids(w[key])}")
        if w["problems"]:
            lines.append("     " + ", ".join(f"{k}: {v}" for k, v in w["problems"].items()))
        if w["diagnosis"] != diagnosis.OK:
            why = diagnosis.EXPLANATION[w["diagnosis"]]
            lines += textwrap.wrap(why, 96, initial_indent="     -> ", subsequent_indent="        ")
    return lines


def to_text(report: dict[str, Any]) -> str:
    lines: list[str] = []
    for f in report["files"]:
        lines += [*_file_text(f), ""]
    t = report["totals"]
    lines.append(
        "total: " + ", ".join(f"{k} {v}" for k, v in t.items() if v or k in ("batches", "requests"))
    )
    for c in report["thresholds"]:
        verdict = "FAILED" if c["failed"] else "ok"
        lines.append(f"--fail-on {c['rule']}: {c['counter']} = {c['value']} -> {verdict}")
    return "\n".join(lines) + "\n"
