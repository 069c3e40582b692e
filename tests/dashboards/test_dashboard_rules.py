"""The Prometheus rule files: promtool check + unit tests, their shape, and the runbook and
inhibit rules that go with them.

promtool missing: skipped with an install hint, failed under CI=true (see conftest.py).
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = REPO_ROOT / "dashboards" / "rules"
RULE_FILES = [
    RULES_DIR / "pairwatch-recording.yaml",
    RULES_DIR / "pairwatch-slo.yaml",
    RULES_DIR / "pairwatch-alerts.yaml",
]
RULE_TESTS = sorted((RULES_DIR / "tests").glob("*.yaml"))
RUNBOOK = REPO_ROOT / "dashboards" / "runbook.md"
INHIBIT = REPO_ROOT / "dashboards" / "alertmanager" / "pairwatch-inhibit.yaml"
README = REPO_ROOT / "dashboards" / "README.md"
RUNBOOK_BASE = "dashboards/runbook.md#"
# One page per job, server and side: never per transport or instance.
TARGET_LABELS = ["job", "server_address", "pairwatch_side"]

# Alert -> (severity, blame): critical where callers get another caller's result or none
# (the fast burn pages, the slow burn is a ticket); warning for the server faults, malformed
# requests and liveness; info for the symptom every other alert explains.
EXPECTED_ALERTS = {
    "PairwatchClientDuplicateIds": ("critical", "client"),
    "PairwatchMalformedRequestElements": ("warning", "client"),
    "PairwatchIdTypeMismatch": ("warning", "server"),
    "PairwatchServerNullIds": ("warning", "server"),
    "PairwatchServerIdEchoFault": ("warning", "server"),
    "PairwatchLateResponses": ("warning", "server"),
    "PairwatchResponseCountMismatch": ("info", "server_or_network"),
    "PairwatchServerOmitsRepliesFastBurn": ("critical", "server"),
    "PairwatchServerOmitsRepliesSlowBurn": ("warning", "server"),
    "PairwatchServerOrNetworkLosesRepliesFastBurn": ("critical", "server_or_network"),
    "PairwatchServerOrNetworkLosesRepliesSlowBurn": ("warning", "server_or_network"),
    "PairwatchServerAnswersNothing": ("critical", "server"),
    "PairwatchServerOrNetworkAnswersNothing": ("critical", "server_or_network"),
    "PairwatchNetworkLosesReplies": ("warning", "network"),
    "PairwatchInternalErrors": ("warning", "none"),
    "PairwatchJobAbsent": ("warning", "none"),
    "PairwatchTrafficDrop": ("warning", "none"),
    "PairwatchScrapeDown": ("warning", "none"),
}
# The alerts on a count AND a share of traffic in a 5m window (the rest: SLO and liveness).
COUNT_AND_SHARE = [
    "PairwatchClientDuplicateIds",
    "PairwatchMalformedRequestElements",
    "PairwatchIdTypeMismatch",
    "PairwatchServerNullIds",
    "PairwatchServerIdEchoFault",
    "PairwatchLateResponses",
    "PairwatchResponseCountMismatch",
]
# Words of a summary that name a side: an alert's summary names only the side it blames.
SIDE_WORDS = {"client": "client", "server": "server", "network": "network"}


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("rule_file", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(promtool: str, rule_file: Path) -> None:
    result = run([promtool, "check", "rules", str(rule_file)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests(promtool: str) -> None:
    assert RULE_TESTS, "no rule unit tests in dashboards/rules/tests/"
    result = run([promtool, "test", "rules", *(str(p) for p in RULE_TESTS)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAILED" not in result.stdout + result.stderr


def test_promtool_unit_tests_can_fail(promtool: str, tmp_path: Path) -> None:
    """A wrong expectation must make promtool fail, so the passing run above means something."""
    source = RULES_DIR / "tests" / "pairwatch-alerts.test.yaml"
    text = source.read_text(encoding="utf-8").replace("severity: critical", "severity: info")
    text = text.replace("../pairwatch-alerts.yaml", str(RULES_DIR / "pairwatch-alerts.yaml"))
    broken = tmp_path / "broken.test.yaml"
    broken.write_text(text, encoding="utf-8")
    result = run([promtool, "test", "rules", str(broken)])
    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr


def _alerts(yaml_module: Any) -> list[dict[str, Any]]:
    doc = yaml_module.safe_load((RULES_DIR / "pairwatch-alerts.yaml").read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule]


def _runbook_anchors() -> set[str]:
    """GitHub's anchors for the runbook's headings (lowercase, spaces to dashes)."""
    anchors = set()
    for line in RUNBOOK.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^#{1,6}\s+(.*)$", line)
        if match:
            title = match.group(1).strip().lower()
            title = re.sub(r"[^\w\- ]", "", title)
            anchors.add(title.replace(" ", "-"))
    return anchors


def test_alerts_are_the_documented_set(yaml_module: Any) -> None:
    found = {
        r["alert"]: (r["labels"]["severity"], r["labels"]["blame"]) for r in _alerts(yaml_module)
    }
    assert found == EXPECTED_ALERTS


def test_blame_is_stated_once() -> None:
    """The blame of every diagnosis alert is blame.py's, and every close reason a missing
    reply can have on any transport has a side."""
    import alerts

    from pairwatch.alerting import blame
    from pairwatch.otel.zeros import MISSING_REASONS

    for a in alerts.DIAGNOSIS_ALERTS:
        assert EXPECTED_ALERTS[a.name][1] == blame.BY_DIAGNOSIS[a.diagnosis]
    # every reason a missing reply is zeroed with, pairwatch's own, and the two that only
    # the server middleware and the MCP integration give (docs/metrics.md)
    reasons = {r for rs in MISSING_REASONS.values() for r in rs}
    reasons |= {"evicted", "closed", "app_error", "client_resolved"}
    assert reasons == set(blame.BY_CLOSE_REASON)
    assert set(blame.BY_CLOSE_REASON.values()) <= set(blame.BLAMES)


def test_summary_speaks_only_of_the_side_blamed(yaml_module: Any) -> None:
    for rule in _alerts(yaml_module):
        side = rule["labels"]["blame"]
        summary = re.sub(r"\{\{[^}]*\}\}", "", rule["annotations"]["summary"])  # labels
        words = set(re.findall(r"[a-z]+", summary.lower()))
        allowed = {"client"} if side == "client" else set()
        allowed |= {"server"} if side in ("server", "server_or_network") else set()
        allowed |= {"network"} if side in ("network", "server_or_network") else set()
        named = words & set(SIDE_WORDS)
        assert named <= allowed, (rule["alert"], named)
        if side in ("client", "server", "network"):
            assert side in words | {w.lower() for w in re.findall(r"[A-Z][a-z]+", rule["alert"])}


def _minutes(duration: str) -> int:
    match = re.fullmatch(r"(\d+)([mh])", duration)
    assert match, duration
    return int(match.group(1)) * (60 if match.group(2) == "h" else 1)


def test_alert_shape(yaml_module: Any) -> None:
    anchors = _runbook_anchors()
    for rule in _alerts(yaml_module):
        name = rule["alert"]
        annotations = rule["annotations"]
        assert annotations["summary"].strip(), name
        assert "$value" in annotations["description"] or "$labels" in annotations["description"]
        url = annotations["runbook_url"]
        assert url.startswith(RUNBOOK_BASE), f"{name}: {url}"
        anchor = url[len(RUNBOOK_BASE) :]
        assert anchor in anchors, f"{name}: runbook.md has no heading for #{anchor}"
        # Live traffic only: every selector of a pairwatch series leaves audit captures out.
        expr = rule["expr"]
        selectors = re.findall(r"\b(batch_\w+|pairwatch_internal_errors_total|up)\{([^}]*)\}", expr)
        for series, matchers in selectors:
            assert 'pairwatch_integration!="audit"' in matchers, (name, series)
        assert "pairwatch_transport" not in expr, f"{name}: one page per fault, not per transport"
        assert "instance" not in expr or name == "PairwatchInternalErrors", name


def test_count_and_share_alert_shape(yaml_module: Any) -> None:
    for rule in _alerts(yaml_module):
        name = rule["alert"]
        if name not in COUNT_AND_SHARE:
            continue
        expr = rule["expr"]
        annotations = rule["annotations"]
        assert "|" in annotations["description"], f"{name}: $value is not formatted"
        # The evidence: the description queries the totals the value is a part of.
        assert "| query }}" in annotations["description"], name
        # Summed per target and side only: instance / otel_scope_* never split an alert, and
        # client-side and server-side counts are never added up.
        by = "sum by (" + ", ".join(TARGET_LABELS) + ")"
        assert expr.count("sum by (") == expr.count(by), name
        assert f"and on ({', '.join(TARGET_LABELS)})" in expr, name
        # A window never longer than `for:`, so a burst cannot page.
        windows = {_minutes(w) for w in re.findall(r"\[(\d+[mh])\]", expr)}
        assert windows, name
        assert max(windows) <= _minutes(str(rule["for"])), name
        # A share AND a minimum count: two comparisons joined by `and`.
        assert len(re.findall(r">=\s*[\d.]+", expr)) == 2, name


def test_burn_rate_alerts(yaml_module: Any) -> None:
    """The workbook's pairs of windows and factors, on the recorded per-side ratios, each with
    the minimum of missing replies in the long window."""
    import alerts

    rules = {r["alert"]: r for r in _alerts(yaml_module)}
    for stem, side in (
        ("PairwatchServerOmitsReplies", "server"),
        ("PairwatchServerOrNetworkLosesReplies", "server_or_network"),
    ):
        for suffix, burns in (("FastBurn", alerts.PAGE_BURNS), ("SlowBurn", alerts.TICKET_BURNS)):
            expr = rules[stem + suffix]["expr"]
            for burn in burns:
                threshold = f"({burn.factor:g} * 0.001)"
                for window in (burn.long, burn.short):
                    ratio = f'ratio_rate{window}{{blame="{side}"}} > {threshold}'
                    assert ratio in expr, (stem + suffix, ratio)
                assert f">= {alerts.BURN_MIN_ERRORS}" in expr
    assert {(b.factor, b.long, b.short) for b in alerts.PAGE_BURNS} == {
        (14.4, "1h", "5m"),
        (6, "6h", "30m"),
    }


def test_every_alert_is_unit_tested_firing_and_quiet(yaml_module: Any) -> None:
    """Every alert fires in some test, with exact labels; and is checked quiet somewhere:
    an `exp_alerts: []`, or an exact list of firing alerts (pairwatch-slo.test.yaml) that
    leaves it out for a job."""
    firing: set[str] = set()
    quiet: set[str] = set()
    for path in RULE_TESTS:
        doc = yaml_module.safe_load(path.read_text(encoding="utf-8"))
        for test in doc.get("tests", []):
            for case in test.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
                for alert in case.get("exp_alerts") or []:
                    # Exact labels and every annotation are pinned.
                    assert "severity" in alert["exp_labels"], case["alertname"]
                    assert "blame" in alert["exp_labels"], case["alertname"]
                    assert set(alert["exp_annotations"]) == {
                        "summary",
                        "description",
                        "runbook_url",
                    }, case["alertname"]
            for case in test.get("promql_expr_test", []):
                if case["expr"] != 'ALERTS{alertstate="firing"}':
                    continue
                named = {
                    re.search(r'alertname="(\w+)"', sample["labels"]).group(1)  # type: ignore[union-attr]
                    for sample in case.get("exp_samples") or []
                }
                firing |= named
                quiet |= set(EXPECTED_ALERTS) - named
    names = set(EXPECTED_ALERTS)
    assert firing >= names, f"never tested firing: {names - firing}"
    assert quiet >= names, f"never tested quiet: {names - quiet}"


def test_threshold_tests_cover_every_alert(yaml_module: Any) -> None:
    """The generated threshold tests hold a minus-one and a plus-one case per alert."""
    doc = yaml_module.safe_load(
        (RULES_DIR / "tests" / "pairwatch-thresholds.test.yaml").read_text()
    )
    covered: dict[str, set[str]] = {}
    for test in doc["tests"]:
        for case in test["promql_expr_test"]:
            name = re.search(r'alertname="(\w+)"', case["expr"]).group(1)  # type: ignore[union-attr]
            for sample in case.get("exp_samples") or []:
                covered.setdefault(name, set()).add(
                    re.search(r'server_address="([\w-]+)"', sample["labels"]).group(1)  # type: ignore[union-attr]
                )
        servers = " ".join(s["series"] for s in test["input_series"])
        for case_name in ("count-minus-one", "count-plus-one", "share-minus-one", "share-plus-one"):
            assert f'server_address="{case_name}"' in servers
    assert set(covered) == set(COUNT_AND_SHARE)
    assert all(cases == {"count-plus-one", "share-plus-one"} for cases in covered.values())


def _threshold_tests_against(rules: list[Any], promtool: str, tmp_path: Path) -> Any:
    """promtool's run of the committed threshold tests against ``rules`` instead of the
    committed alert file (the tests name it as ../pairwatch-alerts.yaml)."""
    import alert_yaml

    (tmp_path / "pairwatch-alerts.yaml").write_text(
        alert_yaml.render(alert_yaml.DEFAULT, rules=rules), "utf-8"
    )
    tests_dir = tmp_path / "tests"
    tests_dir.mkdir()
    source = RULES_DIR / "tests" / "pairwatch-thresholds.test.yaml"
    (tests_dir / source.name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    return run([promtool, "test", "rules", str(tests_dir / source.name)])


def test_threshold_tests_fail_when_a_threshold_moves(promtool: str, tmp_path: Path) -> None:
    """Rules whose minimum counts are one higher than the tests expect must fail the
    threshold tests (the plus-one case stops firing), so passing them means something."""
    import alerts

    moved = [replace(a, min_batches=a.min_batches + 2) for a in alerts.DIAGNOSIS_ALERTS]
    rules = [
        *(alerts.diagnosis_rule(a) for a in moved),
        alerts.late_rule(min_count=alerts.LATE_MIN_COUNT + 2),
        alerts.mismatch_rule(),
    ]
    result = _threshold_tests_against(rules, promtool, tmp_path)
    assert result.returncode != 0
    for name in [*(a.name for a in moved), "PairwatchLateResponses"]:
        assert f'alertname="{name}"' in result.stdout + result.stderr, name


def test_late_threshold_tests_fail_when_its_share_moves(promtool: str, tmp_path: Path) -> None:
    """The late alert's share is its own (late replies per request sent): a rule whose share
    is a tenth of a percent higher must stop the share-plus-one case from firing."""
    import alerts

    rules = [
        *(alerts.diagnosis_rule(a) for a in alerts.DIAGNOSIS_ALERTS),
        alerts.late_rule(min_share=alerts.LATE_MIN_SHARE + 0.001),
        alerts.mismatch_rule(),
    ]
    result = _threshold_tests_against(rules, promtool, tmp_path)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert 'alertname="PairwatchLateResponses"' in out
    assert 'server_address="share-plus-one"' in out
    for a in alerts.DIAGNOSIS_ALERTS:  # every other alert still passes
        assert f'alertname="{a.name}"' not in out, a.name


def test_late_alert_reads_the_late_counter_not_the_diagnosis(yaml_module: Any) -> None:
    """A late reply on a stream closes no batch as late_response (the batch it belongs to
    closed at its timeout), so an alert on that diagnosis could not fire; the scenario in
    pairwatch-alerts.test.yaml proves it fires without one. Here: the lateness buckets the
    description names are the ones pairwatch exports."""
    import alerts

    from pairwatch.otel.names import LATENCY_BUCKETS

    (rule,) = [r for r in _alerts(yaml_module) if r["alert"] == "PairwatchLateResponses"]
    assert "batch_late_response_total" in rule["expr"]
    assert "batch_requests_total" in rule["expr"]
    assert "batch_closed_total" not in rule["expr"] + rule["annotations"]["description"]
    assert LATENCY_BUCKETS[-2:] == (alerts.LATENESS_BELOW_TOP, alerts.LATENESS_TOP_BOUND)


def test_runbook_states_every_threshold(yaml_module: Any) -> None:
    """Each alert's runbook section states its severity, window, minimum count, share and
    `for:` with the numbers the rules use."""
    import alerts

    text = RUNBOOK.read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## (Pairwatch\w+)\n(.*?)(?=^## |\Z)", text, re.M | re.S))
    expected = {
        a.name: (a.severity, a.min_batches, alerts.percent(a.min_share), a.for_)
        for a in alerts.DIAGNOSIS_ALERTS
    }
    expected["PairwatchLateResponses"] = (
        "warning",
        alerts.LATE_MIN_COUNT,
        alerts.percent(alerts.LATE_MIN_SHARE),
        alerts.FOR_BY_SEVERITY["warning"],
    )
    expected["PairwatchResponseCountMismatch"] = (
        "info",
        alerts.MISMATCH_MIN_COUNT,
        alerts.percent(alerts.MISMATCH_MIN_SHARE),
        alerts.FOR_BY_SEVERITY["info"],
    )
    assert set(sections) == set(EXPECTED_ALERTS)
    for name, (severity, blame) in EXPECTED_ALERTS.items():
        head = sections[name].strip().split("\n\n")[0]
        assert f"**Severity:** {severity}" in head, name
        assert f"**Blame:** `{blame}`" in head, name
    for name, (severity, count, share, for_) in expected.items():
        head = sections[name].strip().split("\n\n")[0]
        assert f"**Severity:** {severity}" in head, name
        assert f"at least {count} " in head, f"{name}: minimum {count} not stated"
        assert f"{share} " in head, f"{name}: share {share} not stated"
        assert f"`for: {for_}`" in head, f"{name}: for {for_} not stated"
        assert f"in {alerts.WINDOW}" in head, name
        # The summary tables of the runbook and of dashboards/README.md say the same.
        (row,) = re.findall(rf"^\| {name} \|.*$", text, re.M)
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == severity, row
        assert cells[3].startswith(f"{count} "), row
        assert cells[4].startswith(f"{share} "), row
        assert cells[5] == for_, row
        (row,) = re.findall(rf"^\| {name} \|.*$", README.read_text(encoding="utf-8"), re.M)
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == severity, row
        assert f">= {count} " in cells[2], row
        assert f">= {share} " in cells[2], row
        assert cells[3] == for_, row


def test_runbook_names_only_labels_the_rules_keep() -> None:
    """Every label the runbook tells operators to check is on the alerts or on a series the
    dashboard shows it by (a `sum by` of a recording rule or of a panel query)."""
    recording = (RULES_DIR / "pairwatch-recording.yaml").read_text(encoding="utf-8")
    dashboard = (REPO_ROOT / "dashboards" / "pairwatch.json").read_text(encoding="utf-8")
    groups = re.findall(r"sum by \(([^)]*)\)", recording + dashboard)
    kept = {label.strip() for group in groups for label in group.split(",")}
    kept |= set(TARGET_LABELS) | {"severity", "alertname"}
    named = set(
        re.findall(
            r"`((?:pairwatch|rpc|server|job|instance)\w*)`", RUNBOOK.read_text(encoding="utf-8")
        )
    )
    import alerts

    from pairwatch.alerting.blame import BLAMES

    diagnoses = {a.diagnosis for a in alerts.DIAGNOSIS_ALERTS} | set(BLAMES)  # values
    named = {n for n in named - diagnoses if not n.endswith(("_total", "_bucket", "_seconds"))}
    assert {"pairwatch_close_reason", "pairwatch_diagnosis", "instance"} <= named
    assert not named - kept, f"the runbook names labels no rule keeps: {named - kept}"


def test_inhibit_rules(yaml_module: Any) -> None:
    doc = yaml_module.safe_load(INHIBIT.read_text(encoding="utf-8"))
    rule = doc["inhibit_rules"][0]
    assert rule["equal"] == TARGET_LABELS
    assert rule["target_matchers"] == ['alertname="PairwatchResponseCountMismatch"']
    (source,) = rule["source_matchers"]
    match = re.fullmatch(r'alertname=~"(.*)"', source)
    assert match
    # Every alert that names a side of a target explains a count mismatch there.
    assert set(match.group(1).split("|")) == {
        name for name, (_, blame) in EXPECTED_ALERTS.items() if blame != "none"
    } - {"PairwatchResponseCountMismatch", "PairwatchNetworkLosesReplies"}
    # No rule holds back an alert of another side: equal always keeps blame or the job.
    for rule in doc["inhibit_rules"][1:]:
        assert "blame" in rule["equal"] or rule["equal"] == ["job"], rule


def test_runbook_blame_tables_are_blame_py() -> None:
    """The runbook's two blame tables say what src/pairwatch/alerting/blame.py says."""
    from pairwatch.alerting import blame

    rows = dict(re.findall(r"^\| `(\w+)` \| `(\w+)` \|", RUNBOOK.read_text("utf-8"), re.M))
    assert {k: v for k, v in rows.items() if k in blame.BY_CLOSE_REASON} == blame.BY_CLOSE_REASON
    assert {k: v for k, v in rows.items() if k in blame.BY_DIAGNOSIS} == blame.BY_DIAGNOSIS
    assert set(rows) == set(blame.BY_CLOSE_REASON) | set(blame.BY_DIAGNOSIS)


def _slo_tests_against(
    promtool: str,
    tmp_path: Path,
    *,
    alerts: str | None = None,
    slo: str | None = None,
    tests: str = "pairwatch-slo.test.yaml",
) -> subprocess.CompletedProcess[str]:
    """promtool's run of committed generated tests against other alert or SLO rule files."""
    tmp_path.mkdir(exist_ok=True)
    for name, text in (("pairwatch-alerts.yaml", alerts), ("pairwatch-slo.yaml", slo)):
        source = (RULES_DIR / name).read_text(encoding="utf-8")
        (tmp_path / name).write_text(text if text is not None else source, encoding="utf-8")
    (tmp_path / "tests").mkdir()
    test = tmp_path / "tests" / tests
    test.write_text((RULES_DIR / "tests" / test.name).read_text(encoding="utf-8"), "utf-8")
    return run([promtool, "test", "rules", str(test)])


def test_slo_tests_fail_when_a_client_bug_spends_the_server_budget(
    promtool: str, tmp_path: Path
) -> None:
    """Without the duplicate ids taken off, the client's reused ids page the server."""
    slo = (RULES_DIR / "pairwatch-slo.yaml").read_text(encoding="utf-8")
    assert "batch_duplicate_id_total" in slo
    result = _slo_tests_against(
        promtool, tmp_path, slo=slo.replace("batch_duplicate_id_total", "no_such_series_total")
    )
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert 'alertname="PairwatchServerOmitsRepliesFastBurn"' in out
    assert 'job="client-bug"' in out


def test_slo_tests_fail_when_the_objective_or_the_alert_set_moves(
    promtool: str, tmp_path: Path
) -> None:
    import alert_yaml

    looser = alert_yaml.render(alert_yaml.Config(objective=0.99))
    result = _slo_tests_against(promtool, tmp_path / "objective", alerts=looser)
    assert result.returncode != 0
    assert 'job="burn6x"' in result.stdout + result.stderr
    no_scrape = alert_yaml.render(alert_yaml.Config(scrape_alert=False))
    result = _slo_tests_against(
        promtool, tmp_path / "scrape", alerts=no_scrape, tests="pairwatch-liveness.test.yaml"
    )
    assert result.returncode != 0
    assert "PairwatchScrapeDown" in result.stdout + result.stderr
