"""The Prometheus rule files: promtool check + unit tests, and their shape.

promtool missing: skipped with an install hint, failed under CI=true (see conftest.py).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = REPO_ROOT / "dashboards" / "rules"
RULE_FILES = [RULES_DIR / "pairwatch-recording.yaml", RULES_DIR / "pairwatch-alerts.yaml"]
RULE_TESTS = sorted((RULES_DIR / "tests").glob("*.yaml"))
RUNBOOK = REPO_ROOT / "dashboards" / "runbook.md"
RUNBOOK_BASE = "https://github.com/OWNER/pairwatch/blob/main/dashboards/runbook.md#"

EXPECTED_ALERTS = {
    "PairwatchDuplicateIdsSuspected",
    "PairwatchNullIdResponses",
    "PairwatchMissingResponseRatioHigh",
    "PairwatchUnknownIdResponses",
    "PairwatchResponseCountMismatch",
}


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
    assert {rule["alert"] for rule in _alerts(yaml_module)} == EXPECTED_ALERTS


def test_alert_shape(yaml_module: Any) -> None:
    anchors = _runbook_anchors()
    for rule in _alerts(yaml_module):
        name = rule["alert"]
        assert re.fullmatch(r"\d+[smh]", str(rule.get("for", ""))), f"{name}: no for:"
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        annotations = rule["annotations"]
        assert annotations["summary"].strip(), name
        assert "$value" in annotations["description"], f"{name}: description lacks the value"
        assert "|" in annotations["description"], f"{name}: $value is not formatted"
        url = annotations["runbook_url"]
        assert url.startswith(RUNBOOK_BASE), f"{name}: {url}"
        anchor = url[len(RUNBOOK_BASE) :]
        assert anchor in anchors, f"{name}: runbook.md has no heading for #{anchor}"
        # Everything is aggregated per job/transport/server: no otel_scope_* or instance
        # label can split (or multiply) an alert.
        assert "sum by (job, pairwatch_transport, server_address)" in rule["expr"], name


def test_every_alert_is_unit_tested_firing_and_quiet(yaml_module: Any) -> None:
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
                    assert set(alert["exp_annotations"]) == {
                        "summary",
                        "description",
                        "runbook_url",
                    }, case["alertname"]
    assert firing >= EXPECTED_ALERTS, f"never tested firing: {EXPECTED_ALERTS - firing}"
    assert quiet >= EXPECTED_ALERTS, f"never tested quiet: {EXPECTED_ALERTS - quiet}"
