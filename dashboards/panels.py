"""The panels that say who is at fault and what callers suffer, and the evidence under them.

Each panel says in its description what the numbers are and links to the runbook section
that says what to do (`runbook` is the base URL chosen by generate.py). Alert thresholds
drawn here come from alerts.py, so a dashed line is exactly where an alert starts to count.
"""

from __future__ import annotations

import alerts
from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import stat as stat_b
from grafana_foundation_sdk.builders import timeseries as ts_b
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dash_m
from panel_kit import (
    AT_FAULT,
    COLOR_LATE,
    COLOR_MISSING,
    COLOR_NULL,
    COLOR_UNKNOWN,
    DATASOURCE,
    DIAGNOSIS_COLORS,
    TARGET_LEGEND,
    dashed,
    fixed_color,
    query,
    runbook_link,
    timeseries,
)
from promql import (
    BY,
    NOT_OK,
    R_CLOSED,
    R_LATE,
    R_MISSING,
    R_NULL,
    R_REQUESTS,
    R_UNKNOWN,
    R_WITHDRAWN,
    sel,
)

# --- who is at fault ------------------------------------------------------------------------


def diagnosis_share(panel_id: int, runbook: str) -> ts_b.Panel:
    client = next(a for a in alerts.DIAGNOSIS_ALERTS if a.diagnosis == "client_duplicate_ids")
    server = max(a.min_share for a in alerts.DIAGNOSIS_ALERTS if a is not client)
    closed = f"sum by () ({R_CLOSED}{sel()})"
    panel = dashed(
        timeseries(
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
        ),
        (client.min_share, "red"),
        (server, "orange"),
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
    return dashed(
        timeseries(
            panel_id,
            "Missing responses: share of requests",
            "Requests still pending when their batch closed, over requests sent, per job / "
            "transport / server / side. The dashed line is "
            f"{alerts.percent(alerts.PAGE_BURNS[0].factor * alerts.DEFAULT.budget)}, "
            f"{alerts.PAGE_BURNS[0].factor:g} times the budget of the default "
            f"{alerts.percent(alerts.DEFAULT.objective)} objective: the fast-burn page fires "
            f"where the share stays above it over both {alerts.PAGE_BURNS[0].long} and "
            f"{alerts.PAGE_BURNS[0].short} (with at least {alerts.BURN_MIN_ERRORS} missing).",
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
            anchor="missing-replies-an-availability-slo",
        ),
        (alerts.PAGE_BURNS[0].factor * alerts.DEFAULT.budget, "red"),
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
            "Late replies are unknown-id replies for ids that had already timed out. "
            "Withdrawn requests (grey) are the caller's own cancellations: shown, "
            "never a fault.",
            [
                query(f"sum by (job) ({R_UNKNOWN}{sel()})", f"unknown id {legend}", "A"),
                query(f"sum by (job) ({R_MISSING}{sel()})", f"missing {legend}", "B"),
                query(f"sum by (job) ({R_NULL}{sel()})", f"null id {legend}", "C"),
                query(f"sum by (job) ({R_LATE}{sel()})", f"late {legend}", "D"),
                query(f"sum by (job) ({R_WITHDRAWN}{sel()})", f"withdrawn {legend}", "E"),
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
        .override_by_regexp("^withdrawn.*", fixed_color("grey"))
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
        anchor="missing-replies-an-availability-slo",
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
        anchor="missing-replies-an-availability-slo",
        stacked=True,
    )
