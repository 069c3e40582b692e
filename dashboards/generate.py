"""Generate the pairwatch dashboard, alert rules and their threshold tests from code.

    python dashboards/generate.py                          # rewrite the committed files
    python dashboards/generate.py --runbook-url BASE --output-dir DIR   # a deployable copy
    python dashboards/generate.py --check                  # exit 1 if a committed file is stale

Writes, under --output-dir (default: this folder):
    pairwatch.json                              the Grafana dashboard
    rules/pairwatch-alerts.yaml                 the alert rules (src/pairwatch/alerting/rules.py)
    rules/pairwatch-slo.yaml                    the SLO recording rules the burn-rate alerts read
    alertmanager/pairwatch-inhibit.yaml         the Alertmanager inhibit rules
    rules/tests/pairwatch-thresholds.test.yaml  promtool tests at every threshold -1/+1
    rules/tests/pairwatch-slo.test.yaml         promtool tests of the SLO and blame
    rules/tests/pairwatch-liveness.test.yaml    promtool tests of the liveness alerts

The rules themselves are rendered by the package (pairwatch.alerting), which is also what
`pairwatch dashboards export` runs for an operator's own selector, grouping and objective;
this script writes the committed copy with the defaults.

`--runbook-url BASE` sets where every alert's runbook_url and every panel's "Runbook" link
point: BASE + "#" + the section anchor. BASE is the URL of dashboards/runbook.md wherever it
is browsable for the people on call (a wiki, a git forge). The committed default,
"dashboards/runbook.md", is the runbook's path in this repository: a relative link, right
when the files are read in a checkout or on a forge's file view, and never a placeholder
host. The promtool scenario tests pin that default, so a copy made for another BASE goes to
its own --output-dir.

Built with grafana-foundation-sdk (pinned in the `dashboards` extra of pyproject.toml). The
output is deterministic: panel ids and grid positions are fixed here, nothing depends on the
clock or the environment, so the committed files can be compared byte for byte
(tests/dashboards/test_dashboard_generate.py does).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import alert_yaml
import alerts
import panels
import panels_sides
import panels_top
import panels_traffic
import rule_tests
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dash_m
from panel_kit import DATASOURCE
from promql import SEL, TARGET_SEL

from pairwatch.alerting import slo_tests

HERE = Path(__file__).resolve().parent
DASHBOARD_UID = "pairwatch"
DEFAULT_RUNBOOK_URL = alerts.DEFAULT_RUNBOOK_URL

# What generate writes, relative to the output directory.
DASHBOARD_FILE = Path("pairwatch.json")
ALERTS_FILE = Path("rules/pairwatch-alerts.yaml")
INHIBIT_FILE = Path("alertmanager/pairwatch-inhibit.yaml")
THRESHOLD_TESTS_FILE = Path("rules/tests/pairwatch-thresholds.test.yaml")
SLO_FILE = Path("rules/pairwatch-slo.yaml")
SLO_TESTS_FILE = Path("rules/tests/pairwatch-slo.test.yaml")
LIVENESS_TESTS_FILE = Path("rules/tests/pairwatch-liveness.test.yaml")

# Firing pairwatch alerts drawn on every time series panel, for the selected targets. Alerts
# carry no transport (one page per fault), so the transport variable does not filter them.
ALERT_ANNOTATION_EXPR = (
    'ALERTS{alertstate="firing", alertname=~"Pairwatch.*", job=~"$job", '
    'server_address=~"$server", pairwatch_side=~"$side"}'
)


def row(panel_id: int, title: str) -> dash_b.Row:
    return dash_b.Row(title).id(panel_id).collapsed(False)


def collapsed_row(panel_id: int, title: str, *members: Any) -> dash_b.Row:
    """A row shut by default: what an on-call does not need at first sight, one click away."""
    built = dash_b.Row(title).id(panel_id)
    for member in members:
        built = built.with_panel(member)
    return built.collapsed(True)


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
        # Where the latency panel's exemplar link opens a trace (Tempo by default; a Jaeger
        # or Zipkin data source works too with its type here).
        dash_b.DatasourceVariable("traces").label("Traces").type("tempo"),
        label_variable("job", "Job", "label_values(batch_closed_total, job)"),
        label_variable(
            "side", "Side", 'label_values(batch_closed_total{job=~"$job"}, pairwatch_side)'
        ),
        label_variable(
            "instance", "Instance", 'label_values(batch_closed_total{job=~"$job"}, instance)'
        ),
        label_variable(
            "transport",
            "Transport",
            "label_values(batch_closed_total{" + TARGET_SEL + "}, pairwatch_transport)",
        ),
        label_variable(
            "server",
            "Server",
            "label_values(batch_closed_total{"
            + TARGET_SEL
            + ', pairwatch_transport=~"$transport"}, '
            "server_address)",
        ),
        label_variable(
            "method",
            "Method",
            "label_values(batch_pair_latency_seconds_count{" + SEL + "}, rpc_method)",
        ),
    ]


def build_dashboard(runbook: str = DEFAULT_RUNBOOK_URL) -> dash_m.Dashboard:
    board = (
        dash_b.Dashboard("pairwatch: JSON-RPC response pairing")
        .uid(DASHBOARD_UID)
        .description(
            "JSON-RPC 2.0 response pairing seen by pairwatch: who is at fault (per-batch "
            "diagnoses from the evidence), missing responses as a share of requests, the raw "
            "pairing counters, batch sizes, pair latency and id hygiene. Firing pairwatch "
            "alerts are drawn as annotations. Needs dashboards/rules/pairwatch-recording.yaml "
            "loaded in Prometheus."
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
            .url(runbook)
            .icon("doc")
            .target_blank(True)
        )
        .annotation(
            dash_b.AnnotationQuery()
            .name("pairwatch alerts")
            .datasource(DATASOURCE)
            .enable(True)
            .icon_color("red")
            .expr(ALERT_ANNOTATION_EXPR)
        )
    )
    for variable in variables():
        board = board.with_variable(variable)

    board = (
        board.with_row(row(1, "Alive? Who is hurting? Whose fault? (per job and side)"))
        .with_panel(panels_top.requests_per_second(2, runbook))
        .with_panel(panels_top.answered_share(3, runbook))
        .with_panel(panels_top.budget_left(4, runbook))
        .with_panel(panels_top.diagnosis_share(5, runbook))
        .with_row(row(6, "Missing replies: answered without the ids, or hung / unreachable?"))
        .with_panel(panels_top.missing_split(7, runbook))
        .with_panel(panels_top.missing_by_close_reason(8, runbook))
        .with_panel(panels_top.lost_in_transit(9, runbook))
        .with_row(row(10, "Per method"))
        .with_panel(panels_top.missing_share_by_method(11, runbook))
        .with_panel(panels_top.pair_latency(12, runbook))
        .with_row(
            collapsed_row(
                13,
                "Details: counters, close reasons by count, batches, sizes, order, id hygiene, "
                "both ends, pairwatch itself",
                panels.diagnosis_totals(14, runbook),
                panels.counters_against_each_other(15, runbook),
                panels.closed_by_close_reason(16, runbook),
                panels_traffic.batches_per_second(17, runbook),
                panels_traffic.count_mismatch(18, runbook),
                panels_traffic.out_of_order_share(19, runbook),
                panels_traffic.batch_size_heatmap(20, runbook),
                panels_traffic.batch_size_percentiles(21, runbook),
                panels_traffic.response_lateness(22, runbook),
                panels_traffic.duplicate_ids(23, runbook),
                panels_traffic.invalid_responses(24, runbook),
                panels_traffic.violations(25, runbook),
                panels_traffic.internal_errors(26, runbook),
                panels_sides.missing_by_side(27, runbook),
            )
        )
    )
    return board.build()


def render_dashboard(runbook: str = DEFAULT_RUNBOOK_URL) -> str:
    """The dashboard as the exact text committed in dashboards/pairwatch.json.

    The SDK's annotation model has no fields for a Prometheus annotation's title and text,
    so those are added to the encoded JSON here.
    """
    data: dict[str, Any] = json.loads(json.dumps(build_dashboard(runbook), cls=JSONEncoder))
    for annotation in data["annotations"]["list"]:
        if annotation.get("expr") == ALERT_ANNOTATION_EXPR:
            annotation.update(
                {
                    "step": "30s",
                    "titleFormat": "{{alertname}} ({{severity}})",
                    "textFormat": "{{job}} / {{server_address}} / blame {{blame}}",
                    "tagKeys": "severity,blame,job,server_address",
                    "useValueForTime": False,
                }
            )
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def outputs(runbook: str) -> dict[Path, Callable[[], str]]:
    """Every generated file (relative to the output directory) and how to make its text."""
    return {
        DASHBOARD_FILE: lambda: render_dashboard(runbook),
        ALERTS_FILE: lambda: alert_yaml.render(alerts.Config(runbook_url=runbook)),
        SLO_FILE: alert_yaml.render_slo,
        INHIBIT_FILE: alert_yaml.render_inhibit,
        THRESHOLD_TESTS_FILE: rule_tests.render,
        SLO_TESTS_FILE: slo_tests.render,
        LIVENESS_TESTS_FILE: slo_tests.render_liveness,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--output-dir", type=Path, default=HERE, help="folder to write into (default: dashboards/)"
    )
    parser.add_argument(
        "--runbook-url",
        default=DEFAULT_RUNBOOK_URL,
        metavar="BASE",
        help=f"URL of runbook.md for runbook links (default: {DEFAULT_RUNBOOK_URL}, relative)",
    )
    parser.add_argument(
        "--check", action="store_true", help="compare with the files instead of writing them"
    )
    args = parser.parse_args(argv)
    stale = []
    for relative, make in outputs(args.runbook_url).items():
        path = args.output_dir / relative
        text = make()
        if args.check:
            current = path.read_text(encoding="utf-8") if path.exists() else ""
            if current != text:
                stale.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{path} is stale: run python dashboards/generate.py", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
