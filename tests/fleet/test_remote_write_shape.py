"""The push route sends exactly the series a scrape shows: same names, labels and values.

One workload is recorded on two providers at once (a ``serve_metrics`` endpoint and an
in-memory reader whose collection goes through :func:`pairwatch.otel.remote_write.shaped`),
so any divergence between the two routes would break the dashboards on one of them.
"""

from __future__ import annotations

import json
import urllib.request

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Gauge, InMemoryMetricReader
from prometheus_client.parser import text_string_to_metric_families

import pairwatch
from pairwatch.otel.remote_write import shaped

Key = tuple[str, tuple[tuple[str, str], ...]]


def feed(meter_provider: MeterProvider) -> None:
    channel = pairwatch.open_channel(meter_provider=meter_provider, spans=False, transport="http")
    channel.sent(json.dumps([{"jsonrpc": "2.0", "id": i, "method": "echo"} for i in (1, 2, 3)]))
    failed = {"code": 1, "message": "x"}
    channel.received(json.dumps([{"jsonrpc": "2.0", "id": 3, "result": 0},
                                 {"jsonrpc": "2.0", "id": None, "error": failed},
                                 {"jsonrpc": "2.0", "id": 99, "result": 0}]))  # fmt: skip
    channel.close("stream_end")


def test_pushed_series_are_the_scraped_series():
    reader = InMemoryMetricReader()
    pushed_provider = MeterProvider(metric_readers=[reader])
    with pairwatch.serve_metrics(port=0) as endpoint:
        feed(endpoint.meter_provider)
        feed(pushed_provider)
        text = urllib.request.urlopen(endpoint.url, timeout=10).read().decode()
    scraped: dict[Key, float] = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("batch_")
    }
    data = reader.get_metrics_data()
    assert data is not None
    pushed: dict[Key, float] = {}
    for rm in shaped(data).resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                assert isinstance(metric.data, Gauge)
                assert metric.unit == ""  # nothing for the exporter to append
                for point in metric.data.data_points:
                    key = (
                        metric.name,
                        tuple(sorted((k, str(v)) for k, v in point.attributes.items())),
                    )
                    pushed[key] = point.value
    latency = {k: v for k, v in scraped.items() if k[0].startswith("batch_pair_latency")}
    assert {k: v for k, v in pushed.items() if not k[0].startswith("batch_pair_latency")} == {
        k: v for k, v in scraped.items() if not k[0].startswith("batch_pair_latency")
    }
    # Latencies differ in value between the two recordings (two runs), not in shape.
    assert {k for k in pushed if k[0].startswith("batch_pair_latency")} == set(latency)
    assert sum(v for k, v in pushed.items() if k[0] == "batch_missing_response_total") == 2
    assert any(name == "batch_pair_latency_seconds_bucket" for name, _ in pushed)
