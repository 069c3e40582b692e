"""What render_png.py draws, fetched from a Prometheus: panel series and alert spans.

Standard library only, so it can be read and tested without matplotlib.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from queries import PanelQuery, legend_text, substitute


@dataclass(frozen=True)
class Series:
    name: str
    times: list[datetime]
    values: list[float]


def query_range(
    base_url: str, expr: str, start: float, end: float, step: float, timeout: float = 10.0
) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step})
    url = f"{base_url.rstrip('/')}/api/v1/query_range?{params}"
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(f"query failed: {expr}: {body}")
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def fetch_panel(
    base_url: str,
    queries: Sequence[PanelQuery],
    start: float,
    end: float,
    step: float,
    values: Mapping[str, str],
) -> list[Series]:
    series: list[Series] = []
    range_values = {"__range": f"{int(end - start)}s", **values}
    for query in queries:
        expr = substitute(query.expr, range_values)
        for item in query_range(base_url, expr, start, end, step):
            labels: dict[str, str] = item["metric"]
            name = legend_text(query.legend, labels) or json.dumps(labels, sort_keys=True)
            points = [(float(t), float(v)) for t, v in item["values"]]
            series.append(
                Series(
                    name=name,
                    times=[datetime.fromtimestamp(t, tz=timezone.utc) for t, _ in points],
                    values=[v for _, v in points],
                )
            )
    return series


@dataclass
class AlertSpans:
    """Where pairwatch alerts were active during the rendered range."""

    spans: dict[str, list[tuple[datetime, datetime]]]  # state -> merged (from, to)
    active_at_end: list[str]


def merge(spans: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Overlapping or touching (from, to) intervals joined, in time order."""
    merged: list[tuple[float, float]] = []
    for begin, finish in sorted(spans):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], finish))
        else:
            merged.append((begin, finish))
    return merged


def fetch_alerts(
    base_url: str,
    dashboard: Mapping[str, Any],
    start: float,
    end: float,
    step: float,
    values: Mapping[str, str] | None = None,
) -> AlertSpans:
    """The dashboard's alert annotation query (firing), widened to pending too: per state,
    the times any pairwatch alert was in it, and the alerts still active at `end`.

    `values` fills the template variables as for the panels, so a picture of one job shows
    that job's alerts, not every job's."""
    exprs = [
        str(a["expr"])
        for a in dashboard.get("annotations", {}).get("list", [])
        if str(a.get("expr", "")).startswith("ALERTS{")
    ]
    raw: dict[str, list[tuple[float, float]]] = {}
    active: set[str] = set()
    for expr in exprs:
        wide = substitute(expr.replace('alertstate="firing", ', ""), values)
        for item in query_range(base_url, wide, start, end, step):
            labels = item["metric"]
            state = str(labels.get("alertstate", "firing"))
            times = [float(t) for t, _ in item["values"]]
            raw.setdefault(state, []).extend((t, t + step) for t in times)
            if times and end - times[-1] <= step * 1.5:
                active.add(f"{labels.get('alertname')} {state} ({labels.get('job')})")
    spans = {
        state: [
            (
                datetime.fromtimestamp(begin, tz=timezone.utc),
                datetime.fromtimestamp(finish, tz=timezone.utc),
            )
            for begin, finish in merge(found)
        ]
        for state, found in raw.items()
    }
    return AlertSpans(spans, sorted(active))
