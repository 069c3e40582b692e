"""The inhibit rules in a real Alertmanager: the count-mismatch info alert is held back while
an alert naming the cause fires for the same target, and only then.

Alerts are posted to Alertmanager's API the way Prometheus sends them; the API then says
which alerts are inhibited and by what. amtool checks the config first.

Alertmanager missing: skipped with an install hint (Debian's `prometheus-alertmanager`),
failed under CI=true. Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from conftest import missing
from live import HOST, free_port, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
INHIBIT = REPO_ROOT / "dashboards" / "alertmanager" / "pairwatch-inhibit.yaml"
HINT = "alertmanager not installed: run `apt-get install prometheus-alertmanager`"

ROUTE = """\
route:
  receiver: nobody
  group_by: [alertname, job]
receivers:
  - name: nobody
"""


def _binary(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    missing(HINT)
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = _binary("alertmanager", "prometheus-alertmanager")
    workdir = tmp_path_factory.mktemp("alertmanager")
    config = workdir / "alertmanager.yml"
    config.write_text(ROUTE + INHIBIT.read_text(encoding="utf-8"), encoding="utf-8")
    amtool = shutil.which("amtool")
    if amtool:
        check = subprocess.run(
            [amtool, "check-config", str(config)], capture_output=True, text=True, timeout=30
        )
        assert check.returncode == 0, check.stdout + check.stderr
        count = INHIBIT.read_text(encoding="utf-8").count("- source_matchers:")
        assert f"{count} inhibit rules" in check.stdout
    port = free_port()
    log = workdir / "alertmanager.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.path={workdir / 'data'}",
                f"--web.listen-address={HOST}:{port}",
                "--cluster.listen-address=",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    base = f"http://{HOST}:{port}"

    def ready() -> bool:
        if process.poll() is not None:
            return True
        try:
            with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    try:
        started = wait_for(ready, bool, 20.0)
        assert started, log.read_text(errors="replace")
        assert process.poll() is None, log.read_text(errors="replace")
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _alert(name: str, severity: str, **labels: str) -> dict[str, Any]:
    now = datetime.now(timezone.utc)
    return {
        "labels": {"alertname": name, "severity": severity, **labels},
        "annotations": {"summary": name},
        "startsAt": now.isoformat(),
        "endsAt": (now + timedelta(minutes=10)).isoformat(),
    }


def _post(base: str, alerts: list[dict[str, Any]]) -> None:
    request = urllib.request.Request(
        f"{base}/api/v2/alerts",
        data=json.dumps(alerts).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def _states(base: str) -> dict[tuple[str, str], list[str]]:
    """(alertname, server_address) -> the fingerprints of the alerts that inhibit it."""
    with urllib.request.urlopen(f"{base}/api/v2/alerts", timeout=10) as response:
        body = json.load(response)
    return {
        (a["labels"]["alertname"], a["labels"].get("server_address", "")): a["status"][
            "inhibitedBy"
        ]
        for a in body
    }


def test_count_mismatch_is_folded_under_the_cause(alertmanager: str) -> None:
    target = {"job": "app"}
    _post(
        alertmanager,
        [
            # rpc.example: the echo fault names the cause, so the mismatch is held back.
            _alert("PairwatchServerIdEchoFault", "warning", **target, server_address="rpc.example"),
            _alert(
                "PairwatchResponseCountMismatch", "info", **target, server_address="rpc.example"
            ),
            # node.example: a mismatch with no cause alert on its target goes through.
            _alert(
                "PairwatchResponseCountMismatch", "info", **target, server_address="node.example"
            ),
            # stdio: no server_address on either alert; `equal` treats absent as equal.
            _alert("PairwatchServerNullIds", "warning", job="app"),
            _alert("PairwatchResponseCountMismatch", "info", job="app"),
        ],
    )
    states = wait_for(
        lambda: _states(alertmanager),
        lambda s: len(s) >= 5 and bool(s.get(("PairwatchResponseCountMismatch", "rpc.example"))),
        20.0,
    )
    assert states[("PairwatchResponseCountMismatch", "rpc.example")], states
    assert states[("PairwatchResponseCountMismatch", "node.example")] == [], states
    assert states[("PairwatchResponseCountMismatch", "")], states
    # Cause alerts are never inhibited: a client and a server fault both reach someone.
    assert states[("PairwatchServerIdEchoFault", "rpc.example")] == [], states
    assert states[("PairwatchServerNullIds", "")] == [], states


def test_side_keeps_client_and_server_counts_apart(alertmanager: str) -> None:
    """A cause counted on the server side does not hold back a mismatch counted on the
    client side (pairwatch_side is in `equal`)."""
    target = {"job": "gw", "server_address": "side.example"}
    _post(
        alertmanager,
        [
            _alert("PairwatchClientDuplicateIds", "critical", **target, pairwatch_side="server"),
            _alert("PairwatchResponseCountMismatch", "info", **target, pairwatch_side="client"),
        ],
    )
    states = wait_for(
        lambda: _states(alertmanager),
        lambda s: ("PairwatchResponseCountMismatch", "side.example") in s,
        20.0,
    )
    assert states[("PairwatchResponseCountMismatch", "side.example")] == [], states


def test_one_fault_one_notification(alertmanager: str) -> None:
    """A fast burn holds back the slow burn of its side and target, not another side's; a
    failing scrape holds back the absence of its job, not another job's."""
    target = {"job": "slo", "server_address": "burn.example"}
    _post(
        alertmanager,
        [
            _alert("PairwatchServerOmitsRepliesFastBurn", "critical", **target, blame="server"),
            _alert("PairwatchServerOmitsRepliesSlowBurn", "warning", **target, blame="server"),
            _alert(
                "PairwatchServerOrNetworkLosesRepliesSlowBurn",
                "warning",
                **target,
                blame="server_or_network",
            ),
            _alert("PairwatchScrapeDown", "warning", job="dead", instance="h:1", blame="none"),
            _alert("PairwatchJobAbsent", "warning", job="dead", blame="none"),
            _alert("PairwatchJobAbsent", "warning", job="other", blame="none"),
        ],
    )

    def by_job(base: str) -> dict[tuple[str, str], list[str]]:
        with urllib.request.urlopen(f"{base}/api/v2/alerts", timeout=10) as response:
            body = json.load(response)
        return {
            (a["labels"]["alertname"], a["labels"]["job"]): a["status"]["inhibitedBy"]
            for a in body
            if a["labels"]["job"] in ("slo", "dead", "other")
        }

    states = wait_for(
        lambda: by_job(alertmanager),
        lambda s: len(s) >= 6 and bool(s.get(("PairwatchJobAbsent", "dead"))),
        20.0,
    )
    assert states[("PairwatchServerOmitsRepliesSlowBurn", "slo")], states
    assert states[("PairwatchServerOrNetworkLosesRepliesSlowBurn", "slo")] == [], states
    assert states[("PairwatchServerOmitsRepliesFastBurn", "slo")] == [], states
    assert states[("PairwatchJobAbsent", "dead")], states
    assert states[("PairwatchJobAbsent", "other")] == [], states
    assert states[("PairwatchScrapeDown", "dead")] == [], states
