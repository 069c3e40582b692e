"""The traffic panels: batches, sizes, latency and late replies, id hygiene and protocol,
and pairwatch's own errors. Same conventions as panels.py (runbook link per panel).
"""

from __future__ import annotations

import alerts
from grafana_foundation_sdk.builders import heatmap as heatmap_b
from grafana_foundation_sdk.builders import timeseries as ts_b
from grafana_foundation_sdk.models import heatmap as heatmap_m
from grafana_foundation_sdk.models import prometheus as prom_m
from panel_kit import (
    DATASOURCE,
    TARGET_LEGEND,
    dashed,
    query,
    runbook_link,
    timeseries,
)
from promql import (
    BY,
    LIVE,
    R_CLOSED,
    R_DUPLICATE,
    R_INVALID,
    R_LATENESS,
    R_MISMATCH,
    R_OUT_OF_ORDER,
    R_SIZE,
    TARGET_SEL,
    bucket_upper_bound_quantile,
    sel,
)

# --- batches --------------------------------------------------------------------------------


def batches_per_second(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Batches per second by transport and server",
        "Closed batches (single requests included) per second.",
        [
            query(
                "sum by (job, pairwatch_transport, server_address, server_port) "
                f"({R_CLOSED}{sel()})",
                "{{job}} {{pairwatch_transport}} {{server_address}} {{server_port}}",
                "A",
            )
        ],
        unit="ops",
        width=8,
        runbook=runbook,
        anchor="reading-the-counters",
    )


def count_mismatch(panel_id: int, runbook: str) -> ts_b.Panel:
    return dashed(
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
        ),
        (alerts.MISMATCH_MIN_SHARE, "blue"),
    )


def out_of_order_share(panel_id: int, runbook: str) -> ts_b.Panel:
    by = "job, pairwatch_transport, server_address, server_port"
    return timeseries(
        panel_id,
        "Out-of-order share of batches",
        "batch_out_of_order_total / batch_closed_total: batches whose responses came back in "
        "another order than the requests. Legal in JSON-RPC, fatal for position pairing.",
        [
            query(
                f"sum by ({by}) ({R_OUT_OF_ORDER}{sel()}) / sum by ({by}) ({R_CLOSED}{sel()})",
                "{{job}} {{pairwatch_transport}} {{server_address}} {{server_port}}",
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


# --- id hygiene and protocol ----------------------------------------------------------------


def duplicate_ids(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Duplicate ids sent per second",
        "Requests sent with an id already pending: in_batch (twice in one batch) or "
        "cross_batch (pending in another open batch of the same channel).",
        [
            query(
                f"sum by (job, pairwatch_duplicate_scope) ({R_DUPLICATE}{sel()})",
                "{{job}} {{pairwatch_duplicate_scope}}",
                "A",
            )
        ],
        unit="reqps",
        width=8,
        runbook=runbook,
        anchor="pairwatchclientduplicateids",
    )


def invalid_responses(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Invalid responses per second by reason",
        "Received elements that break the JSON-RPC 2.0 response rules (they still pair by id).",
        [
            query(
                f"sum by (job, pairwatch_reason) ({R_INVALID}{sel()})",
                "{{job}} {{pairwatch_reason}}",
                "A",
            )
        ],
        unit="reqps",
        width=8,
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
                "sum by (job, pairwatch_reason) "
                f"(rate(batch_protocol_violation_total{sel(LIVE)}[$__rate_interval]))",
                "{{job}} {{pairwatch_reason}}",
                "A",
            )
        ],
        unit="ops",
        width=12,
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
        width=12,
        runbook=runbook,
        anchor="pairwatch-internal-errors-panel",
    )
