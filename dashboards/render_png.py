"""Render the dashboard's main panels to a PNG with matplotlib, from a live Prometheus.

    python dashboards/render_png.py --prometheus http://127.0.0.1:9090 \
        --output dashboards/pairwatch.png --range 15m

A picture of what the panels show for readers without a Grafana. Each panel's queries are
taken from dashboards/pairwatch.json (so the picture shows the dashboard's real queries),
template variables are filled in as the "All" choice would, and every query is run through
/api/v1/query_range. Only the time-series panels listed in MAIN_PANELS are drawn.
Needs matplotlib (the `dashboards` extra); talks to Prometheus with the standard library.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from queries import (
    DASHBOARD,
    PanelQuery,
    iter_panels,
    legend_text,
    load_dashboard,
    panel_queries,
    substitute,
)

# Panel ids from dashboards/generate.py, in drawing order (two per row).
MAIN_PANELS: tuple[int, ...] = (2, 5, 6, 8, 9, 10, 12, 14)
MAX_SERIES_PER_PANEL = 12

# Grafana colour names used by the dashboard's overrides, as matplotlib colours.
COLORS = {"dark-red": "darkred", "orange": "darkorange", "red": "red", "purple": "purple"}

_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w)")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Prometheus-style duration ("90s", "15m", "1h30m") in seconds."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(n) * _SECONDS[u] for n, u in parts)


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


def override_colors(panel: Mapping[str, Any]) -> list[tuple[re.Pattern[str], str]]:
    """(name regexp, matplotlib colour) from the panel's fixed-colour overrides."""
    found = []
    for override in panel.get("fieldConfig", {}).get("overrides", []):
        matcher = override.get("matcher", {})
        if matcher.get("id") != "byRegexp":
            continue
        for prop in override.get("properties", []):
            value = prop.get("value")
            if prop.get("id") == "color" and isinstance(value, dict):
                color = str(value.get("fixedColor", ""))
                found.append((re.compile(str(matcher["options"])), COLORS.get(color, color)))
    return found


def render(
    base_url: str,
    output: Path,
    *,
    dashboard_path: Path = DASHBOARD,
    range_seconds: float = 900.0,
    step: float | None = None,
    end: float | None = None,
    values: Mapping[str, str] | None = None,
    panel_ids: Sequence[int] = MAIN_PANELS,
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.ticker import PercentFormatter

    dashboard = load_dashboard(dashboard_path)
    panels = {int(p["id"]): p for p in iter_panels(dashboard)}
    queries = panel_queries(dashboard)
    end = time.time() if end is None else end
    start = end - range_seconds
    step = step if step is not None else max(1.0, range_seconds / 300)

    columns = 2
    rows = (len(panel_ids) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(16, 4.2 * rows), squeeze=False)
    fig.suptitle(
        f"{dashboard.get('title', 'pairwatch')}\n"
        f"{datetime.fromtimestamp(start, tz=timezone.utc):%Y-%m-%d %H:%M:%S} to "
        f"{datetime.fromtimestamp(end, tz=timezone.utc):%H:%M:%S} UTC, {base_url}",
        fontsize=13,
    )
    for index, panel_id in enumerate(panel_ids):
        ax = axes[index // columns][index % columns]
        panel = panels[panel_id]
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        series = fetch_panel(
            base_url, [q for q in queries if q.panel_id == panel_id], start, end, step, values or {}
        )
        colors = override_colors(panel)
        for item in series[:MAX_SERIES_PER_PANEL]:
            color = next((c for pattern, c in colors if pattern.search(item.name)), None)
            ax.plot(item.times, item.values, label=item.name, color=color, linewidth=1.6)
        ax.set_title(str(panel.get("title", "")), fontsize=11)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))  # type: ignore[no-untyped-call]
        if unit == "percentunit":
            ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        else:
            ax.set_ylabel(
                {"reqps": "per second", "ops": "per second", "s": "seconds"}.get(unit, "")
            )
        if series:
            ax.legend(fontsize=7, loc="upper left", framealpha=0.8)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    for index in range(len(panel_ids), rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=90)
    plt.close(fig)
    return output


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render pairwatch dashboard panels to a PNG.")
    parser.add_argument("--prometheus", required=True, help="base URL, e.g. http://127.0.0.1:9090")
    parser.add_argument("--output", type=Path, default=Path("pairwatch.png"))
    parser.add_argument("--dashboard", type=Path, default=DASHBOARD)
    parser.add_argument("--range", default="15m", help="time range ending now (or at --end)")
    parser.add_argument("--step", default=None, help="query_range step, e.g. 5s")
    parser.add_argument("--end", type=float, default=None, help="end as a unix timestamp")
    parser.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="template variable value (regex), e.g. --var transport=http",
    )
    args = parser.parse_args(argv)
    values = dict(item.split("=", 1) for item in args.var)
    out = render(
        args.prometheus,
        args.output,
        dashboard_path=args.dashboard,
        range_seconds=parse_duration(args.range),
        step=parse_duration(args.step) if args.step else None,
        end=args.end,
        values=values,
    )
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
