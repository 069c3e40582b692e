"""Per-id spans made cheaply stay exact, bounded, sampled with their batch, and linked to
the latency histogram by exemplars."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import SpanKind, StatusCode
from otel_support import FakeClock, Otel

import pairwatch
from pairwatch.otel import exposition
from pairwatch.otel.sdk import histograms as sdk_histograms
from pairwatch.otel.sdk import spans as sdk_spans


def req(i: int, method: str = "eth_call") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": method, "params": []}


def res(i: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "result": "0x1"}


def dumps(value: object) -> bytes:
    return json.dumps(value).encode()


def run_batch(otel: Otel, clock: FakeClock, answered: list[int], n: int = 5, **options: Any):
    channel = pairwatch.open_channel(
        bound=True,
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        clock=clock,
        **options,
    )
    channel.sent(dumps([req(i) for i in range(n)]))
    clock.advance(0.25)
    channel.received(dumps([res(i) for i in answered]))
    channel.close("body_end")
    return otel.spans()


def shape(span: ReadableSpan) -> tuple[Any, ...]:
    """Everything an exporter reads of a span, except its own random span id."""
    return (
        span.name,
        span.kind,
        span.start_time,
        span.end_time,
        dict(span.attributes or {}),
        span.status.status_code,
        span.status.description,
        span.parent.span_id if span.parent else None,
        span.context.trace_id,
        span.context.trace_flags,
        span.resource,
        span.instrumentation_scope,
    )


class _Starts(SpanProcessor):
    """A processor that reads spans as they start: the fast path must step aside for it."""

    def __init__(self) -> None:
        self.started = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started += 1


def test_fast_children_equal_what_start_span_makes(clock: FakeClock) -> None:
    fast, slow = Otel(), Otel()
    starts = _Starts()
    slow.tracer_provider.add_span_processor(starts)  # forces the ordinary path
    assert sdk_spans.usable(fast.tracer_provider.get_tracer("t"))
    assert not sdk_spans.usable(slow.tracer_provider.get_tracer("t"))
    spans_fast = run_batch(fast, FakeClock(), answered=[0, 2, 1])
    spans_slow = run_batch(slow, FakeClock(), answered=[0, 2, 1])
    assert starts.started == 6  # the batch span and five children went through on_start
    assert len(spans_fast) == len(spans_slow) == 6

    def by_id(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
        return {str(s.attributes.get("jsonrpc.request.id", "root")): s for s in spans}

    f, s = by_id(spans_fast), by_id(spans_slow)
    assert f.keys() == s.keys() == {"root", "0", "1", "2", "3", "4"}
    root_f, root_s = f.pop("root"), s.pop("root")
    for key in f:
        a, b = shape(f[key]), shape(s[key])
        # trace ids differ between the two runs, and each writer maps its monotonic clock to
        # wall time once: compare times relative to the batch span
        assert a[:2] + a[4:7] + a[9:] == b[:2] + b[4:7] + b[9:]
        assert a[2] - root_f.start_time == b[2] - root_s.start_time
        assert a[3] - root_f.start_time == b[3] - root_s.start_time
        assert f[key].parent.span_id == root_f.context.span_id
        assert f[key].context.trace_id == root_f.context.trace_id
        assert s[key].context.trace_id == root_s.context.trace_id
        assert f[key].kind is SpanKind.CLIENT
    assert f["3"].attributes["pairwatch.outcome"] == "missing"
    assert f["3"].status.status_code is StatusCode.ERROR
    assert f["0"].attributes["pairwatch.pair_latency"] == pytest.approx(0.25)
    assert f["0"].end_time - f["0"].start_time == 250_000_000


def test_child_spans_are_capped_and_the_rest_counted_on_the_batch_span(clock: FakeClock) -> None:
    otel = Otel()
    # 10 ids, 2 unanswered (3 and 7), at most 4 children: the 2 missing first, then 0 and 1
    spans = run_batch(otel, clock, [i for i in range(10) if i not in (3, 7)], 10, max_child_spans=4)
    children = [s for s in spans if s.parent is not None and "jsonrpc.request.id" in s.attributes]
    root = next(s for s in spans if s.name == "jsonrpc batch")
    assert sorted(s.attributes["jsonrpc.request.id"] for s in children) == ["0", "1", "3", "7"]
    assert root.attributes["pairwatch.child_spans.omitted"] == 6
    assert root.attributes["pairwatch.missing"] == 2
    assert otel.value("batch.missing_response") == 2  # metrics still count every id
    assert otel.hist("batch.pair_latency")[0] == 8


def test_abnormal_only_children(clock: FakeClock) -> None:
    otel = Otel()
    spans = run_batch(otel, clock, [0, 1, 2, 4], 5, child_spans="abnormal")
    children = [s for s in spans if "jsonrpc.request.id" in s.attributes]
    assert [s.attributes["jsonrpc.request.id"] for s in children] == ["3"]
    root = next(s for s in spans if s.name == "jsonrpc batch")
    assert root.attributes["pairwatch.child_spans.omitted"] == 4
    # slow is abnormal too: every reply took 0.25 s here
    spans = run_batch(Otel(), FakeClock(), [0, 1], 2, child_spans="abnormal", slow_span_seconds=0.2)
    assert len([s for s in spans if "jsonrpc.request.id" in s.attributes]) == 2


def test_a_ten_thousand_id_batch_fits_a_default_batch_processor() -> None:
    """Without the cap, 10,001 spans overflow the default 2,048-span queue and are dropped."""
    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(BatchSpanProcessor(exporter))  # SDK defaults
    otel = Otel()
    otel.tracer_provider = tracer
    clock = FakeClock()
    run_batch(otel, clock, list(range(10_000)), 10_000)
    tracer.force_flush()
    spans = exporter.get_finished_spans()
    assert len(spans) == 1 + 1024
    root = next(s for s in spans if s.name == "jsonrpc batch")
    assert root.attributes["pairwatch.child_spans.omitted"] == 10_000 - 1024
    tracer.shutdown()


def test_children_follow_their_batch_spans_sampling() -> None:
    exporter = InMemorySpanExporter()
    tracer = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.5)))
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    otel = Otel()
    otel.tracer_provider = tracer
    clock = FakeClock()
    for _ in range(40):
        run_batch(otel, clock, [0, 1, 2], 3)
    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert 0 < len(roots) < 40  # the ratio sampled some batches, not all
    for root in roots:
        kids = [s for s in spans if s.parent and s.parent.span_id == root.context.span_id]
        assert len(kids) == 3
    assert len(spans) == 4 * len(roots)  # no orphan child of an unsampled batch


def test_latency_exemplars_link_to_the_batch_trace_and_reach_openmetrics() -> None:
    reader = InMemoryMetricReader()
    provider, server = exposition.serve(0, readers=[reader])
    try:
        otel = Otel()
        otel.meter_provider = provider
        clock = FakeClock()
        spans = run_batch(otel, clock, [0, 1, 2], 3)
        root = next(s for s in spans if s.name == "jsonrpc batch")
        data = reader.get_metrics_data()
        points = [
            p
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == "batch.pair_latency"
            for p in m.data.data_points
            if p.count
        ]
        assert [p.count for p in points] == [3]
        exemplars = points[0].exemplars
        assert len(exemplars) == 1  # one bucket, its last offer
        assert exemplars[0].trace_id == root.context.trace_id
        assert exemplars[0].span_id == root.context.span_id
        assert exemplars[0].value == pytest.approx(0.25)
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        request = urllib.request.Request(
            url, headers={"Accept": "application/openmetrics-text; version=1.0.0"}
        )
        text = urllib.request.urlopen(request, timeout=10).read().decode()
        trace_id = f"{root.context.trace_id:032x}"
        lines = [line for line in text.splitlines() if trace_id in line]
        assert len(lines) == 1
        assert lines[0].startswith("batch_pair_latency_seconds_bucket{")
        assert f'# {{span_id="{root.context.span_id:016x}",trace_id="{trace_id}"}} 0.25' in lines[0]
        # every later scrape shows the bucket's last exemplar, a plain-text one in between too
        plain = urllib.request.urlopen(url, timeout=10).read().decode()
        assert trace_id not in plain  # the text format has no exemplars
        for _ in range(2):
            again = urllib.request.urlopen(request, timeout=10).read().decode()
            assert [line for line in again.splitlines() if trace_id in line] == lines
        later = run_batch(otel, clock, [0], 1)  # a newer batch in the same bucket replaces it
        newer = f"{[s for s in later if s.name == 'jsonrpc batch'][-1].context.trace_id:032x}"
        text = urllib.request.urlopen(request, timeout=10).read().decode()
        assert trace_id not in text
        assert len([line for line in text.splitlines() if newer in line]) == 1
    finally:
        server.shutdown()
        provider.shutdown()


def test_the_fast_histogram_path_engages_after_a_late_meter_provider() -> None:
    """instrument() at import time gets proxy instruments; the real provider comes later."""
    from opentelemetry.metrics._internal import _ProxyMeterProvider

    from pairwatch.otel.telemetry import Telemetry

    proxy = _ProxyMeterProvider()
    telemetry = Telemetry(proxy, spans=False)
    writer = telemetry.latency_writer
    assert not writer.enabled
    assert writer.waiting
    reader = InMemoryMetricReader()
    real = MeterProvider(metric_readers=[reader])
    proxy.on_set_meter_provider(real)  # what metrics.set_meter_provider does to the proxy
    writer.record_runs([(0.5, 3)], {"a": "b"})
    assert not writer.waiting
    if sdk_histograms._AVAILABLE:  # an SDK whose internals it knows (scripts/test_sdk_range.sh)
        assert writer.enabled
        assert writer._sdk is writer.histogram._real_instrument
    else:  # an older SDK: the plain path, with the same numbers
        assert not writer.enabled
    data = reader.get_metrics_data()
    counts = [
        p.count
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "batch.pair_latency"
        for p in m.data.data_points
    ]
    assert counts == [3]
    real.shutdown()


def test_the_fast_span_path_engages_after_a_late_tracer_provider(monkeypatch) -> None:
    """instrument() at import time gets the API's proxy tracer; the real provider comes
    later.  Before it, batch spans are dropped; after it, the writer follows the proxy to
    the real tracer, and spans reach the real provider's exporter."""
    from opentelemetry import trace

    from pairwatch.channel.sink import telemetry_for
    from pairwatch.options import Options

    proxy = trace.ProxyTracerProvider()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    otel = Otel()
    otel.tracer_provider = proxy  # type: ignore[assignment]
    clock = FakeClock()
    assert run_batch(otel, clock, [0, 1, 2], 3) == []
    real = TracerProvider()
    exporter = InMemorySpanExporter()
    real.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", real)  # what set_tracer_provider sets
    run_batch(otel, clock, [0, 1, 2], 3)
    pairwatch.flush()
    writer = telemetry_for(
        Options(meter_provider=otel.meter_provider, tracer_provider=proxy)
    ).span_writer
    assert type(writer.tracer) is type(real.get_tracer("x"))
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == ["eth_call"] * 3 + ["jsonrpc batch"]
    real.shutdown()


def _spans_of(otel: Otel, sent: object, received: object) -> list[ReadableSpan]:
    channel = pairwatch.open_channel(
        bound=True,
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        clock=FakeClock(),
    )
    channel.sent(dumps(sent))
    channel.received(dumps(received))
    channel.close("body_end")
    return otel.spans()


def test_unusual_ids_get_the_same_children_on_both_paths() -> None:
    """Duplicate, error, invalid and missing ids, through the columnar fast loop and through
    start_span: the same attributes and status per child."""
    sent = [req(0), req(0, "eth_getBalance"), req(1), req(2), req(3)]
    received = [
        res(0),
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "boom"}},
        {"jsonrpc": "2.0", "id": 2},  # neither result nor error: invalid, still paired
        res(0),
    ]
    fast, slow = Otel(), Otel()
    slow.tracer_provider.add_span_processor(_Starts())

    def children(spans: list[ReadableSpan]) -> list[tuple[Any, ...]]:
        out = []
        for s in spans:
            if "jsonrpc.request.id" not in s.attributes:
                continue
            root = next(r for r in spans if r.context.span_id == s.parent.span_id)
            out.append(
                (
                    s.name,
                    tuple(sorted(s.attributes.items())),
                    s.status.status_code,
                    s.status.description,
                    s.start_time - root.start_time,
                    s.end_time - root.start_time,
                )
            )
        return sorted(out)

    got, want = children(_spans_of(fast, sent, received)), children(_spans_of(slow, sent, received))
    assert got == want
    outcomes = sorted(
        (dict(c[1])["jsonrpc.request.id"], dict(c[1])["pairwatch.outcome"]) for c in got
    )
    assert outcomes == [
        ("0", "duplicate"),
        ("0", "paired"),
        ("1", "paired"),
        ("2", "paired"),
        ("3", "missing"),
    ]
    by_id = {dict(c[1])["jsonrpc.request.id"]: dict(c[1]) for c in got}
    assert by_id["1"]["rpc.response.status_code"] == "-32000"
    assert by_id["2"]["pairwatch.invalid_response"] is True
