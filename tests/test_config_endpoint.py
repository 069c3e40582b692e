"""``pairwatch.serve_metrics`` serves every point kind an application's own meters make on
its provider: counters, up-down counters, gauges, explicit histograms and exponential
histograms (as classic buckets at the exponential boundaries), next to pairwatch's own
counters, in one scrape that prometheus-client's parser and real promtool accept."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request

from components import require
from opentelemetry.metrics import Observation
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View
from prometheus_client.parser import text_string_to_metric_families
from toy import ToyClient, server

import pairwatch

VALUES = (0.0, 0.001, 1.0, 3.0, 3.0, 100.0, 12345.678)


def test_an_app_meter_with_every_point_kind_is_served():
    views = [
        View(instrument_name="app.latency", aggregation=ExponentialBucketHistogramAggregation())
    ]
    with pairwatch.serve_metrics(port=0, views=views) as metrics:
        meter = metrics.meter_provider.get_meter("my-app")
        latency = meter.create_histogram("app.latency", unit="s")
        for value in VALUES:
            latency.record(value, {"route": "/rpc"})
        meter.create_histogram("app.size").record(7)
        meter.create_counter("app.jobs").add(3)
        meter.create_up_down_counter("app.queue").add(-2)
        meter.create_observable_gauge("app.temp", [lambda _options: [Observation(21.5)]])
        client = pairwatch.instrument(
            ToyClient(server("drop")),
            meter_provider=metrics.meter_provider,
            send="call",
            receive="call",
            close="close",
        )
        client.call(json.dumps([{"jsonrpc": "2.0", "id": i, "method": "m"} for i in (1, 2)]))
        client.close()
        text = urllib.request.urlopen(metrics.url, timeout=10).read().decode()
    samples = {
        (s.name, s.labels.get("le")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("app_latency_seconds_count", None)] == len(VALUES)
    assert abs(samples[("app_latency_seconds_sum", None)] - sum(VALUES)) < 1e-9
    buckets = {
        float(le): v for (name, le), v in samples.items() if name == "app_latency_seconds_bucket"
    }
    assert buckets[float("inf")] == len(VALUES)
    assert len(buckets) > 10  # one le per exponential boundary, not one catch-all bucket
    for le, cumulative in buckets.items():
        # Values sit inside buckets (none on a boundary except 1.0 == 2**0, whose bucket
        # ends there), so each cumulative count is exactly the values at or below le.
        assert cumulative == sum(1 for v in VALUES if v <= le), le
    assert samples[("app_size_count", None)] == 1
    assert samples[("app_jobs_total", None)] == 3
    assert samples[("app_queue", None)] == -2
    assert samples[("app_temp", None)] == 21.5
    assert samples[("batch_missing_response_total", None)] == 1
    promtool = shutil.which("promtool")
    require(promtool is not None, "promtool", "apt-get install prometheus")
    checked = subprocess.run(
        [str(promtool), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr  # parses and lints clean
