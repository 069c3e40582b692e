"""Read the PromQL queries out of the dashboard JSON and make them runnable outside Grafana.

Used by dashboards/render_png.py and by the end-to-end test
(tests/dashboards/test_e2e_prometheus.py). Standard library only.

Grafana fills in template variables before a query reaches Prometheus; outside Grafana we
do it here: `$job`, `$side`, `$instance`, `$transport`, `$server` and `$method` become
`.*` (what the "All" choice sends, since the variables set allValue to `.*`), and the
interval variables become fixed durations.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parent / "pairwatch.json"

# What "All" sends for every label variable, and durations for Grafana's interval variables.
DEFAULT_VALUES: Mapping[str, str] = {
    "job": ".*",
    "side": ".*",
    "instance": ".*",
    "transport": ".*",
    "server": ".*",
    "method": ".*",
    "datasource": "prometheus",
    "traces": "traces",
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "1h",
}

_VARIABLE = re.compile(r"\$(?:\{(?P<braced>\w+)(?::\w+)?\}|(?P<plain>\w+))")


@dataclass(frozen=True)
class PanelQuery:
    """One target of one panel."""

    panel_id: int
    panel_title: str
    panel_type: str
    ref_id: str
    expr: str
    legend: str
    instant: bool


def load_dashboard(path: Path = DASHBOARD) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def iter_panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows included, with the panels nested in collapsed rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def panel_queries(dashboard: Mapping[str, Any]) -> list[PanelQuery]:
    """Every Prometheus target of every panel, in dashboard order."""
    found: list[PanelQuery] = []
    for panel in iter_panels(dashboard):
        for target in panel.get("targets", []):
            if "expr" not in target:
                continue
            found.append(
                PanelQuery(
                    panel_id=int(panel["id"]),
                    panel_title=str(panel.get("title", "")),
                    panel_type=str(panel.get("type", "")),
                    ref_id=str(target.get("refId", "")),
                    expr=str(target["expr"]),
                    legend=str(target.get("legendFormat", "")),
                    instant=bool(target.get("instant", False)),
                )
            )
    return found


def substitute(expr: str, values: Mapping[str, str] | None = None) -> str:
    """Replace Grafana template variables ($name, ${name}, ${name:fmt}) in `expr`.

    Raises KeyError for a variable with no value, so a new variable cannot slip through
    unnoticed.
    """
    table = {**DEFAULT_VALUES, **(values or {})}

    def replace(match: re.Match[str]) -> str:
        name = match.group("braced") or match.group("plain")
        return table[name]

    return _VARIABLE.sub(replace, expr)


def legend_text(legend: str, labels: Mapping[str, str]) -> str:
    """Grafana's legendFormat: `{{label}}` becomes the label's value (empty if absent)."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), legend).strip()
