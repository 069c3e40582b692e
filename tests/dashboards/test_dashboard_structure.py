"""Structural checks of dashboards/pairwatch.json against the metrics contract.

The allowed metric names come from the table in docs/metrics.md (the contract the exporter
implements) plus the recording rules defined in dashboards/rules/pairwatch-recording.yaml;
no second list is kept here. Standard library only: these tests never skip.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from queries import iter_panels, panel_queries

REPO_ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = REPO_ROOT / "dashboards" / "pairwatch.json"
METRICS_DOC = REPO_ROOT / "docs" / "metrics.md"
RECORDING_RULES = REPO_ROOT / "dashboards" / "rules" / "pairwatch-recording.yaml"
ALERT_RULES = REPO_ROOT / "dashboards" / "rules" / "pairwatch-alerts.yaml"
SLO_RULES = REPO_ROOT / "dashboards" / "rules" / "pairwatch-slo.yaml"
# Prometheus's own series the liveness alerts read (not pairwatch's contract).
PROMETHEUS_SERIES = {"up"}

TEMPLATE_VARIABLES = {
    "datasource",
    "traces",
    "job",
    "side",
    "instance",
    "transport",
    "server",
    "method",
}
DATASOURCE_VARIABLES = {"datasource": "prometheus", "traces": "tempo"}
# Label variable -> the label it selects on.
VARIABLE_LABELS = {
    "job": "job",
    "side": "pairwatch_side",
    "instance": "instance",
    "transport": "pairwatch_transport",
    "server": "server_address",
    "method": "rpc_method",
}
TARGET_LABELS = frozenset(
    {"job", "instance", "pairwatch_transport", "server_address", "pairwatch_side"}
)
# The raw series panels read directly, and the labels of those a variable selects on.
# pairwatch's own failures carry job and instance only (not tied to a transport or server).
RAW_LABELS = {
    "batch_closed_total": TARGET_LABELS,
    "batch_protocol_violation_total": TARGET_LABELS,
    "batch_pair_latency_seconds_bucket": TARGET_LABELS | {"rpc_method"},
    "pairwatch_internal_errors_total": frozenset({"job", "instance"}),
}
# (panel id, refId) -> why a variable whose label the query carries is left out on purpose.
NOT_FILTERED: dict[tuple[int, str], tuple[str, str]] = {
    (15, "B"): (
        "method",
        "the raw counters are compared on one chart and only missing carries rpc_method: "
        "filtering that one line by method would compare it with unfiltered others",
    ),
}
# Instruments announced for the diagnosis work (batch.late_response,
# batch.response_lateness) whose rows docs/metrics.md does not have yet on this branch; once
# the table lists them this set is redundant, never wrong.
ANNOUNCED_SERIES = {
    "batch_late_response_total",
    "batch_response_lateness_seconds_bucket",
    "batch_response_lateness_seconds_sum",
    "batch_response_lateness_seconds_count",
}


# --- the contract -------------------------------------------------------------------------


def documented_series(doc: Path = METRICS_DOC) -> set[str]:
    """Prometheus series names from the 'Prometheus series' column of docs/metrics.md.

    A cell like `batch_size_bucket/_sum/_count` expands to batch_size_bucket, batch_size_sum
    and batch_size_count.
    """
    lines = doc.read_text(encoding="utf-8").splitlines()
    series: set[str] = set()
    column: int | None = None
    for line in lines:
        if not line.startswith("|"):
            column = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if column is None:
            if "Prometheus series" in cells:
                column = cells.index("Prometheus series")
            continue
        if set(line) <= set("|-: "):
            continue
        cell = cells[column].strip("`")
        first, *alternatives = cell.split("/")
        series.add(first)
        if alternatives:
            base = re.sub(r"_[a-z]+$", "", first)
            series.update(base + alternative for alternative in alternatives)
    return series


def recording_rule_names(*paths: Path) -> set[str]:
    return {
        name
        for path in (paths or (RECORDING_RULES, SLO_RULES))
        for name in re.findall(
            r"^\s*-?\s*record:\s*(\S+)\s*$", path.read_text(encoding="utf-8"), re.M
        )
    }


# --- a small PromQL metric-name extractor -------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_TOKEN = re.compile(
    r"(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?:ms|[smhdwy])*)|(?P<var>\$\w+)|(?P<ident>[A-Za-z_:][\w:]*)"
)
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """Metric names selected by a PromQL expression (functions, keywords, labels excluded)."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names: set[str] = set()
    for match in _TOKEN.finditer(text):
        name = match.group("ident")
        if name is None or name.lower() in _KEYWORDS:
            continue
        if text[match.end() :].lstrip().startswith("("):  # a function call
            continue
        names.add(name)
    return names


def selectors(expr: str) -> list[tuple[str, str]]:
    """(metric name, matcher block) for every vector selector written with braces."""
    text = _STRING.sub(lambda m: m.group(0).replace("{", "<").replace("}", ">"), expr)
    return [
        (m.group(1), expr[m.start(2) : m.end(2)])
        for m in re.finditer(r"([A-Za-z_:][\w:]*)(\{[^{}]*\})", text)
    ]


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def allowed_names() -> set[str]:
    return documented_series() | ANNOUNCED_SERIES | recording_rule_names()


# --- the extractor itself -----------------------------------------------------------------


def test_documented_series_are_parsed_from_the_doc() -> None:
    names = documented_series()
    # Spot checks of the expansion rules; the full set is whatever the doc says.
    assert {"batch_size_bucket", "batch_size_sum", "batch_size_count"} <= names
    assert "batch_pair_latency_seconds_bucket" in names
    assert "batch_unknown_id_response_total" in names
    assert "pairwatch_internal_errors_total" in names
    assert len(names) >= 15


def test_metric_name_extractor() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, rpc_method) (rate(foo_bucket{a="x{y}", '
        'b=~"$method"}[$__rate_interval]))) / on (job) group_left () bar:baz:rate5m > 1e3 '
        "and ignoring (le) sum without (x) (qux offset 5m)"
    )
    assert metric_names(expr) == {"foo_bucket", "bar:baz:rate5m", "qux"}
    assert selectors('sum(foo{a="}{"}) + bar{b="c"}') == [("foo", '{a="}{"}'), ("bar", '{b="c"}')]


# --- the dashboard ------------------------------------------------------------------------


def test_panel_ids_are_unique(dashboard: dict[str, Any]) -> None:
    ids = [panel["id"] for panel in iter_panels(dashboard)]
    assert len(ids) == len(set(ids)), f"duplicate panel ids: {sorted(ids)}"
    assert all(isinstance(i, int) and i > 0 for i in ids)


def test_every_panel_and_target_has_a_datasource(dashboard: dict[str, Any]) -> None:
    for panel in iter_panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel.get("datasource", {}).get("uid"), f"panel {panel['id']} has no datasource"
        assert panel.get("targets"), f"panel {panel['id']} has no queries"
        for target in panel["targets"]:
            assert target.get("datasource", {}).get("uid"), (
                f"panel {panel['id']} target {target.get('refId')} has no datasource"
            )


def test_every_metric_is_in_the_contract_or_a_recording_rule(
    dashboard: dict[str, Any], allowed_names: set[str]
) -> None:
    queries = panel_queries(dashboard)
    assert len(queries) >= 15
    for query in queries:
        names = metric_names(query.expr)
        assert names, f"panel {query.panel_id}/{query.ref_id}: no metric in {query.expr}"
        unknown = names - allowed_names
        assert not unknown, (
            f"panel {query.panel_id} ({query.panel_title}) {query.ref_id} uses {unknown}, "
            "which neither docs/metrics.md nor the recording rules define"
        )


def series_labels() -> dict[str, frozenset[str]]:
    """The labels a variable could select on, per series a panel reads: the grouping of each
    recording rule (its first `by (...)`/`on (...)`, or the rule it reads), the raw series
    from RAW_LABELS."""
    labels: dict[str, frozenset[str]] = dict(RAW_LABELS)
    pending: dict[str, str] = {}
    for path in (RECORDING_RULES, SLO_RULES):
        text = path.read_text(encoding="utf-8")
        for name, expr in re.findall(
            r"record:\s*(\S+)\s*\n\s*expr: [|>]-?\n((?:\s{10,}.*\n?)+)", text
        ):
            grouping = re.search(r"\b(?:by|on) \(([^()]*)\)", expr)
            if grouping:
                found = {label.strip() for label in grouping.group(1).split(",")}
                labels[name] = frozenset(found & set(VARIABLE_LABELS.values()))
            else:
                pending[name] = expr
    for name, expr in pending.items():
        source = next(n for n in metric_names(expr) if n in labels)
        labels[name] = labels[source]
    return labels


def test_series_labels_are_read_from_the_rules() -> None:
    labels = series_labels()
    assert labels["target:batch_requests:rate5m"] == TARGET_LABELS
    assert labels["target_method_reason:batch_missing_response:rate5m"] == TARGET_LABELS | {
        "rpc_method"
    }
    assert labels["job_server_side:pairwatch_slo_objective:ratio"] == {
        "job",
        "server_address",
        "pairwatch_side",
    }
    assert labels["server_address:batch_lost_in_transit:increase5m"] == {"server_address"}


def test_every_query_aggregates_and_honours_the_variables_that_apply(
    dashboard: dict[str, Any],
) -> None:
    """Each query filters on every variable whose label all of its series carry, and on no
    other (a matcher on a label a series lacks empties the panel once a value is picked)."""
    labels = series_labels()
    checked = 0
    for query in panel_queries(dashboard):
        where = f"panel {query.panel_id} ({query.panel_title}) {query.ref_id}"
        assert re.search(r"\b(?:sum|max) by \(", query.expr), f"{where}: not aggregated by (...)"
        assert not re.search(r"\b(?:sum|max)\s*\(|\bsum\s+without\b", query.expr), where
        found = selectors(query.expr)
        assert len(found) == len(re.findall(r"[A-Za-z_:][\w:]*\{", query.expr)), where
        applies = frozenset.intersection(*(labels[metric] for metric, _ in found))
        skipped = NOT_FILTERED.get((query.panel_id, query.ref_id))
        for metric, matchers in found:
            for variable, label in VARIABLE_LABELS.items():
                matcher = f'{label}=~"${variable}"'
                if skipped and skipped[0] == variable:
                    assert matcher not in matchers, where
                elif label in applies:
                    assert matcher in matchers, f"{where}: {metric} lacks {matcher}"
                    checked += 1
                else:
                    assert matcher not in matchers, f"{where}: {metric} has no {label}"
    assert checked >= 150


def test_every_label_variable_reaches_a_panel(dashboard: dict[str, Any]) -> None:
    used = {
        variable
        for query in panel_queries(dashboard)
        for variable in VARIABLE_LABELS
        if f"${variable}" in query.expr
    }
    assert used == set(VARIABLE_LABELS)


def test_legends_name_the_job_wherever_the_query_keeps_it(dashboard: dict[str, Any]) -> None:
    """Issue 43: the "All" view summed every job with no job in the legend. A query whose
    outer grouping keeps `job` shows it; one that groups without it has no job to show."""
    for query in panel_queries(dashboard):
        outer = re.search(r"\b(?:sum|max) by \(([^()]*)\)", query.expr)  # the first one
        assert outer, query.expr
        keeps_job = "job" in [label.strip() for label in outer.group(1).split(",")]
        if keeps_job and query.panel_type != "heatmap":
            assert "{{job}}" in query.legend, f"panel {query.panel_id} {query.ref_id}"


def test_template_variables(dashboard: dict[str, Any], allowed_names: set[str]) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == TEMPLATE_VARIABLES
    for name, kind in DATASOURCE_VARIABLES.items():
        assert variables[name]["type"] == "datasource"
        assert variables[name]["query"] == kind
    for name in TEMPLATE_VARIABLES - set(DATASOURCE_VARIABLES):
        variable = variables[name]
        assert variable["datasource"]["uid"] == "${datasource}", name
        assert variable["includeAll"], name
        assert variable["allValue"] == ".*", name
        match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", variable["query"])
        assert match, f"{name}: {variable['query']}"
        assert metric_names(match.group(1)) <= allowed_names, name


def test_variables_used_in_queries_are_defined(dashboard: dict[str, Any]) -> None:
    defined = {v["name"] for v in dashboard["templating"]["list"]}
    builtin = {"__rate_interval", "__interval", "__range", "__data"}
    for query in panel_queries(dashboard):
        used = set(re.findall(r"\$\{?(\w+)", query.expr))
        assert used <= defined | builtin, f"panel {query.panel_id}: {used - defined - builtin}"


def test_panels_the_issue_asks_for(dashboard: dict[str, Any]) -> None:
    by_panel: dict[int, list[str]] = {}
    for q in panel_queries(dashboard):
        by_panel.setdefault(q.panel_id, []).append(q.expr)
    # The counters still on ONE panel, against each other.
    assert any(
        all(any(c in e for e in group) for c in ("unknown_id", "missing_response", "null_id"))
        for group in by_panel.values()
    )
    joined = "\n".join(e for group in by_panel.values() for e in group)
    for needle in (
        "pairwatch_diagnosis",
        "pairwatch_close_reason",
        "response_count_mismatch",
        "batch_size_bucket",
        "batch_pair_latency_seconds_bucket",
        "out_of_order",
        "duplicate_id",
        "invalid_response",
        "late_response",
    ):
        assert needle in joined, needle
    assert re.search(r"histogram_quantile\(0\.99, sum by \(job, rpc_method, le\)", joined)
    # The co-occurrence panel is gone: no query ANDs two raw counters any more.
    assert not re.search(r"\)\s*and on", joined)
    # Batch size quantiles are bucket boundaries, never interpolated.
    size = [e for e in joined.split("\n") if "batch_size_bucket" in e]
    assert size
    assert not any("histogram_quantile" in e for e in size)


def _panel(dashboard: dict[str, Any], title_start: str) -> dict[str, Any]:
    found = [
        p
        for p in iter_panels(dashboard)
        if p.get("title", "").startswith(title_start) and p["type"] != "row"
    ]
    assert len(found) == 1, title_start
    return found[0]


def test_alert_thresholds_are_drawn(dashboard: dict[str, Any]) -> None:
    import alerts

    split = _panel(dashboard, "Missing replies: answered without the ids")
    # The fast-burn page line is a query on the exported objective, not a constant.
    page = [t["expr"] for t in split["targets"] if t["legendFormat"].startswith("fast-burn")]
    assert page == [
        f"max by () ({alerts.PAGE_BURNS[0].factor:g} * (1 - max by (job, pairwatch_side) "
        '(job_server_side:pairwatch_slo_objective:ratio{job=~"$job", '
        'server_address=~"$server", pairwatch_side=~"$side"})))'
    ]
    diagnosis = _panel(dashboard, "Diagnosis: share of closed batches")
    values = [s["value"] for s in diagnosis["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    assert values == [None, *sorted({a.min_share for a in alerts.DIAGNOSIS_ALERTS})]
    (target,) = diagnosis["targets"]
    assert "pairwatch_diagnosis" in target["expr"]


def test_the_split_reads_the_close_reasons_blame_py_maps() -> None:
    from pairwatch.alerting import blame

    text = DASHBOARD.read_text(encoding="utf-8")
    for side in blame.BUDGET_SPENDERS:
        reasons = "|".join(blame.close_reasons(side))
        assert f'pairwatch_close_reason=~\\"{reasons}\\"' in text, side


def test_exemplars_on_pair_latency(dashboard: dict[str, Any]) -> None:
    latency = _panel(dashboard, "Pair latency p50 / p99 by method")
    flags = [t.get("exemplar", False) for t in latency["targets"]]
    assert flags == [False, True]
    # Exemplars exist on scraped series only: the query reads the raw histogram.
    assert all("batch_pair_latency_seconds_bucket{" in t["expr"] for t in latency["targets"])
    (link,) = latency["fieldConfig"]["defaults"]["links"]
    assert "${traces}" in link["url"]
    assert '"range":{"from":"${__from}","to":"${__to}"}' in link["url"]
    # The dots' own trace link is the datasource's: provisioning maps trace_id to it.
    provisioning = (
        REPO_ROOT / "dashboards" / "provisioning" / "datasources" / "prometheus.yaml"
    ).read_text(encoding="utf-8")
    assert "exemplarTraceIdDestinations:\n        - name: trace_id\n" in provisioning


def test_details_row_is_collapsed(dashboard: dict[str, Any]) -> None:
    top = [p for p in dashboard["panels"]]
    rows = [p for p in top if p["type"] == "row"]
    assert [r.get("collapsed", False) for r in rows] == [False, False, False, True]
    nested = {p["title"] for p in rows[-1]["panels"]}
    assert {"Batch size distribution", "Out-of-order share of batches"} <= nested
    assert any(t.startswith("Batches closed per second by close reason") for t in nested)
    assert not {p["title"] for p in top} & nested


def test_alert_annotations(dashboard: dict[str, Any]) -> None:
    prometheus = [
        a
        for a in dashboard["annotations"]["list"]
        if a.get("datasource", {}).get("type") == "prometheus"
    ]
    assert len(prometheus) == 1
    expr = prometheus[0]["expr"]
    assert expr.startswith("ALERTS{")
    assert 'alertname=~"Pairwatch.*"' in expr
    assert 'job=~"$job"' in expr
    assert prometheus[0]["enable"] is True
    assert "{{alertname}}" in prometheus[0]["titleFormat"]


def test_every_panel_links_to_a_runbook_section(dashboard: dict[str, Any]) -> None:
    runbook = (REPO_ROOT / "dashboards" / "runbook.md").read_text(encoding="utf-8")
    anchors = set()
    for line in runbook.splitlines():
        if line.startswith("#"):
            title = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower())
            anchors.add(title.replace(" ", "-"))
    for panel in iter_panels(dashboard):
        if panel["type"] == "row":
            continue
        (link,) = panel.get("links", [])
        base, _, anchor = link["url"].partition("#")
        assert base == "dashboards/runbook.md", panel["title"]
        assert anchor in anchors, f"{panel['title']}: runbook.md has no #{anchor}"


# --- the rule files follow the same contract ----------------------------------------------


@pytest.mark.parametrize(
    "rule_file", [RECORDING_RULES, SLO_RULES, ALERT_RULES], ids=lambda p: p.name
)
def test_rule_expressions_use_documented_series(rule_file: Path) -> None:
    text = rule_file.read_text(encoding="utf-8")
    # Rule expressions are the `expr:` blocks; a line-based cut is enough for these files.
    blocks = re.findall(r"expr: [|>]-?\n((?:\s{10,}.*\n?)+)", text)
    assert blocks
    allowed = documented_series() | ANNOUNCED_SERIES | recording_rule_names() | PROMETHEUS_SERIES
    for block in blocks:
        names = metric_names(block)
        assert names, block
        assert names <= allowed, f"{rule_file.name}: {names - allowed}"


def test_panels_tile_the_grid(dashboard: dict[str, Any]) -> None:
    """Every panel within Grafana's 24 columns and none over another: widths that do not
    add up to 24 per line made the collapsed row's panels overflow the right edge."""
    cells: dict[tuple[int, int], int] = {}
    for panel in iter_panels(dashboard):
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, (panel["id"], cells[(x, y)])
                cells[(x, y)] = panel["id"]
