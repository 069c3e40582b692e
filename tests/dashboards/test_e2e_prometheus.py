"""End-to-end plumbing: a real Prometheus scrapes pairwatch-shaped metrics, loads the rule
files, and every dashboard query must return data.

TODO(e2e, issue 6): wire this to `pairwatch demo` once the demo exists.
    Today the scrape target is `fake_exporter` below: prometheus_client serving invented but
    well-formed series that follow docs/metrics.md (same names, same labels, an
    otel_scope_* label to aggregate away), with one fault pattern per transport. When the
    demo lands:
      1. add a fixture that starts `pairwatch demo` with its faults on (duplicate ids, null
         ids, dropped responses, reordering, ...) and its Prometheus endpoint on 127.0.0.1,
         and point `prometheus_server` at it instead of `fake_exporter`;
      2. keep test_every_panel_query_returns_data and
         test_duplicate_ids_alert_goes_pending_or_firing unchanged: they are the contract;
      3. call dashboards/render_png.py against that Prometheus from .ci/run (or a test) and
         commit the PNG for dashboards/README.md (issue 6, item 5).
    The helpers `queries_without_data`, `start_prometheus` and `wait_for` do not depend on the
    fake and are meant to be reused as they are.

prometheus missing: skipped with an install hint, failed under CI=true (see conftest.py).
Everything listens on 127.0.0.1 only; the whole module takes about 15-30 s.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from queries import DASHBOARD, PanelQuery, load_dashboard, panel_queries, substitute

REPO_ROOT = Path(__file__).resolve().parents[2]
RULE_FILES = [
    REPO_ROOT / "dashboards" / "rules" / "pairwatch-recording.yaml",
    REPO_ROOT / "dashboards" / "rules" / "pairwatch-alerts.yaml",
]
DATA_TIMEOUT = 40.0  # seconds to wait for every panel to have data

T = TypeVar("T")


# --- reusable helpers (independent of the fake exporter) ----------------------------------


@dataclass(frozen=True)
class EmptyQuery:
    """A dashboard query that returned nothing (or failed)."""

    query: PanelQuery
    sent: str
    reason: str

    def __str__(self) -> str:
        return (
            f"panel {self.query.panel_id} ({self.query.panel_title}) {self.query.ref_id}: "
            f"{self.reason}\n    {self.sent}"
        )


def api_get(base_url: str, path: str, params: Mapping[str, str] | None = None) -> Any:
    url = f"{base_url.rstrip('/')}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def queries_without_data(
    base_url: str,
    dashboard_path: Path = DASHBOARD,
    values: Mapping[str, str] | None = None,
) -> list[EmptyQuery]:
    """Run every panel query of the dashboard through /api/v1/query; return the empty ones.

    Template variables are replaced as Grafana's "All" would (`.*` regex matches; see
    dashboards/queries.py), or by `values`. A query that errors counts as empty, with the
    error as its reason.
    """
    empty: list[EmptyQuery] = []
    for query in panel_queries(load_dashboard(dashboard_path)):
        sent = substitute(query.expr, values)
        try:
            body = api_get(base_url, "/api/v1/query", {"query": sent})
        except OSError as error:  # HTTP 400 for a bad query, connection errors
            empty.append(EmptyQuery(query, sent, f"error: {error}"))
            continue
        if body.get("status") != "success":
            empty.append(EmptyQuery(query, sent, f"error: {body.get('error')}"))
        elif not body["data"]["result"]:
            empty.append(EmptyQuery(query, sent, "no data"))
    return empty


def wait_for(check: Callable[[], T], ok: Callable[[T], bool], timeout: float) -> T:
    """Call `check` until `ok(result)` or `timeout` seconds; return the last result."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if ok(result) or time.monotonic() > deadline:
            return result
        time.sleep(1.0)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class PrometheusServer:
    base_url: str
    process: subprocess.Popen[bytes]
    log: Path


def start_prometheus(
    prometheus_bin: str, workdir: Path, targets: list[str], job: str = "pairwatch"
) -> PrometheusServer:
    """Start a real Prometheus on 127.0.0.1 scraping `targets` every second, with the
    pairwatch rule files loaded and evaluated every second."""
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(path) for path in RULE_FILES],
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": targets}]}],
    }
    config_file = workdir / "prometheus.yml"
    config_file.write_text(json.dumps(config, indent=2), encoding="utf-8")  # JSON is YAML
    log = workdir / "prometheus.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [
                prometheus_bin,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    server = PrometheusServer(f"http://127.0.0.1:{port}", process, log)

    def ready() -> bool:
        if process.poll() is not None:
            return True  # reported below
        try:
            with urllib.request.urlopen(f"{server.base_url}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    wait_for(ready, bool, timeout=20)
    if process.poll() is not None:
        raise RuntimeError(f"prometheus exited: {log.read_text(errors='replace')[-2000:]}")
    return server


def stop_prometheus(server: PrometheusServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=10)


# --- the fake scrape target (to be replaced by `pairwatch demo`, see TODO above) ---------

COMMON = ["rpc_system_name", "pairwatch_transport", "pairwatch_integration", "server_address"]
COMMON += ["jsonrpc_batch", "otel_scope_name"]

# transport -> (server_address, fault). "" as server_address means the label is absent.
CHANNELS = {
    "http": ("rpc.example", "duplicate_ids"),  # unknown + missing
    "stdio": ("", "malformed_request_element"),  # null alone
    "websocket": ("node.example", "responses_missing"),  # missing alone
    "sse": ("mcp.example", "server_id_echo_fault"),  # unknown alone
}
METHODS = ["eth_call", "eth_getBalance", "tools/call"]


class FakePairwatchExporter:
    """pairwatch-shaped metrics with prometheus_client, advanced by a background thread."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry()
        r = self.registry

        def counter(name: str, extra: list[str]) -> Any:
            return Counter(name, name, [*COMMON, *extra], registry=r)

        self.size = Histogram(
            "batch_size", "elements", COMMON, buckets=(1, 2, 5, 10, 20, 50, 100), registry=r
        )
        self.latency = Histogram(
            "batch_pair_latency_seconds",
            "latency",
            [*COMMON, "rpc_method"],
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0),
            registry=r,
        )
        self.requests = counter("batch_requests", [])
        self.closed = counter("batch_closed", ["pairwatch_diagnosis", "pairwatch_close_reason"])
        self.unknown = counter("batch_unknown_id_response", [])
        self.missing = counter("batch_missing_response", ["rpc_method", "pairwatch_close_reason"])
        self.null = counter("batch_null_id_response", [])
        self.mismatch = counter("batch_response_count_mismatch", [])
        self.duplicate = counter("batch_duplicate_id", ["pairwatch_duplicate_scope"])
        self.invalid = counter("batch_invalid_response", ["pairwatch_reason"])
        self.out_of_order = counter("batch_out_of_order", [])
        self.violation = counter("batch_protocol_violation", ["pairwatch_reason"])
        self.internal = counter("pairwatch_internal_errors", ["pairwatch_error_kind"])
        self._random = random.Random(6)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-pairwatch", daemon=True)
        self._server: Any = None

    def start(self) -> str:
        from prometheus_client import start_http_server

        port = free_port()
        self._server, _ = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        self.tick()
        self._thread.start()
        return f"127.0.0.1:{port}"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            self.tick()

    def tick(self) -> None:
        rnd = self._random
        for transport, (server, fault) in CHANNELS.items():
            common = {
                "rpc_system_name": "jsonrpc",
                "pairwatch_transport": transport,
                "pairwatch_integration": "httpx" if transport == "http" else "generic",
                "server_address": server,
                "jsonrpc_batch": "true",
                "otel_scope_name": "pairwatch",
            }
            size = rnd.choice([1, 2, 3, 5, 8, 10, 20, 40])
            self.size.labels(**common).observe(size)
            self.requests.labels(**common).inc(size)
            for _ in range(size):
                method = rnd.choice(METHODS)
                self.latency.labels(**common, rpc_method=method).observe(rnd.expovariate(40))
            self.closed.labels(
                **common, pairwatch_diagnosis="ok", pairwatch_close_reason="complete"
            ).inc()
            self.closed.labels(
                **common, pairwatch_diagnosis=_diagnosis(fault), pairwatch_close_reason="timeout"
            ).inc()
            if fault == "duplicate_ids":
                self.unknown.labels(**common).inc()
                self.missing.labels(
                    **common, rpc_method="eth_call", pairwatch_close_reason="timeout"
                ).inc()
                self.duplicate.labels(**common, pairwatch_duplicate_scope="cross_batch").inc()
                self.mismatch.labels(**common).inc()
                self.internal.labels(**common, pairwatch_error_kind="ledger").inc(0.1)
            elif fault == "malformed_request_element":
                self.null.labels(**common).inc(2)
                self.invalid.labels(**common, pairwatch_reason="missing_result_and_error").inc()
            elif fault == "responses_missing":
                self.missing.labels(
                    **common, rpc_method="tools/call", pairwatch_close_reason="stream_dropped"
                ).inc(3)
                self.mismatch.labels(**common).inc()
            elif fault == "server_id_echo_fault":
                self.unknown.labels(**common).inc(0.5)
                self.out_of_order.labels(**common).inc()
                self.violation.labels(**common, pairwatch_reason="reply_to_notifications").inc()


def _diagnosis(fault: str) -> str:
    return "duplicate_ids_suspected" if fault == "duplicate_ids" else fault


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake_exporter(prometheus_client_available: None) -> Iterator[str]:
    exporter = FakePairwatchExporter()
    target = exporter.start()
    yield target
    exporter.stop()


@pytest.fixture(scope="module")
def prometheus_server(
    prometheus_bin: str, fake_exporter: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    server = start_prometheus(
        prometheus_bin, tmp_path_factory.mktemp("prometheus"), [fake_exporter]
    )
    yield server
    stop_prometheus(server)


# --- tests --------------------------------------------------------------------------------


def test_every_panel_query_returns_data(prometheus_server: PrometheusServer) -> None:
    # The first scrape lands a few seconds after start and rate() needs two samples:
    # poll for data rather than for readiness.
    empty = wait_for(
        lambda: queries_without_data(prometheus_server.base_url), lambda e: not e, DATA_TIMEOUT
    )
    assert not empty, "queries without data:\n" + "\n".join(map(str, empty))


def test_helper_reports_queries_without_data(prometheus_server: PrometheusServer) -> None:
    """With a filter that matches nothing, every query must be reported empty."""
    wait_for(
        lambda: queries_without_data(prometheus_server.base_url), lambda e: not e, DATA_TIMEOUT
    )
    empty = queries_without_data(prometheus_server.base_url, values={"job": "no-such-job"})
    assert len(empty) == len(panel_queries(load_dashboard()))
    assert all(item.reason == "no data" for item in empty)


def _active_alerts(base_url: str) -> list[dict[str, Any]]:
    body = api_get(base_url, "/api/v1/alerts")
    alerts: list[dict[str, Any]] = body["data"]["alerts"]
    return alerts


def _state(alerts: list[dict[str, Any]], name: str, transport: str) -> str | None:
    for alert in alerts:
        labels = alert["labels"]
        if labels["alertname"] == name and labels.get("pairwatch_transport") == transport:
            return str(alert["state"])
    return None


def test_duplicate_ids_alert_goes_pending_or_firing(prometheus_server: PrometheusServer) -> None:
    alerts = wait_for(
        lambda: _active_alerts(prometheus_server.base_url),
        lambda a: (
            _state(a, "PairwatchDuplicateIdsSuspected", "http") is not None
            and _state(a, "PairwatchUnknownIdResponses", "sse") is not None
        ),
        DATA_TIMEOUT,
    )
    assert _state(alerts, "PairwatchDuplicateIdsSuspected", "http") in {"pending", "firing"}
    # Unknown alone (sse) is the echo-fault alert, not duplicate ids.
    assert _state(alerts, "PairwatchUnknownIdResponses", "sse") in {"pending", "firing"}
    assert _state(alerts, "PairwatchDuplicateIdsSuspected", "sse") is None
    assert _state(alerts, "PairwatchNullIdResponses", "stdio") in {"pending", "firing"}
    dup = next(a for a in alerts if a["labels"]["alertname"] == "PairwatchDuplicateIdsSuspected")
    assert dup["labels"]["severity"] == "critical"
    assert "runbook.md#pairwatchduplicateidssuspected" in dup["annotations"]["runbook_url"]
    # otel_scope_name and instance were summed away.
    assert "otel_scope_name" not in dup["labels"]
    assert "instance" not in dup["labels"]


def test_render_png(
    prometheus_server: PrometheusServer, matplotlib_available: None, tmp_path: Path
) -> None:
    wait_for(
        lambda: queries_without_data(prometheus_server.base_url), lambda e: not e, DATA_TIMEOUT
    )
    output = tmp_path / "pairwatch.png"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "dashboards" / "render_png.py"),
            "--prometheus",
            prometheus_server.base_url,
            "--output",
            str(output),
            "--range",
            "2m",
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
