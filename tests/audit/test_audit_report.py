"""The report's own logic: --fail-on rules, percentile estimates, the progress bar, SSE
event parsing and stdio line tags."""

from __future__ import annotations

import io
import time

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from pairwatch.audit.base import Progress, parse_time
from pairwatch.audit.har import sse_events
from pairwatch.audit.metrics import Buckets, points
from pairwatch.audit.report import parse_threshold
from pairwatch.audit.stdio import split
from pairwatch.cli.audit import ProgressBar


@pytest.mark.parametrize(
    ("rule", "value", "breached"),
    [
        ("missing>0", 0, False),
        ("missing>0", 1, True),
        ("unknown_id>=3", 2, False),
        ("unknown_id >= 3", 3, True),
        ("batch.null_id_response==0", 0, True),
        ("batch_missing_response_total<1", 0, True),
        ("not_ok!=0", 4, True),
    ],
)
def test_threshold_rules(rule, value, breached):
    assert parse_threshold(rule).breached(value) is breached


@pytest.mark.parametrize("rule", ["missing", "missing>>0", "nope>1", "missing>-1"])
def test_bad_threshold_rules(rule):
    with pytest.raises(ValueError, match=r"NAME OP NUMBER|unknown counter"):
        parse_threshold(rule)


def test_percentiles_interpolate_within_buckets_and_clamp_to_min_max():
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("t")
    h = meter.create_histogram("lat", explicit_bucket_boundaries_advisory=[0.1, 0.2, 0.4])
    for v in [0.15] * 50 + [0.3] * 45 + [0.35] * 5:
        h.record(v)
    buckets = Buckets()
    for p in points(reader):
        assert p.histogram is not None
        buckets.add(p.histogram)
    s = buckets.summary()
    assert s["count"] == 100
    assert s["min"] == 0.15
    assert s["max"] == 0.35
    assert s["p50"] == pytest.approx(0.2)  # the 50th of 50 in (0.15, 0.2]
    assert s["p95"] == pytest.approx(0.2 + 0.15 * 45 / 50)  # 45th of 50 in (0.2, 0.35]
    assert s["p99"] <= 0.35


def test_progress_bar_draws_and_clears():
    out = io.StringIO()
    progress = Progress(1000)
    half = "capture.har [###############...............]  50%"
    with ProgressBar(out, "capture.har", progress):
        progress.advance(500)
        # The bar redraws from its own thread every 0.1 s: poll for the drawing, bounded.
        deadline = time.monotonic() + 10.0
        while half not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    text = out.getvalue()
    assert half in text
    assert text.endswith("\r\x1b[K")


def test_sse_events_follow_the_event_stream_rules():
    body = (
        ": comment\r\n"
        "event: endpoint\r\ndata: /messages\r\n\r\n"
        'data: {"a":\ndata: 1}\n\n'
        "data: second\r\rdata: cut-off"
    )
    assert sse_events(body) == ['{"a":\n1}', "second"]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("> {}", (None, "sent", "{}")),
        ("<-- {}", (None, "received", "{}")),
        ("[12.5] --> {}", (12.5, "sent", "{}")),
        ("2024-04-09T12:00:00Z < {}", (parse_time("2024-04-09T12:00:00Z"), "received", "{}")),
        ('{"jsonrpc":"2.0"}', (None, None, '{"jsonrpc":"2.0"}')),
    ],
)
def test_stdio_line_tags(line, expected):
    assert split(line) == expected


def test_times():
    assert parse_time("1970-01-01T00:00:01.5Z") == 1.5
    assert parse_time("1970-01-01T01:00:00+01:00") == 0.0
    assert parse_time(3) == 3.0
    assert parse_time(True) is None
    assert parse_time("soon") is None
