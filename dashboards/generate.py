"""Generate the pairwatch Grafana dashboard (dashboards/pairwatch.json) from code.

    python dashboards/generate.py                 # rewrite dashboards/pairwatch.json
    python dashboards/generate.py --output x.json # write elsewhere
    python dashboards/generate.py --check         # exit 1 if the committed JSON is stale

Built with grafana-foundation-sdk (pinned in the `dashboards` extra of pyproject.toml).
The output is deterministic: panel ids and grid positions are fixed here, nothing depends on
the clock or the environment, so the committed JSON can be compared byte for byte
(tests/dashboards/test_dashboard_generate.py does).

Every query filters on the template variables (job, transport, server and, where the series
has it, method) and aggregates with `sum by (...)`, so labels the exporter adds (instance,
otel_scope_*, pairwatch_integration, ...) never split a line. The counter panels read the
recording rules of dashboards/rules/pairwatch-recording.yaml (5m rates, already summed per
job/transport/server); load them into Prometheus with the dashboard.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import heatmap as heatmap_b
from grafana_foundation_sdk.builders import prometheus as prom_b
from grafana_foundation_sdk.builders import stat as stat_b
from grafana_foundation_sdk.builders import timeseries as ts_b
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dash_m
from grafana_foundation_sdk.models import heatmap as heatmap_m
from grafana_foundation_sdk.models import prometheus as prom_m

HERE = Path(__file__).resolve().parent
DEFAULT_OUTPUT = HERE / "pairwatch.json"

DASHBOARD_UID = "pairwatch"
RUNBOOK_URL = "https://github.com/OWNER/pairwatch/blob/main/dashboards/runbook.md"

DATASOURCE = dash_m.DataSourceRef(type_val="prometheus", uid="${datasource}")

# Label matchers every query carries (the template variables).
SEL = 'job=~"$job", pairwatch_transport=~"$transport", server_address=~"$server"'
# The labels the recording rules keep and the co-occurrence expressions match on.
BY = "job, pairwatch_transport, server_address"

# Recording rule names (dashboards/rules/pairwatch-recording.yaml).
R_REQUESTS = "job_transport_server:batch_requests:rate5m"
R_UNKNOWN = "job_transport_server:batch_unknown_id_response:rate5m"
R_NULL = "job_transport_server:batch_null_id_response:rate5m"
R_MISSING = "job_transport_server_method:batch_missing_response:rate5m"
R_MISMATCH = "job_transport_server:batch_response_count_mismatch:rate5m"
R_OUT_OF_ORDER = "job_transport_server:batch_out_of_order:rate5m"
R_CLOSED = "job_transport_server_diagnosis:batch_closed:rate5m"
R_DUPLICATE = "job_transport_server_scope:batch_duplicate_id:rate5m"
R_INVALID = "job_transport_server_reason:batch_invalid_response:rate5m"
R_SIZE = "job_transport_server_le:batch_size_bucket:rate5m"
R_LATENCY = "job_transport_server_method_le:batch_pair_latency_seconds_bucket:rate5m"

# Colours kept fixed so the three counters read the same on every panel.
COLOR_UNKNOWN = "orange"
COLOR_MISSING = "red"
COLOR_NULL = "purple"

TARGET_LEGEND = "{{job}} / {{pairwatch_transport}} / {{server_address}}"

# Extra matchers used by some panels.
NOT_OK = 'pairwatch_diagnosis!="ok"'
METHOD = 'rpc_method=~"$method"'


def sel(extra: str = "") -> str:
    """The template-variable matchers, plus `extra` matchers if given."""
    return "{" + SEL + (", " + extra if extra else "") + "}"


def per_target(metric: str) -> str:
    """A counter's rate summed per job/transport/server."""
    return f"sum by ({BY}) ({metric}{sel()})"


def query(
    expr: str,
    legend: str,
    ref_id: str,
    *,
    fmt: prom_m.PromQueryFormat | None = None,
    instant: bool = False,
) -> prom_b.Dataquery:
    q = prom_b.Dataquery().expr(expr).legend_format(legend).ref_id(ref_id).datasource(DATASOURCE)
    if fmt is not None:
        q = q.format(fmt)
    return q.instant() if instant else q.range()


def fixed_color(color: str) -> list[dash_m.DynamicConfigValue]:
    return [dash_m.DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": color})]


def legend_table() -> common_b.VizLegendOptions:
    return (
        common_b.VizLegendOptions()
        .display_mode(common_m.LegendDisplayMode.TABLE)
        .placement(common_m.LegendPlacement.BOTTOM)
        .show_legend(True)
        .calcs(["mean", "max", "lastNotNull"])
    )


def timeseries(
    panel_id: int,
    title: str,
    description: str,
    targets: Sequence[prom_b.Dataquery],
    *,
    unit: str,
    width: int,
    height: int = 9,
    bars: bool = False,
    stacked: bool = False,
) -> ts_b.Panel:
    panel = (
        ts_b.Panel()
        .id(panel_id)
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(list(targets))
        .unit(unit)
        .min(0)
        .span(width)
        .height(height)
        .legend(legend_table())
        .tooltip(common_b.VizTooltipOptions().mode(common_m.TooltipDisplayMode.MULTI))
        .line_width(2)
        .fill_opacity(10)
        .show_points(common_m.VisibilityMode.NEVER)
    )
    if bars:
        panel = panel.draw_style(common_m.GraphDrawStyle.BARS).fill_opacity(60)
    if stacked:
        panel = panel.stacking(common_b.StackingConfig().mode(common_m.StackingMode.NORMAL))
    return panel


def row(panel_id: int, title: str) -> dash_b.Row:
    return dash_b.Row(title).id(panel_id).collapsed(False)


# --- panels -------------------------------------------------------------------------------


def counters_against_each_other(panel_id: int) -> ts_b.Panel:
    # Summed per job only: three lines per job in three fixed colours. The per-transport
    # and per-server breakdown is the co-occurrence panel's job.
    by = "job"
    legend = "{{job}}"
    return (
        timeseries(
            panel_id,
            "Unknown-id, missing and null-id responses per second",
            "The three pairing counters on one chart, so their co-occurrence is visible: "
            "unknown and missing rising together = duplicate ids; null ids (with the missing "
            "responses they leave behind) = a malformed request element; missing alone = "
            "dropped responses or timeouts; unknown alone = the server echoes ids wrongly. "
            "See the runbook linked from the dashboard.",
            [
                query(f"sum by ({by}) ({R_UNKNOWN}{sel()})", f"unknown id {legend}", "A"),
                query(f"sum by ({by}) ({R_MISSING}{sel()})", f"missing {legend}", "B"),
                query(f"sum by ({by}) ({R_NULL}{sel()})", f"null id {legend}", "C"),
            ],
            unit="reqps",
            width=16,
        )
        .override_by_regexp("^unknown id.*", fixed_color(COLOR_UNKNOWN))
        .override_by_regexp("^missing.*", fixed_color(COLOR_MISSING))
        .override_by_regexp("^null id.*", fixed_color(COLOR_NULL))
    )


def diagnosis_totals(panel_id: int) -> stat_b.Panel:
    return (
        stat_b.Panel()
        .id(panel_id)
        .title("Batches closed by diagnosis (time range)")
        .description(
            "pairwatch's own verdict on every closed batch, summed over the dashboard's time "
            "range. Anything but `ok` names a diagnosis explained in the runbook."
        )
        .datasource(DATASOURCE)
        .targets(
            [
                query(
                    f"sum by (pairwatch_diagnosis) (increase(batch_closed_total{sel()}[$__range]))",
                    "{{pairwatch_diagnosis}}",
                    "A",
                    instant=True,
                )
            ]
        )
        .unit("short")
        .decimals(0)
        .span(8)
        .height(9)
        .graph_mode(common_m.BigValueGraphMode.NONE)
        .color_mode(common_m.BigValueColorMode.BACKGROUND)
        .text_mode(common_m.BigValueTextMode.VALUE_AND_NAME)
        .orientation(common_m.VizOrientation.HORIZONTAL)
        .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .thresholds(
            dash_b.ThresholdsConfig()
            .mode(dash_m.ThresholdsMode.ABSOLUTE)
            .steps(
                [
                    dash_m.Threshold(value=None, color="green"),
                    dash_m.Threshold(value=1, color="red"),
                ]
            )
        )
        .override_by_name("ok", fixed_color("green"))
    )


def co_occurrence(panel_id: int) -> ts_b.Panel:
    unknown = f"(sum by ({BY}) ({R_UNKNOWN}{sel()}) > 0)"
    missing = f"(sum by ({BY}) ({R_MISSING}{sel()}) > 0)"
    null = f"(sum by ({BY}) ({R_NULL}{sel()}) > 0)"
    on = f"on ({BY})"
    return (
        timeseries(
            panel_id,
            "Diagnosis read from the counters (co-occurrence per job / transport / server)",
            "Each series is present only while its pattern holds for a job/transport/server "
            "over the last 5m; its value is the rate of the leading counter. The patterns "
            "are exclusive and follow pairwatch's own order of blame (pairwatch.diagnosis): "
            "Duplicate ids: unknown AND missing both rising. Malformed request element: "
            "null ids, otherwise (a request answered with id null also counts as missing). "
            "Dropped responses / timeouts: missing alone. Server id echo fault: unknown "
            "alone.",
            [
                query(f"{unknown} and {on} {missing}", f"duplicate ids: {TARGET_LEGEND}", "A"),
                query(
                    f"{null} unless {on} ({unknown} and {on} {missing})",
                    f"malformed request element: {TARGET_LEGEND}",
                    "B",
                ),
                query(
                    f"{missing} unless {on} ({unknown} or {null})",
                    f"dropped responses / timeouts: {TARGET_LEGEND}",
                    "C",
                ),
                query(
                    f"{unknown} unless {on} ({missing} or {null})",
                    f"server id echo fault: {TARGET_LEGEND}",
                    "D",
                ),
            ],
            unit="reqps",
            width=12,
            bars=True,
        )
        .override_by_regexp("^duplicate ids.*", fixed_color("dark-red"))
        .override_by_regexp("^malformed.*", fixed_color(COLOR_NULL))
        .override_by_regexp("^dropped.*", fixed_color(COLOR_MISSING))
        .override_by_regexp("^server id echo.*", fixed_color(COLOR_UNKNOWN))
    )


def closed_by_diagnosis(panel_id: int) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Batches closed per second by diagnosis (excluding ok)",
        "batch_closed_total by pairwatch_diagnosis: the ledger's verdict per batch, which also "
        "tells apart cases the counters alone cannot (id_type_mismatch: the server echoed "
        '"0" for 0).',
        [
            query(
                f"sum by (pairwatch_diagnosis) ({R_CLOSED}{sel(NOT_OK)})",
                "{{pairwatch_diagnosis}}",
                "A",
            )
        ],
        unit="ops",
        width=12,
        bars=True,
        stacked=True,
    )


def batches_per_second(panel_id: int) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Batches per second by transport and server",
        "Closed batches (single requests included) per second.",
        [
            query(
                f"sum by (pairwatch_transport, server_address) ({R_CLOSED}{sel()})",
                "{{pairwatch_transport}} {{server_address}}",
                "A",
            )
        ],
        unit="ops",
        width=8,
    )


def count_mismatch(panel_id: int) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Response count mismatch (batches per second)",
        "Batches whose count of non-null-id responses differs from the requests sent. A "
        "client pairing by position returns wrong results for these.",
        [
            query(
                f"sum by (pairwatch_transport, server_address) ({R_MISMATCH}{sel()})",
                "{{pairwatch_transport}} {{server_address}}",
                "A",
            )
        ],
        unit="ops",
        width=8,
    )


def out_of_order_share(panel_id: int) -> ts_b.Panel:
    by = "pairwatch_transport, server_address"
    return timeseries(
        panel_id,
        "Out-of-order share of batches",
        "batch_out_of_order_total / batch_closed_total: batches whose responses came back in "
        "another order than the requests. Legal in JSON-RPC, fatal for position pairing.",
        [
            query(
                f"sum by ({by}) ({R_OUT_OF_ORDER}{sel()}) / sum by ({by}) ({R_CLOSED}{sel()})",
                "{{pairwatch_transport}} {{server_address}}",
                "A",
            )
        ],
        unit="percentunit",
        width=8,
    ).max(1)


def batch_size_heatmap(panel_id: int) -> heatmap_b.Panel:
    return (
        heatmap_b.Panel()
        .id(panel_id)
        .title("Batch size distribution")
        .description("Elements per batch sent (requests + notifications), from batch_size_bucket.")
        .datasource(DATASOURCE)
        .targets(
            [
                query(
                    f"sum by (le) ({R_SIZE}{sel()})",
                    "{{le}}",
                    "A",
                    fmt=prom_m.PromQueryFormat.HEATMAP,
                )
            ]
        )
        .calculate(False)
        .y_axis(heatmap_b.YAxisConfig().unit("short").decimals(0))
        .color(
            heatmap_b.HeatmapColorOptions()
            .mode(heatmap_m.HeatmapColorMode.SCHEME)
            .scheme("Blues")
            .steps(64)
        )
        .cell_values(heatmap_b.CellValues().unit("ops"))
        .span(12)
        .height(9)
    )


def batch_size_percentiles(panel_id: int) -> ts_b.Panel:
    inner = f"sum by (le) ({R_SIZE}{sel()})"
    return timeseries(
        panel_id,
        "Batch size p50 / p95 / p99",
        "Percentiles of elements per batch, interpolated from the histogram buckets.",
        [
            query(f"histogram_quantile({q}, {inner})", f"p{int(q * 100)}", ref)
            for q, ref in ((0.5, "A"), (0.95, "B"), (0.99, "C"))
        ],
        unit="short",
        width=12,
    )


def pair_latency(panel_id: int) -> ts_b.Panel:
    inner = f"sum by (rpc_method, le) ({R_LATENCY}{sel(METHOD)})"
    return timeseries(
        panel_id,
        "Pair latency p50 / p95 / p99 by method",
        "Send -> paired response, one observation per paired id, by rpc_method (capped at 32 "
        "methods per process, then _OTHER).",
        [
            query(f"histogram_quantile({q}, {inner})", f"p{int(q * 100)} {{{{rpc_method}}}}", ref)
            for q, ref in ((0.5, "A"), (0.95, "B"), (0.99, "C"))
        ],
        unit="s",
        width=12,
    )


def missing_by_method(panel_id: int) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Missing responses per second by method",
        "Requests still pending when their batch closed, by rpc_method.",
        [
            query(
                f"sum by (rpc_method) ({R_MISSING}{sel(METHOD)})",
                "{{rpc_method}}",
                "A",
            )
        ],
        unit="reqps",
        width=12,
    )


def duplicate_ids(panel_id: int) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Duplicate ids sent per second",
        "Requests sent with an id already pending: in_batch (twice in one batch) or "
        "cross_batch (pending in another open batch of the same channel).",
        [
            query(
                f"sum by (pairwatch_duplicate_scope) ({R_DUPLICATE}{sel()})",
                "{{pairwatch_duplicate_scope}}",
                "A",
            )
        ],
        unit="reqps",
        width=8,
    )


def invalid_responses(panel_id: int) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Invalid responses per second by reason",
        "Received elements that break the JSON-RPC 2.0 response rules (they still pair by id).",
        [query(f"sum by (pairwatch_reason) ({R_INVALID}{sel()})", "{{pairwatch_reason}}", "A")],
        unit="reqps",
        width=8,
    )


def violations_and_errors(panel_id: int) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Protocol violations and pairwatch internal errors",
        "Replies to batches that expected none (and similar), and failures inside pairwatch "
        "that were swallowed so the client never saw them.",
        [
            query(
                "sum by (pairwatch_reason) "
                f"(rate(batch_protocol_violation_total{sel()}[$__rate_interval]))",
                "violation: {{pairwatch_reason}}",
                "A",
            ),
            query(
                "sum by (pairwatch_error_kind) "
                f"(rate(pairwatch_internal_errors_total{sel()}[$__rate_interval]))",
                "internal error: {{pairwatch_error_kind}}",
                "B",
            ),
        ],
        unit="ops",
        width=8,
    )


# --- template variables -------------------------------------------------------------------


def label_variable(name: str, label: str, query_text: str) -> dash_b.QueryVariable:
    return (
        dash_b.QueryVariable(name)
        .label(label)
        .datasource(DATASOURCE)
        .query(query_text)
        .refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dash_m.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(dash_m.VariableOption(selected=True, text="All", value="$__all"))
    )


def variables() -> list[dash_b.DatasourceVariable | dash_b.QueryVariable]:
    return [
        dash_b.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        label_variable("job", "Job", "label_values(batch_closed_total, job)"),
        label_variable(
            "transport",
            "Transport",
            'label_values(batch_closed_total{job=~"$job"}, pairwatch_transport)',
        ),
        label_variable(
            "server",
            "Server",
            'label_values(batch_closed_total{job=~"$job", pairwatch_transport=~"$transport"}, '
            "server_address)",
        ),
        label_variable(
            "method",
            "Method",
            "label_values(batch_pair_latency_seconds_count{" + SEL + "}, rpc_method)",
        ),
    ]


def build_dashboard() -> dash_m.Dashboard:
    board = (
        dash_b.Dashboard("pairwatch: JSON-RPC response pairing")
        .uid(DASHBOARD_UID)
        .description(
            "JSON-RPC 2.0 response pairing seen by pairwatch: unknown-id, missing and null-id "
            "responses read together, per-batch diagnoses, batch sizes, pair latency and id "
            "hygiene. Needs dashboards/rules/pairwatch-recording.yaml loaded in Prometheus."
        )
        .tags(["pairwatch", "jsonrpc", "opentelemetry"])
        .editable()
        .timezone("browser")
        .time("now-1h", "now")
        .refresh("30s")
        .tooltip(dash_m.DashboardCursorSync.CROSSHAIR)
        .link(
            dash_b.DashboardLink("Runbook")
            .type(dash_m.DashboardLinkType.LINK)
            .url(RUNBOOK_URL)
            .icon("doc")
            .target_blank(True)
        )
    )
    for variable in variables():
        board = board.with_variable(variable)

    board = (
        board.with_row(row(1, "Pairing failures: the three counters read together"))
        .with_panel(counters_against_each_other(2))
        .with_panel(diagnosis_totals(3))
        .with_row(row(4, "Diagnosis"))
        .with_panel(co_occurrence(5))
        .with_panel(closed_by_diagnosis(6))
        .with_row(row(7, "Batches"))
        .with_panel(batches_per_second(8))
        .with_panel(count_mismatch(9))
        .with_panel(out_of_order_share(10))
        .with_panel(batch_size_heatmap(11))
        .with_panel(batch_size_percentiles(12))
        .with_row(row(13, "Latency and missing responses by method"))
        .with_panel(pair_latency(14))
        .with_panel(missing_by_method(15))
        .with_row(row(16, "Id hygiene and protocol"))
        .with_panel(duplicate_ids(17))
        .with_panel(invalid_responses(18))
        .with_panel(violations_and_errors(19))
    )
    return board.build()


def render() -> str:
    """The dashboard as the exact text committed in dashboards/pairwatch.json."""
    return json.dumps(build_dashboard(), cls=JSONEncoder, indent=2, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="file to write")
    parser.add_argument(
        "--check", action="store_true", help="compare with --output instead of writing it"
    )
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is stale: run python dashboards/generate.py", file=sys.stderr)
            return 1
        return 0
    args.output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
