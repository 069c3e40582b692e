"""The panels of the pairwatch dashboard, built with grafana-foundation-sdk.

Each panel says in its description what the numbers are and links to the runbook section
that says what to do about them (`runbook` is the base URL chosen by generate.py). The
queries come from promql.py; the alert thresholds drawn on panels come from alerts.py, so a
line on a chart is exactly where the alert starts to count.
"""

from __future__ import annotations

from collections.abc import Sequence

import alerts
from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import heatmap as heatmap_b
from grafana_foundation_sdk.builders import prometheus as prom_b
from grafana_foundation_sdk.builders import stat as stat_b
from grafana_foundation_sdk.builders import timeseries as ts_b
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dash_m
from grafana_foundation_sdk.models import heatmap as heatmap_m
from grafana_foundation_sdk.models import prometheus as prom_m
from promql import (
    BY,
    METHOD,
    NOT_OK,
    R_CLOSED,
    R_DUPLICATE,
    R_INVALID,
    R_LATE,
    R_LATENCY,
    R_LATENESS,
    R_MISMATCH,
    R_MISSING,
    R_NULL,
    R_OUT_OF_ORDER,
    R_REQUESTS,
    R_SIZE,
    R_UNKNOWN,
    TARGET_SEL,
    bucket_upper_bound_quantile,
    sel,
)

DATASOURCE = dash_m.DataSourceRef(type_val="prometheus", uid="${datasource}")

# Colours kept fixed so the counters read the same on every panel.
COLOR_UNKNOWN = "orange"
COLOR_MISSING = "red"
COLOR_NULL = "purple"
COLOR_LATE = "yellow"

TARGET_LEGEND = "{{job}} / {{pairwatch_transport}} / {{server_address}} {{pairwatch_side}}"

# Who is at fault per diagnosis (DESIGN.md, "blame from evidence"): shown in the legend.
AT_FAULT = {
    "client_duplicate_ids": "client",
    "malformed_request_element": "client",
    "id_type_mismatch": "server",
    "server_null_id": "server",
    "late_response": "timeout vs server latency",
    "server_id_echo_fault": "server",
    "responses_missing": "server or network",
}
DIAGNOSIS_COLORS = {
    "client_duplicate_ids": "dark-red",
    "malformed_request_element": "purple",
    "id_type_mismatch": "blue",
    "server_null_id": "light-purple",
    "late_response": COLOR_LATE,
    "server_id_echo_fault": COLOR_UNKNOWN,
    "responses_missing": COLOR_MISSING,
}


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


def runbook_link(runbook: str, anchor: str) -> dash_b.DashboardLink:
    return dash_b.DashboardLink("Runbook").url(f"{runbook}#{anchor}").target_blank(True)


def legend_table() -> common_b.VizLegendOptions:
    return (
        common_b.VizLegendOptions()
        .display_mode(common_m.LegendDisplayMode.TABLE)
        .placement(common_m.LegendPlacement.BOTTOM)
        .show_legend(True)
        .calcs(["mean", "max", "lastNotNull"])
    )


def threshold_lines(*steps: tuple[float, str]) -> dash_b.ThresholdsConfig:
    return (
        dash_b.ThresholdsConfig()
        .mode(dash_m.ThresholdsMode.ABSOLUTE)
        .steps(
            [dash_m.Threshold(value=None, color="transparent")]
            + [dash_m.Threshold(value=value, color=color) for value, color in steps]
        )
    )


def timeseries(
    panel_id: int,
    title: str,
    description: str,
    targets: Sequence[prom_b.Dataquery],
    *,
    unit: str,
    width: int,
    runbook: str,
    anchor: str,
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
        .links([runbook_link(runbook, anchor)])
    )
    if bars:
        panel = panel.draw_style(common_m.GraphDrawStyle.BARS).fill_opacity(60)
    if stacked:
        panel = panel.stacking(common_b.StackingConfig().mode(common_m.StackingMode.NORMAL))
    return panel


# --- who is at fault ------------------------------------------------------------------------


def diagnosis_share(panel_id: int, runbook: str) -> ts_b.Panel:
    client = next(a for a in alerts.DIAGNOSIS_ALERTS if a.diagnosis == "client_duplicate_ids")
    server = max(a.min_share for a in alerts.DIAGNOSIS_ALERTS if a is not client)
    closed = f"sum by () ({R_CLOSED}{sel()})"
    panel = timeseries(
        panel_id,
        "Diagnosis: share of closed batches (who is at fault)",
        "pairwatch's per-batch verdict from what it saw on the wire (pairwatch_diagnosis), as "
        "a share of all batches closed; the legend names the side the evidence blames. "
        f"Lines: {alerts.percent(client.min_share)} (red), where PairwatchClientDuplicateIds "
        f"starts to count, and {alerts.percent(server)} (orange), where the warning alerts "
        f"do; each alert also needs {client.min_batches} batches in {alerts.WINDOW}.",
        [
            query(
                f"sum by (pairwatch_diagnosis) ({R_CLOSED}{sel(NOT_OK)}) "
                f"/ ignoring (pairwatch_diagnosis) group_left () {closed}",
                "{{pairwatch_diagnosis}}",
                "A",
            )
        ],
        unit="percentunit",
        width=12,
        runbook=runbook,
        anchor="reading-the-diagnoses",
    ).thresholds(threshold_lines((client.min_share, "red"), (server, "orange")))
    panel = panel.thresholds_style(
        common_b.GraphThresholdsStyleConfig().mode(common_m.GraphThresholdsStyleMode.DASHED)
    )
    for diagnosis, side in AT_FAULT.items():
        panel = panel.override_by_name(
            diagnosis,
            [
                dash_m.DynamicConfigValue(id_val="displayName", value=f"{diagnosis} ({side})"),
                *fixed_color(DIAGNOSIS_COLORS[diagnosis]),
            ],
        )
    return panel


def diagnosis_totals(panel_id: int, runbook: str) -> stat_b.Panel:
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
        .span(4)
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
        .links([runbook_link(runbook, "reading-the-diagnoses")])
    )


def missing_share(panel_id: int, runbook: str) -> ts_b.Panel:
    return (
        timeseries(
            panel_id,
            "Missing responses: share of requests",
            "Requests still pending when their batch closed, over requests sent, per job / "
            "transport / server / side (the alert's grouping). The dashed line is "
            f"PairwatchMissingResponses' {alerts.percent(alerts.MISSING_MIN_SHARE)}; the alert "
            f"also needs {alerts.MISSING_MIN_COUNT} missing in {alerts.WINDOW}, so a quiet job "
            "above the line with a handful of timeouts does not page.",
            [
                query(
                    f"sum by ({BY}) ({R_MISSING}{sel()}) / sum by ({BY}) ({R_REQUESTS}{sel()})",
                    TARGET_LEGEND,
                    "A",
                )
            ],
            unit="percentunit",
            width=8,
            runbook=runbook,
            anchor="pairwatchmissingresponses",
        )
        .thresholds(threshold_lines((alerts.MISSING_MIN_SHARE, "red")))
        .thresholds_style(
            common_b.GraphThresholdsStyleConfig().mode(common_m.GraphThresholdsStyleMode.DASHED)
        )
    )


def counters_against_each_other(panel_id: int, runbook: str) -> ts_b.Panel:
    legend = "{{job}}"
    return (
        timeseries(
            panel_id,
            "Unknown-id, missing, null-id and late responses per second",
            "The raw pairing counters on one chart, per job. They are the evidence under the "
            "diagnoses, not a diagnosis: unknown and missing rising together can be a server "
            "rewriting ids as well as a client reusing them; the diagnosis panel says which. "
            "Late replies are unknown-id replies for ids that had already timed out.",
            [
                query(f"sum by (job) ({R_UNKNOWN}{sel()})", f"unknown id {legend}", "A"),
                query(f"sum by (job) ({R_MISSING}{sel()})", f"missing {legend}", "B"),
                query(f"sum by (job) ({R_NULL}{sel()})", f"null id {legend}", "C"),
                query(f"sum by (job) ({R_LATE}{sel()})", f"late {legend}", "D"),
            ],
            unit="reqps",
            width=12,
            runbook=runbook,
            anchor="reading-the-counters",
        )
        .override_by_regexp("^unknown id.*", fixed_color(COLOR_UNKNOWN))
        .override_by_regexp("^missing.*", fixed_color(COLOR_MISSING))
        .override_by_regexp("^null id.*", fixed_color(COLOR_NULL))
        .override_by_regexp("^late.*", fixed_color(COLOR_LATE))
    )


def missing_by_close_reason(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Missing responses per second by close reason",
        "Why requests went unanswered: timeout, body_end (the reply body had fewer responses), "
        "stream_dropped / stream_end, send_failed, evicted, ... (docs/metrics.md lists them).",
        [
            query(
                f"sum by (pairwatch_close_reason) ({R_MISSING}{sel()})",
                "{{pairwatch_close_reason}}",
                "A",
            )
        ],
        unit="reqps",
        width=6,
        runbook=runbook,
        anchor="pairwatchmissingresponses",
        bars=True,
        stacked=True,
    )


def closed_by_close_reason(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Batches closed per second by close reason",
        "How batches ended: complete and body_end are normal; timeout, stream_dropped and "
        "evicted are where missing responses come from.",
        [
            query(
                f"sum by (pairwatch_close_reason) ({R_CLOSED}{sel()})",
                "{{pairwatch_close_reason}}",
                "A",
            )
        ],
        unit="ops",
        width=6,
        runbook=runbook,
        anchor="pairwatchmissingresponses",
        stacked=True,
    )


# --- batches --------------------------------------------------------------------------------


def batches_per_second(panel_id: int, runbook: str) -> ts_b.Panel:
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
        runbook=runbook,
        anchor="reading-the-counters",
    )


def count_mismatch(panel_id: int, runbook: str) -> ts_b.Panel:
    return (
        timeseries(
            panel_id,
            "Response count mismatch: share of batches",
            "Batches whose count of non-null-id responses differs from the requests sent, over "
            "batches closed. A client pairing by position returns wrong results for these. The "
            f"line is the info alert's {alerts.percent(alerts.MISMATCH_MIN_SHARE)}.",
            [
                query(
                    f"sum by ({BY}) ({R_MISMATCH}{sel()}) / sum by ({BY}) ({R_CLOSED}{sel()})",
                    TARGET_LEGEND,
                    "A",
                )
            ],
            unit="percentunit",
            width=8,
            runbook=runbook,
            anchor="pairwatchresponsecountmismatch",
        )
        .thresholds(threshold_lines((alerts.MISMATCH_MIN_SHARE, "blue")))
        .thresholds_style(
            common_b.GraphThresholdsStyleConfig().mode(common_m.GraphThresholdsStyleMode.DASHED)
        )
    )


def out_of_order_share(panel_id: int, runbook: str) -> ts_b.Panel:
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
        runbook=runbook,
        anchor="out-of-order-batches-dashboard-only-no-alert",
    ).max(1)


def batch_size_heatmap(panel_id: int, runbook: str) -> heatmap_b.Panel:
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
        .links([runbook_link(runbook, "batch-sizes-dashboard-only")])
    )


def batch_size_percentiles(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Batch size p50 / p95 / p99 (at most N elements)",
        'The upper boundary of the histogram bucket holding each quantile: "p50 = 8" '
        "means half of the batches had at most 8 elements. Not interpolated, so batches that "
        "are always 8 read 8 (with power-of-two buckets), not 7.5.",
        [
            query(bucket_upper_bound_quantile(q, R_SIZE), f"p{int(q * 100)}", ref)
            for q, ref in ((0.5, "A"), (0.95, "B"), (0.99, "C"))
        ],
        unit="short",
        width=12,
        runbook=runbook,
        anchor="batch-sizes-dashboard-only",
    )


# --- latency --------------------------------------------------------------------------------


def pair_latency(panel_id: int, runbook: str) -> ts_b.Panel:
    inner = f"sum by (rpc_method, le) ({R_LATENCY}{sel(METHOD)})"
    return timeseries(
        panel_id,
        "Pair latency p50 / p95 / p99 by method",
        "Send -> paired response, one observation per paired id, by rpc_method (capped at 32 "
        "methods per process, then _OTHER). Compare p99 with the client's timeout.",
        [
            query(f"histogram_quantile({q}, {inner})", f"p{int(q * 100)} {{{{rpc_method}}}}", ref)
            for q, ref in ((0.5, "A"), (0.95, "B"), (0.99, "C"))
        ],
        unit="s",
        width=8,
        runbook=runbook,
        anchor="pairwatchlateresponses",
    )


def response_lateness(panel_id: int, runbook: str) -> ts_b.Panel:
    inner = f"sum by (le) ({R_LATENESS}{sel()})"
    return timeseries(
        panel_id,
        "Late replies: how long after the timeout (p50 / p90)",
        "batch_response_lateness_seconds: for replies to ids that had already closed as "
        "missing by timeout, how much later they came. Raising the client's timeout by about "
        "p90 would have caught most of them.",
        [
            query(f"histogram_quantile({q}, {inner})", f"p{int(q * 100)}", ref)
            for q, ref in ((0.5, "A"), (0.9, "B"))
        ],
        unit="s",
        width=8,
        runbook=runbook,
        anchor="pairwatchlateresponses",
    )


def missing_by_method(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Missing responses per second by method",
        "Requests still pending when their batch closed, by rpc_method.",
        [query(f"sum by (rpc_method) ({R_MISSING}{sel(METHOD)})", "{{rpc_method}}", "A")],
        unit="reqps",
        width=8,
        runbook=runbook,
        anchor="pairwatchmissingresponses",
    )


# --- id hygiene and protocol ----------------------------------------------------------------


def duplicate_ids(panel_id: int, runbook: str) -> ts_b.Panel:
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
        width=6,
        runbook=runbook,
        anchor="pairwatchclientduplicateids",
    )


def invalid_responses(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Invalid responses per second by reason",
        "Received elements that break the JSON-RPC 2.0 response rules (they still pair by id).",
        [query(f"sum by (pairwatch_reason) ({R_INVALID}{sel()})", "{{pairwatch_reason}}", "A")],
        unit="reqps",
        width=6,
        runbook=runbook,
        anchor="invalid-responses-and-protocol-violations-dashboard-only",
    )


def violations(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Protocol violations per second",
        "Replies to batches that expected none (notification-only batches answered), and similar.",
        [
            query(
                "sum by (pairwatch_reason) "
                f"(rate(batch_protocol_violation_total{sel()}[$__rate_interval]))",
                "{{pairwatch_reason}}",
                "A",
            )
        ],
        unit="ops",
        width=6,
        runbook=runbook,
        anchor="invalid-responses-and-protocol-violations-dashboard-only",
    )


def internal_errors(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "pairwatch internal errors per second (job / instance only)",
        "Failures inside pairwatch, swallowed so the client never saw them. Filtered by job "
        "and instance only: an internal error is not always tied to one transport or server, "
        "and must not vanish when one is selected.",
        [
            query(
                "sum by (job, instance, pairwatch_error_kind) "
                f"(rate(pairwatch_internal_errors_total{sel(base=TARGET_SEL)}[$__rate_interval]))",
                "{{job}} {{instance}} {{pairwatch_error_kind}}",
                "A",
            )
        ],
        unit="ops",
        width=6,
        runbook=runbook,
        anchor="pairwatch-internal-errors-dashboard-only",
    )
