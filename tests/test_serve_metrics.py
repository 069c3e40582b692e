"""``pairwatch.serve_metrics``: the README's "metrics in your own app", end to end.

A real httpx client, instrumented with the endpoint's provider, talks to the real chaos
server on loopback; the counters are read back the way Prometheus reads them, by scraping
the endpoint over HTTP.
"""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest
from components import need
from prometheus_client.parser import text_string_to_metric_families

import pairwatch
from pairwatch.chaos import ChaosServer, Fault

httpx = need("httpx", "pip install 'pairwatch[httpx]'")


def scrape(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def batch(*ids: int) -> bytes:
    return json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [i]} for i in ids]
    ).encode()


def test_an_app_serves_its_pairing_counters_for_prometheus():
    with (
        pairwatch.serve_metrics(port=0) as metrics,
        ChaosServer([Fault("drop", indices=(1,)), Fault("reorder")]) as server,
    ):
        assert metrics.url == f"http://127.0.0.1:{metrics.port}/metrics"
        client = pairwatch.instrument(httpx.Client(), meter_provider=metrics.meter_provider)
        try:
            headers = {"Content-Type": "application/json"}
            client.post(server.url, content=batch(1, 2, 3), headers=headers)  # id 2 dropped
            client.post(server.url, content=batch(4, 5), headers=headers)  # reversed
            client.post(server.url, content=batch(6), headers=headers)  # clean
        finally:
            client.close()
        pairwatch.flush()
        seen = scrape(metrics.url)
    assert seen["batch_closed_total"] == 3
    assert seen["batch_requests_total"] == 6
    assert seen["batch_missing_response_total"] == 1
    assert seen["batch_out_of_order_total"] == 1
    assert seen.get("batch_unknown_id_response_total", 0) == 0
    assert seen["batch_pair_latency_seconds_count"] == 5


def test_close_frees_the_port_and_is_idempotent():
    metrics = pairwatch.serve_metrics(port=0)
    port = metrics.port
    assert scrape(metrics.url) == {}  # nothing recorded yet: an empty, valid page
    metrics.close()
    metrics.close()
    assert repr(metrics) == f"<MetricsEndpoint http://127.0.0.1:{port}/metrics closed>"
    with socket.socket() as s:
        # SO_REUSEADDR lets a bind through the scrape's TIME_WAIT, never past a listener.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()
    again = pairwatch.serve_metrics(port=port)
    try:
        assert again.port == port
    finally:
        again.close()


def test_a_busy_port_raises_at_start_not_later():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        with pytest.raises(OSError, match="in use"):
            pairwatch.serve_metrics(port=holder.getsockname()[1])


def test_the_documented_module_paths_resolve_after_import_pairwatch():
    """The docstrings name pairwatch.serve_metrics and pairwatch.otel.exposition.serve; both
    must be reachable from a plain ``import pairwatch`` (the old pairwatch.exposition was not)."""
    import subprocess
    import sys

    code = (
        "import pairwatch; print(pairwatch.serve_metrics.__module__, "
        "pairwatch.otel.exposition.serve.__name__, 'serve_metrics' in pairwatch.__all__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "pairwatch.endpoint serve True\n"


def test_instrument_without_a_provider_records_into_the_running_endpoint():
    """``serve_metrics()`` then ``instrument(client)``: the endpoint lends its provider to
    clients instrumented with none while it runs (the application set no global SDK
    provider); an explicit provider always wins."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    headers = {"Content-Type": "application/json"}
    reader = InMemoryMetricReader()
    explicit = MeterProvider(metric_readers=[reader])
    with ChaosServer([Fault("drop", indices=(1,))]) as server:
        with pairwatch.serve_metrics(port=0) as metrics:
            lent = pairwatch.instrument(httpx.Client())
            own = pairwatch.instrument(httpx.Client(), meter_provider=explicit)
            try:
                lent.post(server.url, content=batch(1, 2, 3), headers=headers)
                own.post(server.url, content=batch(4, 5), headers=headers)
                pairwatch.flush()
                counts = scrape(metrics.url)
            finally:
                pairwatch.uninstrument(own)
        assert counts["batch_requests_total"] == 3  # only the lent client's batch
        assert counts["batch_missing_response_total"] == 1
        requests = [
            p.value
            for rm in reader.get_metrics_data().resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == "batch.requests"
            for p in m.data.data_points
        ]
        assert sum(requests) == 2  # the explicit provider's batch, and only that
        pairwatch.uninstrument(lent)
        with pairwatch.serve_metrics(port=0) as again:  # what is instrumented from now on
            later = pairwatch.instrument(httpx.Client())
            later.post(server.url, content=batch(6), headers=headers)
            pairwatch.flush()
            assert scrape(again.url)["batch_requests_total"] == 1
            pairwatch.uninstrument(later)


def test_an_application_global_sdk_provider_wins_over_the_endpoint(tmp_path):
    """An application that set its own global SDK provider keeps its metrics there."""
    import subprocess
    import sys

    script = tmp_path / "app.py"
    script.write_text(
        "import httpx, json, urllib.request\n"
        "from opentelemetry import metrics\n"
        "from opentelemetry.sdk.metrics import MeterProvider\n"
        "from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
        "import pairwatch\n"
        "from pairwatch.chaos import ChaosServer\n"
        "reader = InMemoryMetricReader()\n"
        "metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))\n"
        "body = json.dumps([{'jsonrpc': '2.0', 'id': 1, 'method': 'echo'}])\n"
        "with ChaosServer() as server, pairwatch.serve_metrics(port=0) as endpoint:\n"
        "    client = pairwatch.instrument(httpx.Client())\n"
        "    client.post(server.url, content=body, headers={'Content-Type': 'application/json'})\n"
        "    pairwatch.flush()\n"
        "    page = urllib.request.urlopen(endpoint.url).read().decode()\n"
        "names = [m.name for rm in reader.get_metrics_data().resource_metrics\n"
        "         for sm in rm.scope_metrics for m in sm.metrics]\n"
        "print('global' if 'batch.requests' in names else 'none',\n"
        "      'endpoint' if 'batch_requests_total' in page else 'empty')\n"
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == ["global", "empty"]
