"""Render the dashboard's main panels to a PNG with matplotlib, from a live Prometheus.

    python dashboards/render_png.py --prometheus http://127.0.0.1:9090 \
        --output dashboards/pairwatch.png --range 15m

or, to regenerate the picture in the README (docs/dashboard.png) from scratch, the way it
was made: run `pairwatch demo` with its default fault mix and a real Prometheus (the
`prometheus` binary on PATH, scraping every 5 s with dashboards/rules/ loaded), let the
5-minute recording rules and alert windows fill (`--warmup`, default 5m), then draw the next
DURATION of that run, so the picture shows no warm-up ramp:

    python dashboards/render_png.py --from-demo 6m --output docs/dashboard.png

Alert state is drawn as the dashboard shows it: the panels' threshold lines dashed, a strip
along the top of each panel red while any pairwatch alert was firing (yellow while only
pending), and the alerts active at the end listed under the title.

A picture of what the panels show for readers without a Grafana. Each panel's queries are
taken from dashboards/pairwatch.json (so the picture shows the dashboard's real queries),
template variables are filled in as the "All" choice would, and every query is run through
/api/v1/query_range. Only the time-series panels listed in MAIN_PANELS are drawn.
Needs matplotlib (the `dashboards` extra); talks to Prometheus with the standard library.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import sys
import textwrap
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from queries import DASHBOARD, iter_panels, load_dashboard, panel_queries
from render_data import fetch_alerts, fetch_panel

# Panel ids from dashboards/generate.py, in drawing order (two per row).
# The top row, the blame row and the per-method row: what an on-call reads first.
MAIN_PANELS: tuple[int, ...] = (2, 3, 4, 5, 7, 8, 11, 12)
MAX_SERIES_PER_PANEL = 16  # two jobs x four methods x p50/p99 fit

# Grafana colour names used by the dashboard's overrides, as matplotlib colours.
COLORS = {
    "dark-red": "darkred",
    "orange": "darkorange",
    "red": "red",
    "purple": "purple",
    "light-purple": "orchid",
    "yellow": "goldenrod",
    "blue": "royalblue",
}
ALERT_SHADES = {"pending": "gold", "firing": "red"}  # drawn in this order: firing on top

# y-axis label per Grafana unit; the panel's unit says what is counted per second.
UNIT_LABELS = {
    "reqps": "responses / s",
    "ops": "batches / s",
    "s": "milliseconds",
    "short": "requests per batch",
}
# Quantile series ("p50 ...", "p95 ...", "p99 ...") share a colour per label set and differ
# by line style, so a dozen latency lines stay readable.
QUANTILE_STYLES = {"p50": "-", "p95": "--", "p99": ":"}

_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w)")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Prometheus-style duration ("90s", "15m", "1h30m") in seconds."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(n) * _SECONDS[u] for n, u in parts)


def override_colors(panel: Mapping[str, Any]) -> list[tuple[re.Pattern[str], str]]:
    """(name regexp, matplotlib colour) from the panel's fixed-colour overrides."""
    found = []
    for override in panel.get("fieldConfig", {}).get("overrides", []):
        matcher = override.get("matcher", {})
        if matcher.get("id") == "byRegexp":
            pattern = str(matcher["options"])
        elif matcher.get("id") == "byName":
            pattern = "^" + re.escape(str(matcher["options"])) + "$"
        else:
            continue
        for prop in override.get("properties", []):
            value = prop.get("value")
            if prop.get("id") == "color" and isinstance(value, dict):
                color = str(value.get("fixedColor", ""))
                found.append((re.compile(pattern), COLORS.get(color, color)))
    return found


def dashed_names(panel: Mapping[str, Any]) -> list[re.Pattern[str]]:
    """Name regexps of the series a panel draws dashed (a baseline or an objective)."""
    found = []
    for override in panel.get("fieldConfig", {}).get("overrides", []):
        matcher = override.get("matcher", {})
        for prop in override.get("properties", []):
            if matcher.get("id") == "byRegexp" and prop.get("id") == "custom.lineStyle":
                found.append(re.compile(str(matcher["options"])))
    return found


def display_names(panel: Mapping[str, Any]) -> dict[str, str]:
    """Series name -> the display name a byName override gives it (the legend Grafana shows)."""
    names = {}
    for override in panel.get("fieldConfig", {}).get("overrides", []):
        matcher = override.get("matcher", {})
        for prop in override.get("properties", []):
            if matcher.get("id") == "byName" and prop.get("id") == "displayName":
                names[str(matcher["options"])] = str(prop["value"])
    return names


def threshold_lines(panel: Mapping[str, Any]) -> list[tuple[float, str]]:
    """(value, colour) of the thresholds a panel draws as lines (the alert thresholds)."""
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    if defaults.get("custom", {}).get("thresholdsStyle", {}).get("mode", "off") == "off":
        return []
    steps = defaults.get("thresholds", {}).get("steps", [])
    return [
        (float(s["value"]), COLORS.get(str(s["color"]), str(s["color"])))
        for s in steps
        if s.get("value") is not None
    ]


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
    source: str | None = None,
) -> Path:
    """Draw `panel_ids` from `base_url` over the `range_seconds` ending at `end` (now).

    `source` describes where the data came from in the picture's subtitle (default: the
    Prometheus URL).
    """
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

    alert_spans = fetch_alerts(base_url, dashboard, start, end, step, values or {})
    columns = 2
    rows = (len(panel_ids) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(16, 4.4 * rows + 0.6), squeeze=False)
    active = "; ".join(alert_spans.active_at_end) or "none"
    fig.suptitle(
        f"{dashboard.get('title', 'pairwatch')}: the top rows of dashboards/pairwatch.json\n"
        f"{datetime.fromtimestamp(start, tz=timezone.utc):%Y-%m-%d %H:%M:%S} to "
        f"{datetime.fromtimestamp(end, tz=timezone.utc):%H:%M:%S} UTC, {source or base_url}\n"
        + textwrap.fill(
            f"alerts active at the end: {active}. Top strip: red = an alert firing, yellow = "
            "pending; dashed lines: alert thresholds.",
            width=150,
        ),
        fontsize=12,
    )
    for index, panel_id in enumerate(panel_ids):
        ax = axes[index // columns][index % columns]
        panel = panels[panel_id]
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        series = fetch_panel(
            base_url, [q for q in queries if q.panel_id == panel_id], start, end, step, values or {}
        )
        colors = override_colors(panel)
        shown = display_names(panel)
        dashes = dashed_names(panel)
        palette = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4)
        by_rest: dict[str, str] = {}  # quantile series: one colour per rest of the name
        used: dict[str, int] = {}  # fixed colours: vary the line style when shared
        for item in series[:MAX_SERIES_PER_PANEL]:
            quantile, _, rest = item.name.partition(" ")
            color = next((c for pattern, c in colors if pattern.search(item.name)), None)
            style = "-"
            if quantile in QUANTILE_STYLES and rest:
                style = QUANTILE_STYLES[quantile]
                color = color or by_rest.setdefault(rest, next(palette))
            elif color is not None:
                style = ("-", "--", ":", "-.")[used.get(color, 0) % 4]
                used[color] = used.get(color, 0) + 1
            else:
                color = next(palette)
            if any(pattern.search(item.name) for pattern in dashes):
                style = "--"
            scale = 1000.0 if unit == "s" else 1.0  # seconds are drawn as milliseconds
            ax.plot(
                item.times,
                [v * scale for v in item.values],
                label=shown.get(item.name, item.name),
                color=color,
                linestyle=style,
                linewidth=1.8,
            )
        for value, color in threshold_lines(panel):
            ax.axhline(value, color=color, linestyle="--", linewidth=1.2, alpha=0.8)
        for state, color in ALERT_SHADES.items():
            for span_start, span_end in alert_spans.spans.get(state, []):
                ax.axvspan(span_start, span_end, ymin=0.96, ymax=1.0, color=color, linewidth=0)
        ax.set_title(str(panel.get("title", "")), fontsize=12, fontweight="bold")
        ax.grid(True, alpha=0.3)
        # Headroom above the highest line keeps the legend (upper left) off the data.
        top = max((v for item in series for v in item.values if v == v), default=0.0)
        top *= 1000.0 if unit == "s" else 1.0
        top = max([top, *(value for value, _ in threshold_lines(panel))])
        # Panels without a floor of 0 (answered share, budget left) show where they are.
        low = min((v for item in series for v in item.values if v == v), default=0.0)
        floor = panel.get("fieldConfig", {}).get("defaults", {}).get("min")
        bottom = (
            0.0 if floor == 0 or (floor is None and low >= 0 and unit != "percentunit") else low
        )
        if bottom:
            bottom -= (top - bottom) * 0.05
        span = top - bottom
        # Room for the legend above the lines: a tenth of the height per legend row.
        shown_count = min(len(series), MAX_SERIES_PER_PANEL)
        legend_rows = -(-shown_count // (3 if shown_count > 6 else 1))
        ax.set_ylim(bottom, bottom + span * (1.2 + 0.1 * legend_rows) if span > 0 else 1)
        locator = mdates.AutoDateLocator(minticks=4, maxticks=10)  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))  # type: ignore[no-untyped-call]
        ax.set_xlabel("time (UTC)", fontsize=9)
        if unit == "percentunit":
            ax.yaxis.set_major_formatter(PercentFormatter(1.0))
            ax.set_ylabel("share")
        else:
            ax.set_ylabel(UNIT_LABELS.get(unit, ""))
        if series:
            ax.legend(
                fontsize=8, loc="upper left", framealpha=0.9, ncol=3 if shown_count > 6 else 1
            )
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    for index in range(len(panel_ids), rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=90)
    plt.close(fig)
    return output


def render_from_demo(
    duration: float,
    output: Path,
    *,
    prometheus_bin: str,
    dashboard_path: Path = DASHBOARD,
    step: float | None = None,
    warmup: float = 300.0,
) -> Path:
    """Run two `pairwatch demo` jobs, one healthy (no faults, no client bug) and one with
    the default fault mix, scraped by a real Prometheus with the repository's rule files
    for `warmup` + `duration` seconds, then render the last
    `duration`: the 5-minute rates and alert windows are full by then, so the picture
    starts level instead of with a ramp.

    Everything runs on 127.0.0.1 in a temporary directory and is stopped afterwards, so
    the picture comes from the exporter's real output, not from invented series.
    """
    import tempfile

    from live import start_demo, start_prometheus, wait_for

    with tempfile.TemporaryDirectory(prefix="pairwatch-snapshot-") as tmp:
        workdir = Path(tmp)
        healthy = start_demo("healthy", workdir, faults="none", client_bug=0.0, seed=1)
        demos = [healthy]
        try:
            demos.append(start_demo("faulty", workdir, seed=2))
            server = start_prometheus(
                prometheus_bin,
                workdir,
                {demo.job: [demo.target] for demo in demos},
                interval="5s",
            )
            try:
                started = time.time()
                jobs = ", ".join(f"{demo.job} at {demo.target}" for demo in demos)
                print(f"demos: {jobs}; prometheus at {server.base_url}", file=sys.stderr)
                total = warmup + duration
                wait_for(lambda: time.time() - started, lambda t: t >= total, total + 5)
                return render(
                    server.base_url,
                    output,
                    dashboard_path=dashboard_path,
                    range_seconds=duration,
                    step=step if step is not None else 5.0,  # the scrape interval
                    source="two `pairwatch demo` jobs, healthy (no faults) and faulty (the "
                    "default fault mix), scraped by Prometheus every 5 s",
                )
            finally:
                server.stop()
        finally:
            for demo in demos:
                demo.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render pairwatch dashboard panels to a PNG.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prometheus", help="base URL, e.g. http://127.0.0.1:9090")
    source.add_argument(
        "--from-demo",
        metavar="DURATION",
        help="run pairwatch demo and a Prometheus for --warmup plus this long (e.g. 6m), "
        "then render the part after the warm-up",
    )
    parser.add_argument(
        "--warmup",
        default="5m",
        help="--from-demo: time to let the 5m windows fill before the rendered range",
    )
    parser.add_argument(
        "--prometheus-bin",
        default=shutil.which("prometheus"),
        help="prometheus binary for --from-demo (default: the one on PATH)",
    )
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
    if args.from_demo:
        if not args.prometheus_bin:
            parser.error("--from-demo needs prometheus: apt-get install prometheus")
        # SIGTERM unwinds like Ctrl-C, so the demo and Prometheus are stopped, not orphaned.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        print(
            render_from_demo(
                parse_duration(args.from_demo),
                args.output,
                prometheus_bin=args.prometheus_bin,
                dashboard_path=args.dashboard,
                step=parse_duration(args.step) if args.step else None,
                warmup=parse_duration(args.warmup),
            )
        )
        return 0
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
