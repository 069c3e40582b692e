"""The rows an on-call reads first: alive? who is hurting? whose fault? and per method.

One line per job and side everywhere up here (issue 43): the "All" view summed every job into
one line, so a fault on one job read as a fraction of itself and nobody could see whose it
was. A series that exists is drawn at 0, never as "No data": a healthy job has no fault
series at all, and "No data" reads like a dead job. Two patterns do that, both with the
request series as the source of the labels (never `vector(0)`, which carries no job):
`faults or 0 * requests` where a counter may not exist yet, and `or on (job, side)` a zero
line for the jobs with no fault.

Which side a missing reply blames is read from src/pairwatch/alerting/blame.py (the rules
and the runbook use the same mapping); the SLO objective is read from the SLO rules'
`job_server_side:pairwatch_slo_objective:ratio`, so an export with another `--objective`
draws its own budget without a different dashboard.
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
    DATASOURCE,
    DIAGNOSIS_COLORS,
    dashed_series,
    fixed_color,
    query,
    runbook_link,
    timeseries,
)
from promql import (
    JOB_SIDE,
    LATENCY_BUCKET,
    LIVE,
    METHOD,
    NOT_OK,
    R_CLOSED,
    R_LATENCY,
    R_LOST,
    R_MISSING,
    R_REQUESTS,
    SLO_SEL,
    sel,
)

from pairwatch.alerting import blame as b

JS_LEGEND = "{{job}} {{pairwatch_side}}"
YESTERDAY = "a day before"
OBJECTIVE = alerts.OBJECTIVE_RATIO
BUDGET_WINDOW = alerts.BUDGET_WINDOW
NO_FAULT = "no_fault"
# What each budget-spending blame means on the close-reason split (DESIGN.md's table).
SPLIT_WORDS = {
    b.SERVER: "answered without the ids (server)",
    b.SERVER_OR_NETWORK: "hung or unreachable (server or network)",
}


def _requests(selector: str) -> str:
    return f"sum by ({JOB_SIDE}) ({R_REQUESTS}{selector})"


def _objective() -> str:
    return f"max by ({JOB_SIDE}) ({OBJECTIVE}{{{SLO_SEL}}})"


# --- alive? ---------------------------------------------------------------------------------


def requests_per_second(panel_id: int, runbook: str) -> ts_b.Panel:
    now = _requests(sel())
    # A job seen in the dashboard's range but silent now reads 0, not a line that just ends.
    seen = f"sum by ({JOB_SIDE}) (0 * last_over_time({R_REQUESTS}{sel()}[$__range]))"
    return dashed_series(
        timeseries(
            panel_id,
            "Requests per second (dashed: the same time a day before)",
            "JSON-RPC requests sent (client side) or received (server side) per second, per "
            "job and side, against the same time a day earlier (offset 1d). A job that "
            "stopped fades out over its 5m rate window, then reads 0 for the rest of the "
            "range instead of vanishing; a job far under its dashed line is what "
            "PairwatchTrafficDrop pages on.",
            [
                query(f"{now}\nor on ({JOB_SIDE})\n{seen}", JS_LEGEND, "A"),
                query(
                    f"sum by ({JOB_SIDE}) ({R_REQUESTS}{sel()} offset 1d)",
                    f"{JS_LEGEND} {YESTERDAY}",
                    "B",
                ),
            ],
            unit="reqps",
            width=6,
            runbook=runbook,
            anchor="the-top-row-alive-who-is-hurting-whose-fault",
        ),
        f".* {YESTERDAY}$",
    )


def answered_share(panel_id: int, runbook: str) -> ts_b.Panel:
    missing = f"({_missing_of(sel())} or 0 * {_requests(sel())})"
    return dashed_series(
        timeseries(
            panel_id,
            "Answered: share of requests",
            "1 - missing replies / requests, per job and side (a request withdrawn by its "
            'caller is not missing). A healthy job reads 100%, not "No data". Dashed: the '
            "availability objective (the SLO rules' job_server_side:pairwatch_slo_objective:"
            "ratio, i.e. the --objective of your export).",
            [
                query(f"1 - {missing}\n/ {_requests(sel())}", JS_LEGEND, "A"),
                query(_objective(), f"{JS_LEGEND} objective", "B"),
            ],
            unit="percentunit",
            width=6,
            runbook=runbook,
            anchor="the-top-row-alive-who-is-hurting-whose-fault",
            min_zero=False,
        ),
        ".* objective$",
    )


def _missing_of(selector: str) -> str:
    return f"sum by ({JOB_SIDE}) ({R_MISSING}{selector})"


def budget_left(panel_id: int, runbook: str) -> stat_b.Panel:
    w = BUDGET_WINDOW
    requests = f"sum by ({JOB_SIDE}) ({alerts.REQUESTS_RATE.format(w=w)}{{{SLO_SEL}}})"
    errors = f"sum by ({JOB_SIDE}) ({alerts.ERRORS_RATE.format(w=w)}{{{SLO_SEL}}})"
    expr = f"1 - ({errors} or 0 * {requests})\n/ {requests}\n/ on ({JOB_SIDE}) (1 - {_objective()})"
    return (
        stat_b.Panel()
        .id(panel_id)
        .title(f"Error budget left ({w})")
        .description(
            f"The availability SLO's budget not yet spent over the last {w} (the longest "
            "window the SLO rules record), per job and side: 1 - (missing replies that blame "
            "the server or the network / requests) / (1 - objective). 100%: nothing spent; "
            "0%: the objective is missed over the window; below 0: overspent. A client's "
            "duplicate ids and pairwatch's own caps spend nothing (pairwatch-slo.yaml)."
        )
        .datasource(DATASOURCE)
        .targets([query(expr, JS_LEGEND, "A")])
        .unit("percentunit")
        .decimals(1)
        .span(6)
        .height(9)
        .graph_mode(common_m.BigValueGraphMode.AREA)
        .color_mode(common_m.BigValueColorMode.BACKGROUND)
        .text_mode(common_m.BigValueTextMode.VALUE_AND_NAME)
        .orientation(common_m.VizOrientation.HORIZONTAL)
        .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .thresholds(
            dash_b.ThresholdsConfig()
            .mode(dash_m.ThresholdsMode.ABSOLUTE)
            .steps(
                [
                    dash_m.Threshold(value=None, color="red"),
                    dash_m.Threshold(value=0, color="orange"),
                    dash_m.Threshold(value=0.5, color="green"),
                ]
            )
        )
        .links([runbook_link(runbook, "error-budget-left")])
    )


def _with_blame(expr: str) -> str:
    """`expr` with a `blame` label naming the side each diagnosis points at (blame.py)."""
    for side in dict.fromkeys(AT_FAULT.values()):
        names = "|".join(d for d, s in AT_FAULT.items() if s == side)
        expr = f'label_replace(\n{expr},\n"blame", "{side}", "pairwatch_diagnosis", "{names}")'
    return expr


def diagnosis_share(panel_id: int, runbook: str) -> ts_b.Panel:
    client = next(a for a in alerts.DIAGNOSIS_ALERTS if a.diagnosis == "client_duplicate_ids")
    server = max(a.min_share for a in alerts.DIAGNOSIS_ALERTS if a is not client)
    closed = f"sum by ({JOB_SIDE}) ({R_CLOSED}{sel()})"
    faults = _with_blame(
        f"sum by ({JOB_SIDE}, pairwatch_diagnosis) ({R_CLOSED}{sel(NOT_OK)})\n"
        f"/ ignoring (pairwatch_diagnosis) group_left ()\n{closed}"
    )
    zero = (
        f'label_replace(label_replace(0 * {closed}, "pairwatch_diagnosis", "{NO_FAULT}", "", ""),'
        f' "blame", "{b.NONE}", "", "")'
    )
    panel = timeseries(
        panel_id,
        "Diagnosis: share of closed batches, per job (who is at fault)",
        "pairwatch's per-batch verdict from what it saw on the wire, as a share of the "
        "batches each job and side closed; the legend names the job and the side the "
        f"evidence blames. A job with no fault draws one line at 0 ({NO_FAULT}). Dashed: "
        f"{alerts.percent(client.min_share)} (red), where PairwatchClientDuplicateIds "
        f"starts to count, and {alerts.percent(server)} (orange), where the warning alerts "
        f"do; each alert also needs {client.min_batches} batches in {alerts.WINDOW}.",
        [
            query(
                f"{faults}\nor on ({JOB_SIDE})\n{zero}",
                JS_LEGEND + ": {{pairwatch_diagnosis}} ({{blame}})",
                "A",
            )
        ],
        unit="percentunit",
        width=6,
        runbook=runbook,
        anchor="reading-the-diagnoses",
    )
    panel = panel.thresholds(
        dash_b.ThresholdsConfig()
        .mode(dash_m.ThresholdsMode.ABSOLUTE)
        .steps(
            [
                dash_m.Threshold(value=None, color="transparent"),
                dash_m.Threshold(value=client.min_share, color="red"),
                dash_m.Threshold(value=server, color="orange"),
            ]
        )
    ).thresholds_style(
        common_b.GraphThresholdsStyleConfig().mode(common_m.GraphThresholdsStyleMode.DASHED)
    )
    for diagnosis in AT_FAULT:
        color = DIAGNOSIS_COLORS.get(diagnosis)
        if color is not None:
            panel = panel.override_by_regexp(f".*: {diagnosis} .*", fixed_color(color))
    return panel.override_by_regexp(f".*: {NO_FAULT} .*", fixed_color("green"))


# --- whose fault: answered without the ids, or hung / unreachable ----------------------------


def missing_split(panel_id: int, runbook: str) -> ts_b.Panel:
    page = alerts.PAGE_BURNS[0]
    targets = []
    for ref, side in zip("AB", b.BUDGET_SPENDERS, strict=True):
        reasons = "|".join(b.close_reasons(side))
        missing = _missing_of(sel(f'pairwatch_close_reason=~"{reasons}"'))
        targets.append(
            query(
                f"({missing} or 0 * {_requests(sel())})\n/ {_requests(sel())}",
                f"{JS_LEGEND}: {SPLIT_WORDS[side]}",
                ref,
            )
        )
    targets.append(
        query(
            f"max by () ({page.factor:g} * (1 - {_objective()}))",
            f"fast-burn page ({page.factor:g}x the budget)",
            "C",
        )
    )
    server_reasons = ", ".join(b.close_reasons(b.SERVER))
    other_reasons = ", ".join(b.close_reasons(b.SERVER_OR_NETWORK))
    return (
        dashed_series(
            timeseries(
                panel_id,
                "Missing replies: answered without the ids, or hung / unreachable?",
                "Missing replies as a share of requests, split by what their close reason "
                f"says (blame.py, DESIGN.md): {server_reasons} mean the server replied and "
                f"left the ids out; {other_reasons} mean nothing came back: a hung, dead or "
                "unreachable server, which the client's books cannot tell from the network. "
                "Dashed: where the fast-burn page starts (with the short window too), for "
                "your objective.",
                targets,
                unit="percentunit",
                width=10,
                runbook=runbook,
                anchor="answered-without-the-ids-or-hung",
            ),
            "^fast-burn page.*",
        )
        .override_by_regexp(".*answered without the ids.*", fixed_color("orange"))
        .override_by_regexp(".*hung or unreachable.*", fixed_color("red"))
    )


def missing_by_close_reason(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Missing replies per second by close reason",
        "The split on the left, one reason at a time, per job: body_end / stream_end (the "
        "server answered without them), stream_dropped / timeout / send_failed (nothing "
        "came), evicted (pairwatch's own caps). docs/metrics.md lists them.",
        [
            query(
                f"sum by ({JOB_SIDE}, pairwatch_close_reason) ({R_MISSING}{sel(METHOD)})",
                JS_LEGEND + " {{pairwatch_close_reason}}",
                "A",
            )
        ],
        unit="reqps",
        width=7,
        runbook=runbook,
        anchor="answered-without-the-ids-or-hung",
        bars=True,
        stacked=True,
    )


def lost_in_transit(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Lost in transit (both sides instrumented)",
        "Replies the server's own books (pairwatch's ASGI/WSGI middleware) show as sent that "
        "its clients closed as missing, in the last 5m, per server: the network, a proxy or "
        "a load balancer lost them. Empty where the server keeps no books of its own; "
        "PairwatchNetworkLosesReplies pages on it.",
        [
            query(
                f'sum by (server_address) ({R_LOST}{{server_address=~"$server"}})',
                "{{server_address}}",
                "A",
            )
        ],
        unit="short",
        width=7,
        runbook=runbook,
        anchor="lost-in-transit-client-against-server",
    )


# --- per method -----------------------------------------------------------------------------


def missing_share_by_method(panel_id: int, runbook: str) -> ts_b.Panel:
    by = "job, rpc_method"
    missing = f"sum by ({by}) ({R_MISSING}{sel(METHOD)})"
    inf = METHOD + ', le="+Inf"'
    paired = f"sum by ({by}) ({R_LATENCY}{sel(inf)})"
    m = f"({missing} or 0 * {paired})"
    p = f"({paired} or 0 * {missing})"
    return timeseries(
        panel_id,
        "Missing replies: share of requests, by method",
        "Per job and rpc_method: missing / (missing + paired). Requests carry no method "
        "label, so paired replies (pair latency's count) stand in for the answered ones. "
        "One method at 100% while the others are fine is a server that does not implement "
        "it, or drops it.",
        [query(f"{m}\n/ ({m} + {p})", "{{job}} {{rpc_method}}", "A")],
        unit="percentunit",
        width=12,
        runbook=runbook,
        anchor="per-method-missing-share-and-latency",
    )


def pair_latency(panel_id: int, runbook: str) -> ts_b.Panel:
    inner = (
        f"sum by (job, rpc_method, le) "
        f"(rate({LATENCY_BUCKET}{sel(METHOD + ', ' + LIVE)}[$__rate_interval]))"
    )
    targets = [
        query(
            f"histogram_quantile({q}, {inner})",
            f"p{int(q * 100)} {{{{job}}}} {{{{rpc_method}}}}",
            ref,
        )
        for q, ref in ((0.5, "A"), (0.99, "B"))
    ]
    targets[1] = targets[1].exemplar(True)
    return timeseries(
        panel_id,
        "Pair latency p50 / p99 by method (exemplars: open the trace)",
        "Send -> paired response, per job and rpc_method (capped at 32 methods per process, "
        "then _OTHER). Read from the scraped histogram, not a recording rule, because "
        "Prometheus keeps exemplars on scraped series only: each dot is one request's "
        "trace (a recording tracer in the app, Prometheus with --enable-feature="
        "exemplar-storage, the datasource's exemplarTraceIdDestinations pointing at your "
        "trace store; see dashboards/README.md).",
        targets,
        unit="s",
        width=12,
        runbook=runbook,
        anchor="per-method-missing-share-and-latency",
    ).data_links(
        [
            # The exemplar dots open their own trace through the Prometheus data source's
            # exemplarTraceIdDestinations (provisioning); a series has no trace id, so this
            # link opens the trace search of the Traces variable over the same time range.
            dash_b.DashboardLink("Search traces of this time in ${traces}")
            .url(
                '/explore?left={"datasource":"${traces}","queries":[{"refId":"A"}],'
                '"range":{"from":"${__from}","to":"${__to}"}}'
            )
            .target_blank(True)
        ]
    )
