"""Shared builders for the pairwatch dashboard's panels (grafana-foundation-sdk).

One place for how every panel looks (legend, tooltip, line style), how it names its data
source, and how it links to its runbook section, so the panel modules only say what each
panel shows.
"""

from __future__ import annotations

from collections.abc import Sequence

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import prometheus as prom_b
from grafana_foundation_sdk.builders import timeseries as ts_b
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dash_m
from grafana_foundation_sdk.models import prometheus as prom_m

from pairwatch.alerting import blame
from pairwatch.pairing.diagnosis import RESPONSES_MISSING

DATASOURCE = dash_m.DataSourceRef(type_val="prometheus", uid="${datasource}")

# Colours kept fixed so the counters read the same on every panel.
COLOR_UNKNOWN = "orange"
COLOR_MISSING = "red"
COLOR_NULL = "purple"
COLOR_LATE = "yellow"

TARGET_LEGEND = (
    "{{job}} / {{pairwatch_transport}} / {{server_address}} {{server_port}} {{pairwatch_side}}"
)

# Who is at fault per diagnosis, shown in the legend: blame.py's mapping (the alerts route on
# it), plus responses_missing, whose side is its close reason's (the split panel shows which).
AT_FAULT = {
    **blame.BY_DIAGNOSIS,
    RESPONSES_MISSING: blame.SERVER_OR_NETWORK,
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
    min_zero: bool = True,
) -> ts_b.Panel:
    panel = (
        ts_b.Panel()
        .id(panel_id)
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .targets(list(targets))
        .unit(unit)
        .span(width)
        .height(height)
        .legend(legend_table())
        .tooltip(common_b.VizTooltipOptions().mode(common_m.TooltipDisplayMode.MULTI))
        .line_width(2)
        .fill_opacity(10)
        .show_points(common_m.VisibilityMode.NEVER)
        .links([runbook_link(runbook, anchor)])
    )
    if min_zero:
        panel = panel.min(0)
    if bars:
        panel = panel.draw_style(common_m.GraphDrawStyle.BARS).fill_opacity(60)
    if stacked:
        panel = panel.stacking(common_b.StackingConfig().mode(common_m.StackingMode.NORMAL))
    return panel


def dashed_series(panel: ts_b.Panel, name_regexp: str) -> ts_b.Panel:
    """Draw the series whose name matches `name_regexp` dashed: a baseline or a threshold
    that comes from a query (yesterday's traffic, the exported objective), not a line."""
    return panel.override_by_regexp(
        name_regexp,
        [
            dash_m.DynamicConfigValue(
                id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}
            )
        ],
    )


def dashed(panel: ts_b.Panel, *steps: tuple[float, str]) -> ts_b.Panel:
    """Draw `steps` (value, colour) as dashed lines: where an alert starts to count."""
    return panel.thresholds(threshold_lines(*steps)).thresholds_style(
        common_b.GraphThresholdsStyleConfig().mode(common_m.GraphThresholdsStyleMode.DASHED)
    )
