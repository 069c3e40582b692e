"""Structural end-to-end check: every dashboard query, including the ones a healthy
`pairwatch demo` cannot feed, returns data from well-formed pairwatch-shaped series.

The real end-to-end test (test_e2e_prometheus.py) scrapes `pairwatch demo`. This one keeps a
fake scrape target, prometheus_client serving invented series that follow docs/metrics.md
(same names and labels, plus an otel_scope_* label to aggregate away), because some panel
queries read counters that only move when something is wrong with pairwatch itself
(`pairwatch_internal_errors_total`), which no honest demo run produces, and because it
pins each diagnosis to its own transport, so each alert can be checked against the others.
A real Prometheus scrapes it with the repository's rule files loaded.

prometheus missing: skipped with an install hint, failed under CI=true (see conftest.py).
Everything listens on 127.0.0.1 only; the module takes about 10 s.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_support import active_alerts, alert_state, queries_without_data
from live import PrometheusServer, free_port, start_prometheus, wait_for
from queries import load_dashboard, panel_queries

DATA_TIMEOUT = 40.0  # seconds to wait for every panel to have data

# --- the fake scrape target ---------------------------------------------------------------

COMMON = ["rpc_system_name", "pairwatch_transport", "pairwatch_integration", "server_address"]
COMMON += ["jsonrpc_batch", "otel_scope_name"]

# transport -> (server_address, fault). "" as server_address means the label is absent.
CHANNELS = {
    "http": ("rpc.example", "client_duplicate_ids"),  # duplicates sent, unknown + missing
    "stdio": ("", "malformed_request_element"),  # null alone
    # missing, and late replies that close no batch as late_response (as on a real stream)
    "websocket": ("node.example", "responses_missing"),
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
            "batch_size", "elements", COMMON, buckets=(1, 2, 4, 8, 16, 32, 64), registry=r
        )
        self.lateness = Histogram(
            "batch_response_lateness_seconds",
            "lateness",
            COMMON,
            buckets=(0.1, 0.5, 1.0, 5.0, 10.0),
            registry=r,
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
        self.late = counter("batch_late_response", [])
        self.withdrawn = counter("batch_withdrawn_request", ["pairwatch_reason"])
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
            self.withdrawn.labels(**common, pairwatch_reason="cancelled").inc()
            self.closed.labels(
                **common, pairwatch_diagnosis=fault, pairwatch_close_reason="timeout"
            ).inc()
            if fault == "client_duplicate_ids":
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
                self.late.labels(**common).inc()
                self.unknown.labels(**common).inc()
                self.lateness.labels(**common).observe(rnd.uniform(0.2, 3.0))
            elif fault == "server_id_echo_fault":
                self.unknown.labels(**common).inc(0.5)
                self.out_of_order.labels(**common).inc()
                self.violation.labels(**common, pairwatch_reason="reply_to_notifications").inc()


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fake_exporter(prometheus_client_available: None) -> Iterator[str]:
    exporter = FakePairwatchExporter()
    target = exporter.start()
    yield target
    exporter.stop()


@pytest.fixture(scope="module")
def fake_prometheus(
    prometheus_bin: str, fake_exporter: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    server = start_prometheus(
        prometheus_bin, tmp_path_factory.mktemp("prometheus-fake"), {"pairwatch": [fake_exporter]}
    )
    yield server
    server.stop()


# --- tests --------------------------------------------------------------------------------


# (panel id, refId) -> why no series here can feed it.
NOT_FED: dict[tuple[int, str], str] = {
    (2, "B"): "offset 1d: this Prometheus started seconds ago",
    (9, "A"): "lost_in_transit joins client and server books; this exporter has one side",
}


def _missing(base_url: str) -> list[Any]:
    return [
        item
        for item in queries_without_data(base_url)
        if item.reason != "no data" or (item.query.panel_id, item.query.ref_id) not in NOT_FED
    ]


def test_every_panel_query_returns_data(fake_prometheus: PrometheusServer) -> None:
    empty = wait_for(lambda: _missing(fake_prometheus.base_url), lambda e: not e, DATA_TIMEOUT)
    assert not empty, "queries without data:\n" + "\n".join(map(str, empty))


def test_helper_reports_queries_without_data(fake_prometheus: PrometheusServer) -> None:
    """With a filter that matches nothing, every query must be reported empty."""
    wait_for(lambda: _missing(fake_prometheus.base_url), lambda e: not e, DATA_TIMEOUT)
    empty = queries_without_data(fake_prometheus.base_url, values={"job": "no-such-job"})
    assert len(empty) == len(panel_queries(load_dashboard()))
    assert all(item.reason == "no data" for item in empty)


def test_each_diagnosis_raises_its_own_alert(fake_prometheus: PrometheusServer) -> None:
    """One diagnosis per transport (and server): each raises its alert and not the others'.
    Alerts carry no transport (one page per fault): they are told apart by server."""
    expected = {
        "rpc.example": "PairwatchClientDuplicateIds",
        "": "PairwatchMalformedRequestElements",
        "mcp.example": "PairwatchServerIdEchoFault",
        # timeouts and drops on a stream: the hung-or-unreachable side's page
        "node.example": "PairwatchServerOrNetworkLosesRepliesFastBurn",
    }
    late = "PairwatchLateResponses"
    alerts = wait_for(
        lambda: active_alerts(fake_prometheus.base_url),
        lambda a: (
            all(alert_state(a, n, server_address=s) for s, n in expected.items())
            and alert_state(a, late, server_address="node.example") is not None
        ),
        DATA_TIMEOUT,
    )
    # The late alert reads batch_late_response_total: it is raised where late replies are
    # counted although no batch there closed as late_response, and nowhere else.
    for server in expected:
        state = alert_state(alerts, late, server_address=server)
        if server == "node.example":
            assert state in {"pending", "firing"}
        else:
            assert state is None, server
    for server, name in expected.items():
        assert alert_state(alerts, name, server_address=server) in {"pending", "firing"}
        for other_name in expected.values():
            if other_name != name and "Burn" not in other_name:
                # A diagnosis alert only where its diagnosis is (a burn is an impact alert
                # and may also be raised by the missing replies of another diagnosis).
                assert alert_state(alerts, other_name, server_address=server) is None, (
                    server,
                    other_name,
                )
