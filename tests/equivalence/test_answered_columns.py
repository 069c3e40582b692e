"""A batch one body answered whole is recorded as a row of its label set's columns; any
other, or one a hook or a sampled span reads, is fed to the accumulators one by one.  The
same exchanges, with and without a hook (and spans on or off), must export the same series
and spans.  The clock steps by a fixed amount per reading, so the latencies are the same in
every run.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from http_drivers import SCRIPTS
from opentelemetry.sdk.metrics.export import HistogramDataPoint
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import NoOpTracerProvider
from otel_support import Otel

import pairwatch
from pairwatch.otel.sums import Sums


class StepClock:
    """Each reading is 2 ms after the one before."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 0.002
        return self.now


def _request(ids: list[int], methods: str) -> bytes:
    return json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": m} for i, m in zip(ids, methods, strict=True)]
    ).encode()


def _reply(ids: list[int]) -> bytes:
    return json.dumps([{"jsonrpc": "2.0", "id": i, "result": i} for i in ids]).encode()


SINGLE = b'{"jsonrpc":"2.0","id":7,"method":"a"}'
EXCHANGES = {
    "/whole-single": (SINGLE, b'{"jsonrpc":"2.0","id":7,"result":"x"}'),
    "/whole-batch": (_request([1, 2, 3], "aaa"), _reply([1, 2, 3])),
    "/whole-mixed": (_request([1, 2, 3], "abc"), _reply([1, 2, 3])),
    "/whole-partial": (_request([1, 2], "aa"), _reply([1])),  # not whole: the ledger's path
}


def _series(otel: Otel) -> dict[tuple[str, tuple[tuple[str, Any], ...]], Any]:
    found = {}
    for name, attrs, point in otel.collect():
        key = (name, tuple(sorted(attrs.items())))
        if isinstance(point, HistogramDataPoint):
            found[key] = (point.count, round(point.sum, 9), tuple(point.bucket_counts))
        else:
            found[key] = point.value
    return found


def _run(url: str, hook: Any, spans: bool = False, tracer_provider: Any = None) -> Otel:
    otel = Otel()
    if tracer_provider is not None:
        otel.tracer_provider = tracer_provider
    client = pairwatch.instrument(
        httpx.Client(timeout=5),
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        spans=spans,
        clock=StepClock(),
        on_batch_closed=hook,
    )
    with client:
        for _ in range(2):
            for path, (request, reply) in EXCHANGES.items():
                assert client.post(url + path, content=request).content == reply
    return otel


def test_quick_records_export_what_batches_export(scripted):
    for path, (_, reply) in EXCHANGES.items():
        SCRIPTS[path] = (200, {"Content-Type": "application/json"}, [reply], False)
    closed: list[Any] = []
    quick = _run(scripted, None)
    batches = _run(scripted, closed.append)
    assert len(closed) == 8  # the hook saw every batch: that run took the Batch path
    assert _series(quick) == _series(batches)
    assert quick.counters() == {
        "batch.requests": 18,
        "batch.closed": 8,
        "batch.missing_response": 2,
        "batch.response_count_mismatch": 2,
    }
    assert quick.value("batch.closed", pairwatch__diagnosis="ok") == 6
    # Sent, then received: one step, whichever books pair the reply (the ledger judges a
    # reply the quick record declined at the same clock reading).
    assert quick.hist("batch.pair_latency") == (16, pytest.approx(16 * 0.002))
    assert quick.hist("batch.pair_latency", rpc__method="b") == (2, pytest.approx(2 * 0.002))
    assert quick.hist("batch.size") == (8, 2 * (1 + 3 + 3 + 2))


def test_columns_that_cannot_be_fed_cost_their_batches_only(scripted, monkeypatch):
    """A healthy batch of one method is a row of its label set's columns until the drain
    commits (``Sums.columns``).  If feeding them fails, each batch they held counts one
    internal error and the rest of the drain is applied; the caller sees nothing."""
    for path, (_, reply) in EXCHANGES.items():
        SCRIPTS[path] = (200, {"Content-Type": "application/json"}, [reply], False)

    def broken(*args: Any) -> None:
        raise RuntimeError("deliberately broken")

    monkeypatch.setattr(Sums, "_feed", staticmethod(broken))
    otel = _run(scripted, None)  # asserts every reply the caller got
    pairwatch.flush()
    # The single and the one-method batch, twice each, were columns: four batches lost.
    assert otel.value("pairwatch.internal_errors", pairwatch__error_kind="telemetry") == 4
    # The three-method batch and the partial one are fed one by one: both recorded, twice.
    assert otel.counters() == {
        "batch.requests": 2 * (3 + 2),
        "batch.closed": 4,
        "batch.missing_response": 2,
        "batch.response_count_mismatch": 2,
        "pairwatch.internal_errors": 4,
    }
    monkeypatch.undo()
    assert _run(scripted, None).counters()["batch.closed"] == 8  # fed again next time


class BatchesOnly(Sampler):
    """Records batch spans, drops single-request ones, and counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def should_sample(self, parent: Any, trace_id: int, name: str, *args: Any, **kw: Any):
        self.asked.append(name)
        batch = name == "jsonrpc batch"
        return SamplingResult(Decision.RECORD_AND_SAMPLE if batch else Decision.DROP)

    def get_description(self) -> str:
        return "batches-only"


def _traced(url: str, hook: Any) -> tuple[Otel, BatchesOnly, list[ReadableSpan]]:
    sampler = BatchesOnly()
    provider = TracerProvider(sampler=sampler)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel = _run(url, hook, spans=True, tracer_provider=provider)
    pairwatch.flush()
    return otel, sampler, list(exporter.get_finished_spans())


def _shapes(spans: list[ReadableSpan]) -> list[tuple[Any, ...]]:
    """What an exporter reads of each span, with its parent by name (ids are random) and
    times from the run's first span (each run converts its clock to wall time once)."""
    zero = min(s.start_time or 0 for s in spans)
    names = {s.context.span_id: s.name for s in spans}
    roots = {s.context.span_id: s.context.trace_id for s in spans if s.parent is None}
    for s in spans:  # a child is in its batch span's trace
        if s.parent is not None:
            assert roots[s.parent.span_id] == s.context.trace_id
    return sorted(
        (
            s.name,
            s.kind.name,
            (s.start_time or 0) - zero,
            (s.end_time or 0) - zero,
            tuple(sorted((s.attributes or {}).items())),
            s.status.status_code.name,
            s.status.description or "",
            names[s.parent.span_id] if s.parent is not None else "",
        )
        for s in spans
    )


def test_the_sampler_asked_at_close_gives_the_spans_of_the_drain(scripted):
    for path, (_, reply) in EXCHANGES.items():
        SCRIPTS[path] = (200, {"Content-Type": "application/json"}, [reply], False)
    closed: list[Any] = []
    quick, quick_sampler, quick_spans = _traced(scripted, None)
    batches, batch_sampler, batch_spans = _traced(scripted, closed.append)
    assert len(closed) == 8
    # Once per batch on both paths: children follow their batch span, they never ask.
    assert sorted(quick_sampler.asked) == sorted(batch_sampler.asked)
    assert quick_sampler.asked.count("jsonrpc batch") == 6
    assert quick_sampler.asked.count("jsonrpc request") == 2
    # The two single requests were dropped; each batch span has a child per request id.
    assert len(quick_spans) == 2 * ((1 + 3) + (1 + 3) + (1 + 2))
    assert _shapes(quick_spans) == _shapes(batch_spans)
    assert _series(quick) == _series(batches)
    assert quick.hist("batch.pair_latency") == (16, pytest.approx(16 * 0.002))


def test_the_noop_tracer_records_what_spans_off_record(scripted):
    for path, (_, reply) in EXCHANGES.items():
        SCRIPTS[path] = (200, {"Content-Type": "application/json"}, [reply], False)
    noop = _run(scripted, None, spans=True, tracer_provider=NoOpTracerProvider())
    off = _run(scripted, None, spans=False)
    assert _series(noop) == _series(off)
    assert noop.counters() == {
        "batch.requests": 18,
        "batch.closed": 8,
        "batch.missing_response": 2,
        "batch.response_count_mismatch": 2,
    }
    assert noop.hist("batch.pair_latency") == (16, pytest.approx(16 * 0.002))
