"""End to end: six real `pairwatch demo` jobs, a real Prometheus with the rules, and a real
Alertmanager with dashboards/README.md's routing-by-blame example and the inhibit rules:
which alert fires for which job, with which `blame`, and which receiver it reaches.

    healthy        no fault, no client bug: no alert, ever
    server-faults  dropped and duplicated replies: the server's echo-fault
                   alert reaches the server team; nothing blames the client
    client-bug     the client reuses an id in 10% of its batches: the client alert reaches
                   the client team; nothing blames the server or the network
    drop-all       the server drops every reply: the server's "answers nothing" page
    hang           the server answers every request after the client's timeout: the
                   server-or-network "answers nothing" page (the client cannot tell which)
    quiet          one request every 2.5 s, every reply dropped: it pages (no minimum
                   traffic), with the server blamed

Short runs: the rules are rendered with every window and `for:` scaled by SCALE (1/20 by
default: the burn rate's 1h window is 3 minutes, `for: 15m` is 45 s, the quiet job's one
request per 50 s is one per 2.5 s), the honest way to watch the real expressions fire in a
minute or two (pairwatch.alerting.rules.Config.time_scale). PAIRWATCH_E2E_SCALE=1 runs them
unscaled, which takes hours (the long scenario). The module takes about 2 minutes.

prometheus or alertmanager missing: skipped with an install hint, failed under CI=true.
Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import missing
from live import (
    REPO_ROOT,
    AlertmanagerServer,
    Demo,
    PrometheusServer,
    api_get,
    start_alertmanager,
    start_demo,
    start_prometheus,
    wait_for,
)

from pairwatch.alerting import render
from pairwatch.alerting.rules import Config

SCALE = float(os.environ.get("PAIRWATCH_E2E_SCALE", str(1 / 20)))
# Seconds for every expected alert to reach Alertmanager: about 50 on an idle machine.
ALERT_TIMEOUT = 150.0 / 20 / SCALE
ALERTMANAGER_HINT = (
    "alertmanager not installed: run `apt-get install prometheus-alertmanager` (done by .ci/run)"
)

# job -> (--faults, --client-bug, --rate, extra demo arguments)
DEMOS: dict[str, tuple[str, float, float, tuple[str, ...]]] = {
    "healthy": ("none", 0.0, 8.0, ()),
    # the SRE's drop=0.03,duplicate=0.03 with more duplicates: a 15 s window must hold the
    # echo-fault alert's minimum of 5 batches
    "server-faults": ("drop=0.03,duplicate=0.1", 0.0, 16.0, ()),
    "client-bug": ("none", 0.1, 8.0, ()),
    "drop-all": ("drop:fraction=1=1", 0.0, 4.0, ()),
    "hang": ("delay:seconds=1.5=1", 0.0, 4.0, ("--timeout", "0.5")),
    "quiet": ("drop:fraction=1=1", 0.0, 0.4 * 20 * SCALE, ("--batch-size", "1")),
}
# job -> the (alert, blame, receiver) that must reach Alertmanager un-inhibited.
EXPECTED: dict[str, set[tuple[str, str, str]]] = {
    "server-faults": {("PairwatchServerIdEchoFault", "server", "server-team")},
    "client-bug": {("PairwatchClientDuplicateIds", "client", "client-team")},
    "drop-all": {("PairwatchServerAnswersNothing", "server", "server-team")},
    "hang": {
        (
            "PairwatchServerOrNetworkAnswersNothing",
            "server_or_network",
            "server-and-network-oncall",
        )
    },
    "quiet": {("PairwatchServerAnswersNothing", "server", "server-team")},
}
# job -> what else may reach a receiver by the time the expected alerts have, depending on
# the demo's random draws and timing (each with the right blame and receiver).
MAY_ALSO: dict[str, set[tuple[str, str, str]]] = {
    # 3% of batches drop one reply of 8: 3.75x the budget, over the slow burn's 3x
    "server-faults": {("PairwatchServerOmitsRepliesSlowBurn", "server", "server-team")},
    # the replies come, after the timeout: late, the server's
    "hang": {("PairwatchLateResponses", "server", "server-team")},
}
# job -> the blames an alert of that job may ever carry (from Prometheus's ALERTS history).
ALLOWED_BLAMES: dict[str, set[str]] = {
    "healthy": set(),
    "server-faults": {"server", "server_or_network"},
    "client-bug": {"client"},
    "drop-all": {"server", "server_or_network"},
    # a slow server answers after the timeout: its late replies blame the server
    "hang": {"server", "server_or_network"},
    # the count-mismatch info alert (server or network) is held back by "answers nothing"
    "quiet": {"server", "server_or_network"},
}


def routing_example() -> str:
    """The Alertmanager routing block of dashboards/README.md, exactly as documented."""
    text = (REPO_ROOT / "dashboards" / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```yaml\n(# alertmanager\.yml: pairwatch alerts routed.*?)```", text, re.S)
    assert match, "dashboards/README.md lost its routing example"
    return match.group(1)


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AlertmanagerServer]:
    binary = shutil.which("alertmanager") or shutil.which("prometheus-alertmanager")
    if binary is None:
        missing(ALERTMANAGER_HINT)
    assert binary is not None
    inhibit = render.render_inhibit(Config())
    config = routing_example() + "\n" + inhibit[inhibit.index("\ninhibit_rules:\n") + 1 :]
    server = start_alertmanager(binary, tmp_path_factory.mktemp("alertmanager"), config)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stack(
    prometheus_bin: str,
    alertmanager: AlertmanagerServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[PrometheusServer]:
    rules_dir = tmp_path_factory.mktemp("rules")
    cfg = Config(time_scale=SCALE)
    (rules_dir / "pairwatch-slo.yaml").write_text(render.render_slo(cfg), encoding="utf-8")
    (rules_dir / "pairwatch-alerts.yaml").write_text(render.render(cfg), encoding="utf-8")
    workdir = tmp_path_factory.mktemp("demos")
    demos: dict[str, Demo] = {}
    server: PrometheusServer | None = None
    try:
        for seed, (job, (faults, bug, rate, extra)) in enumerate(DEMOS.items(), start=1):
            demos[job] = start_demo(
                job, workdir, faults=faults, client_bug=bug, rate=rate, seed=seed, extra=extra
            )
        server = start_prometheus(
            prometheus_bin,
            tmp_path_factory.mktemp("prometheus-blame"),
            {job: [demo.target] for job, demo in demos.items()},
            rule_files=sorted(rules_dir.glob("*.yaml")),
            alertmanager=alertmanager.target,
        )
        yield server
    finally:
        if server is not None:
            server.stop()
        for demo in demos.values():
            demo.stop()


def delivered(alertmanager: AlertmanagerServer) -> dict[str, set[tuple[str, str, str]]]:
    """job -> (alert, blame, receiver) of every active, un-inhibited pairwatch alert."""
    with urllib.request.urlopen(f"{alertmanager.base_url}/api/v2/alerts", timeout=10) as r:
        body: list[dict[str, Any]] = json.load(r)
    found: dict[str, set[tuple[str, str, str]]] = {}
    for alert in body:
        labels = alert["labels"]
        if alert["status"]["state"] != "active" or "job" not in labels:
            continue
        for receiver in alert["receivers"]:
            found.setdefault(labels["job"], set()).add(
                (labels["alertname"], labels["blame"], receiver["name"])
            )
    return found


def ever_active(base_url: str) -> dict[str, set[tuple[str, str]]]:
    """job -> (alert, blame) of every pairwatch alert pending or firing during the run."""
    body = api_get(
        base_url,
        "/api/v1/query",
        {"query": 'max_over_time(ALERTS{alertname=~"Pairwatch.*"}[1h])'},
    )
    found: dict[str, set[tuple[str, str]]] = {}
    for result in body["data"]["result"]:
        metric = result["metric"]
        found.setdefault(metric.get("job", ""), set()).add((metric["alertname"], metric["blame"]))
    return found


@pytest.mark.timeout(60 + ALERT_TIMEOUT)  # the demos' start and stop, and the wait
def test_each_fault_pages_the_side_it_blames(
    stack: PrometheusServer, alertmanager: AlertmanagerServer
) -> None:
    def complete(found: dict[str, set[tuple[str, str, str]]]) -> bool:
        return all(want <= found.get(job, set()) for job, want in EXPECTED.items())

    found = wait_for(lambda: delivered(alertmanager), complete, ALERT_TIMEOUT)
    for job in DEMOS:
        want = EXPECTED.get(job, set())
        assert want <= found.get(job, set()) <= want | MAY_ALSO.get(job, set()), (job, found)
    # One fault, one page: of each job's critical alerts, only the most specific reaches a
    # receiver (the burn rates are held back by "answers nothing").
    for job in ("drop-all", "hang", "quiet"):
        pages = {name for name, _, _ in found.get(job, set()) if "Burn" in name}
        assert not pages, (job, pages)
    # Nothing ever blamed a side the job's fault does not point at, and the healthy job
    # never had an alert at all, not even pending.
    history = ever_active(stack.base_url)
    for job, allowed in ALLOWED_BLAMES.items():
        blames = {blame for _, blame in history.get(job, set())}
        assert blames <= allowed, (job, history.get(job))
    assert history.get("healthy", set()) == set(), history.get("healthy")
    assert ("PairwatchClientDuplicateIds", "client") in history["client-bug"]


def test_the_routing_example_is_valid(tmp_path: Path) -> None:
    """amtool accepts the README's block with the inhibit rules appended."""
    amtool = shutil.which("amtool")
    if amtool is None:
        missing(ALERTMANAGER_HINT)
    assert amtool is not None
    import subprocess

    inhibit = render.render_inhibit(Config())
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        routing_example() + inhibit[inhibit.index("\ninhibit_rules:\n") + 1 :], "utf-8"
    )
    done = subprocess.run(
        [amtool, "check-config", str(config)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 receivers" in done.stdout
