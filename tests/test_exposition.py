"""The Prometheus endpoint: names the dashboards query, exact values, promtool-clean."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request

import pytest
from components import require
from jsonrpc_build import dumps, err, req, res
from prometheus_client.parser import text_string_to_metric_families

import pairwatch
from pairwatch.otel import exposition


@pytest.fixture(scope="module")
def endpoint():
    provider, server = exposition.serve(port=0)
    yield provider, f"http://127.0.0.1:{server.server_port}/metrics", server
    server.shutdown()


def scrape(url: str) -> tuple[str, dict[str, list]]:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.setdefault(s.name, []).append(s)
    return text, samples


def total(samples, name, **labels) -> float:
    return sum(
        s.value
        for s in samples.get(name, [])
        if all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_names_and_exact_values(endpoint):
    provider, url, _ = endpoint
    channel = pairwatch.open_channel(
        bound=True, transport="http", server_address="node", meter_provider=provider, spans=False
    )
    channel.sent(dumps([req(1, "a"), req(2, "b"), req(3, "b")]))
    channel.received(dumps([res(3), err(None, -32600, "Invalid Request"), res(99)]))
    channel.close("body_end")
    _, s = scrape(url)
    common = {
        "rpc_system_name": "jsonrpc",
        "pairwatch_transport": "http",
        "server_address": "node",
        "jsonrpc_batch": "true",
    }
    assert total(s, "batch_requests_total", **common) == 3
    assert total(s, "batch_unknown_id_response_total", **common) == 1
    assert total(s, "batch_null_id_response_total", **common) == 1
    assert total(s, "batch_missing_response_total", rpc_method="a") == 1
    assert total(s, "batch_missing_response_total", rpc_method="b") == 1
    assert total(s, "batch_response_count_mismatch_total", **common) == 1
    assert total(s, "batch_closed_total", pairwatch_diagnosis="server_null_id") == 1
    assert total(s, "batch_pair_latency_seconds_count", rpc_method="b") == 1
    assert total(s, "batch_pair_latency_seconds_bucket", rpc_method="b", le="+Inf") == 1
    assert total(s, "batch_size_sum", **common) == 3


def test_binds_loopback_by_default(endpoint):
    _, _, server = endpoint
    assert server.server_address[0] == "127.0.0.1"


def test_page_passes_promtool_check_metrics(endpoint):
    require(
        shutil.which("promtool") is not None,
        "promtool",
        "apt-get install prometheus (done by .ci/run)",
    )
    provider, url, _ = endpoint
    channel = pairwatch.open_channel(bound=True, meter_provider=provider, spans=False)
    channel.sent(dumps([req(1), req(2)]))
    channel.received(dumps([res(2), res(7)]))
    channel.close("body_end")
    text, _ = scrape(url)
    assert "batch_closed_total" in text
    out = subprocess.run(
        ["promtool", "check", "metrics"], input=text, text=True, capture_output=True, timeout=30
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "", out.stdout
