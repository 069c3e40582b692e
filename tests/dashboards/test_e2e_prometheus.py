"""End to end: a real Prometheus scrapes real `pairwatch demo` processes, loads the
repository's rule files, and every dashboard query returns data; the alerts go pending.

Four demos run side by side, one Prometheus job each, so that every pattern the
co-occurrence panel and the alerts tell apart has a job/transport/server of its own
(a single demo with the default mix only ever shows "unknown and missing together"):

    demo-duplicate-ids  wrong_id (unknown and missing together) plus --client-bug (client
                        reuses ids), reorder, bad_version (invalid responses) and
                        single_for_batch (protocol violations)
    demo-null-id        null_id only
    demo-dropped        drop only (missing alone; over the 5% missing-ratio threshold)
    demo-echo-fault     duplicate only (unknown alone: a reply the server sent twice)

No rule window is shortened for the test: Prometheus scrapes and evaluates every second,
and the recording rules' rate(...[5m]) and the alerts' increase(...[10m]) return values as
soon as a window holds two samples, i.e. a few seconds after the first scrape. Alerts have
`for: 5m`/`10m`, so within the test they reach *pending*, which is what is asserted.

One query is exempt from "returns data" here, listed in NOT_FED_BY_A_HEALTHY_DEMO with the
reason; it must still run without error, and test_e2e_fake_exporter.py requires data for it.

prometheus missing: skipped with an install hint, failed under CI=true (see conftest.py).
Everything listens on 127.0.0.1 only; the module takes about 20-30 s.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support import EmptyQuery, active_alerts, alert_state, queries_without_data
from live import REPO_ROOT, Demo, PrometheusServer, start_demo, start_prometheus, wait_for

DATA_TIMEOUT = 45.0  # seconds to wait for every panel to have data

# job -> (--faults, --client-bug) of its `pairwatch demo`
DEMOS: dict[str, tuple[str, float]] = {
    "demo-duplicate-ids": (
        "wrong_id=0.3,reorder=0.3,bad_version=0.1,single_for_batch=0.1",
        0.2,
    ),
    "demo-null-id": ("null_id=0.3", 0.0),
    "demo-dropped": ("drop=0.6", 0.0),
    "demo-echo-fault": ("duplicate=0.3", 0.0),
}
DEMO_RATE = 12.0  # batches per second per demo: plenty of data, little CPU

# (panel id, refId) -> why a correct pairwatch under any fault mix leaves it empty.
NOT_FED_BY_A_HEALTHY_DEMO: dict[tuple[int, str], str] = {
    (19, "B"): (
        "pairwatch_internal_errors_total only exists once pairwatch itself failed and "
        "swallowed the error; server faults do not produce it"
    ),
}


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Demo]]:
    workdir = tmp_path_factory.mktemp("demos")
    started: dict[str, Demo] = {}
    try:
        for seed, (job, (faults, client_bug)) in enumerate(DEMOS.items(), start=1):
            started[job] = start_demo(
                job, workdir, faults=faults, client_bug=client_bug, rate=DEMO_RATE, seed=seed
            )
        yield started
    finally:
        for demo in started.values():
            demo.stop()


@pytest.fixture(scope="module")
def demo_prometheus(
    prometheus_bin: str, demos: dict[str, Demo], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    server = start_prometheus(
        prometheus_bin,
        tmp_path_factory.mktemp("prometheus-demo"),
        {job: [demo.target] for job, demo in demos.items()},
    )
    yield server
    server.stop()


def _missing_data(base_url: str) -> list[EmptyQuery]:
    """Queries without data, leaving out the exempt ones unless they failed outright."""
    return [
        item
        for item in queries_without_data(base_url)
        if item.reason != "no data"
        or (item.query.panel_id, item.query.ref_id) not in NOT_FED_BY_A_HEALTHY_DEMO
    ]


def test_every_panel_query_returns_data(demo_prometheus: PrometheusServer) -> None:
    # The first scrape lands a few seconds after start and rate() needs two samples:
    # poll for data rather than for readiness.
    empty = wait_for(lambda: _missing_data(demo_prometheus.base_url), lambda e: not e, DATA_TIMEOUT)
    assert not empty, "queries without data:\n" + "\n".join(map(str, empty))


def test_helper_reports_queries_without_data(demo_prometheus: PrometheusServer) -> None:
    """With a filter that matches nothing, every query is reported empty (so the test
    above cannot pass vacuously)."""
    empty = queries_without_data(demo_prometheus.base_url, values={"job": "no-such-job"})
    assert empty
    assert all(item.reason == "no data" for item in empty)


def test_alerts_go_pending_or_firing(demo_prometheus: PrometheusServer) -> None:
    base_url = demo_prometheus.base_url
    expected = [
        ("PairwatchDuplicateIdsSuspected", "demo-duplicate-ids"),
        ("PairwatchNullIdResponses", "demo-null-id"),
        ("PairwatchMissingResponseRatioHigh", "demo-dropped"),
        ("PairwatchResponseCountMismatch", "demo-dropped"),
        ("PairwatchUnknownIdResponses", "demo-echo-fault"),
    ]
    alerts = wait_for(
        lambda: active_alerts(base_url),
        lambda a: all(alert_state(a, name, job=job) for name, job in expected),
        DATA_TIMEOUT,
    )
    states = {(name, job): alert_state(alerts, name, job=job) for name, job in expected}
    assert all(state in {"pending", "firing"} for state in states.values()), states
    # Unknown alone (a server that sends a reply twice) is the echo-fault alert, not
    # duplicate ids; missing alone is not duplicate ids either.
    assert alert_state(alerts, "PairwatchDuplicateIdsSuspected", job="demo-echo-fault") is None
    assert alert_state(alerts, "PairwatchDuplicateIdsSuspected", job="demo-dropped") is None
    # Not asserted: PairwatchUnknownIdResponses staying off for demo-duplicate-ids. In the
    # first seconds increase() ignores each series' first sample, and missing is split
    # per method, so a sparse transport (sse) can briefly show unknown without missing and
    # go pending; `for: 5m` keeps that from firing, which this short test cannot observe.
    dup = next(
        a
        for a in alerts
        if a["labels"]["alertname"] == "PairwatchDuplicateIdsSuspected"
        and a["labels"]["job"] == "demo-duplicate-ids"
    )
    assert dup["labels"]["severity"] == "critical"
    assert "runbook.md#pairwatchduplicateidssuspected" in dup["annotations"]["runbook_url"]
    assert "demo-duplicate-ids" in dup["annotations"]["description"]
    # instance (and any otel_scope_* label) was summed away.
    assert "instance" not in dup["labels"]
    assert not any(name.startswith("otel_scope") for name in dup["labels"])


def test_render_png(
    demo_prometheus: PrometheusServer, matplotlib_available: None, tmp_path: Path
) -> None:
    wait_for(lambda: _missing_data(demo_prometheus.base_url), lambda e: not e, DATA_TIMEOUT)
    output = tmp_path / "pairwatch.png"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "dashboards" / "render_png.py"),
            "--prometheus",
            demo_prometheus.base_url,
            "--output",
            str(output),
            "--range",
            "1m",
            "--step",
            "1s",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = output.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 20_000
