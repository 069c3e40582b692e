"""The evidence under the top row: diagnoses over the range, the raw counters, close reasons.

In the collapsed details row since issue 43 (the top row, panels_top.py, answers first).
Each panel says in its description what the numbers are and links to the runbook section
that says what to do (`runbook` is the base URL chosen by generate.py).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import stat as stat_b
from grafana_foundation_sdk.builders import timeseries as ts_b
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dash_m
from panel_kit import (
    COLOR_LATE,
    COLOR_MISSING,
    COLOR_NULL,
    COLOR_UNKNOWN,
    DATASOURCE,
    fixed_color,
    query,
    runbook_link,
    timeseries,
)
from promql import (
    LIVE,
    R_CLOSED,
    R_LATE,
    R_MISSING,
    R_NULL,
    R_UNKNOWN,
    R_WITHDRAWN,
    sel,
)

# --- who is at fault ------------------------------------------------------------------------


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
                    "sum by (job, pairwatch_diagnosis) "
                    f"(increase(batch_closed_total{sel(LIVE)}[$__range]))",
                    "{{job}} {{pairwatch_diagnosis}}",
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
        .override_by_regexp(".* ok$", fixed_color("green"))
        .links([runbook_link(runbook, "reading-the-diagnoses")])
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


def closed_by_close_reason(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Batches closed per second by close reason",
        "How batches ended: complete and body_end are normal; timeout, stream_dropped and "
        "evicted are where missing responses come from.",
        [
            query(
                f"sum by (job, pairwatch_close_reason) ({R_CLOSED}{sel()})",
                "{{job}} {{pairwatch_close_reason}}",
                "A",
            )
        ],
        unit="ops",
        width=8,
        runbook=runbook,
        anchor="missing-replies-an-availability-slo",
        stacked=True,
    )
