"""The batch span built finished (``otel/sdk/spans.py``) is the span ``start_span`` makes.

Each case runs the same batch twice: once on the finished-span path, once with a processor
that reads spans as they start, which sends every span through the SDK's ``start_span``.
What an exporter (or a processor's ``on_end``) reads must match, but for the random ids and
for the wall-clock anchor each writer takes once (times are compared as durations).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, Tracer, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext, StatusCode, TraceFlags, TraceState
from otel_support import FakeClock

import pairwatch
from pairwatch.otel.sdk import spans as sdk_spans

PARENT = SpanContext(
    0x0AF7651916CD43DD8448EB211C80319C,
    0xB7AD6B7169203331,
    is_remote=True,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
    trace_state=TraceState([("vendor", "v1")]),
)


class _Starts(SpanProcessor):
    """Reads spans as they start: every span then takes the SDK's ordinary path."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass


class _Ends(SpanProcessor):
    """Keeps every span handed to ``on_end``, sampled or not (an exporter sees sampled only)."""

    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


class _RecordOnly(Sampler):
    """Records without sampling, adding an attribute of its own, as some samplers do."""

    def __init__(self, decision: Decision = Decision.RECORD_ONLY) -> None:
        self.decision = decision

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        attributes = {"sampler.rule": "r1", "rpc.system.name": "the sampler's"}
        return SamplingResult(self.decision, attributes, TraceState([("s", "1")]))

    def get_description(self) -> str:
        return "record-only"


def _request(i: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": "eth_call", "params": []}


@contextmanager
def _current(parent: SpanContext | None) -> Iterator[None]:
    if parent is None:
        yield
        return
    with trace.use_span(NonRecordingSpan(parent)):
        yield


def _run(
    sampler: Sampler | None, *, slow: bool, parent: SpanContext | None = None
) -> tuple[list[ReadableSpan], list[ReadableSpan], InMemoryMetricReader]:
    """One batch of 3 (id 2 never answered), closed; (exported, ended, metric reader)."""
    exporter, ends = InMemorySpanExporter(), _Ends()
    provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
    # A batch processor: the finished-span path hands sampled spans to its queue directly,
    # so an unsampled span sent that way would be exported.
    provider.add_span_processor(BatchSpanProcessor(exporter))
    provider.add_span_processor(ends)
    if slow:
        provider.add_span_processor(_Starts())
    assert sdk_spans.usable(provider.get_tracer("t")) is not slow
    reader = InMemoryMetricReader()
    clock = FakeClock()
    channel = pairwatch.open_channel(
        bound=True,
        meter_provider=MeterProvider(metric_readers=[reader]),
        tracer_provider=provider,
        clock=clock,
    )
    with _current(parent):
        channel.sent(json.dumps([_request(i) for i in range(3)]).encode())
    clock.advance(0.5)
    channel.received(b'[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":0,"result":0}]')
    channel.close("body_end")
    pairwatch.flush()
    provider.force_flush()
    return list(exporter.get_finished_spans()), ends.ended, reader


def _root(spans: Sequence[ReadableSpan]) -> ReadableSpan:
    (root,) = [s for s in spans if s.name == "jsonrpc batch"]
    return root


def _shape(span: ReadableSpan) -> tuple[Any, ...]:
    """What an exporter reads of a batch span, but its own random ids and wall-clock anchor."""
    return (
        span.name,
        span.kind,
        span.end_time - span.start_time,  # type: ignore[operator]
        dict(span.attributes or {}),
        span.status.status_code,
        span.status.description,
        span.parent,
        span.context.trace_flags,
        span.context.trace_state,
        span.context.is_remote,
        span.resource,
        span.instrumentation_scope,
        tuple(span.events),
        tuple(span.links),
    )


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the spans that went through the SDK's ``start_span``."""
    names: list[str] = []
    start_span = Tracer.start_span

    def counting(self: Tracer, name: str, *args: Any, **kwargs: Any) -> Any:
        names.append(name)
        return start_span(self, name, *args, **kwargs)

    monkeypatch.setattr(Tracer, "start_span", counting)
    return names


def test_the_check_finds_this_sdk_builds_what_the_module_builds() -> None:
    from pairwatch.otel import sdk

    assert sdk_spans.check("batch_spans") is None
    assert sdk.status()["batch_spans"] == (True, "on")


@pytest.mark.parametrize("parent", [None, PARENT], ids=["root", "under-a-remote-parent"])
def test_a_sampled_batch_span_is_the_span_start_span_makes(
    counted: list[str], parent: SpanContext | None
) -> None:
    fast, _, _ = _run(None, slow=False, parent=parent)
    assert counted == []  # neither the batch span nor a child went through start_span
    slow, _, _ = _run(None, slow=True, parent=parent)
    assert counted == ["jsonrpc batch"] + ["eth_call"] * 3
    root_fast_, root_slow = _root(fast), _root(slow)
    assert _shape(root_fast_) == _shape(root_slow)
    assert root_fast_.status.status_code is StatusCode.ERROR
    assert root_fast_.attributes["pairwatch.missing"] == 1
    assert root_fast_.end_time - root_fast_.start_time == 500_000_000
    for spans, root in ((fast, root_fast_), (slow, root_slow)):
        assert len(spans) == 4
        assert spans[-1] is root  # ended after its children, as end() would
        assert {s.parent.span_id for s in spans if s is not root} == {root.context.span_id}
    if parent is not None:
        assert root_fast_.context.trace_id == PARENT.trace_id
        assert root_fast_.parent.span_id == PARENT.span_id
        assert root_fast_.context.trace_state == PARENT.trace_state


def test_a_dropped_batch_span_makes_no_span_and_leaves_the_metrics_alone(
    counted: list[str],
) -> None:
    exported, ended, reader = _run(ALWAYS_OFF, slow=False)
    assert (exported, ended, counted) == ([], [], [])
    points = {
        m.name: sum(p.value for p in m.data.data_points)
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name in ("batch.closed", "batch.requests", "batch.missing_response")
    }
    assert points == {"batch.closed": 1, "batch.requests": 3, "batch.missing_response": 1}


def test_a_parent_that_was_not_sampled_drops_the_batch_span_on_both_paths() -> None:
    unsampled = SpanContext(PARENT.trace_id, PARENT.span_id, True, TraceFlags(0))
    for slow in (False, True):
        exported, ended, _ = _run(ParentBased(TraceIdRatioBased(1.0)), slow=slow, parent=unsampled)
        assert (exported, ended) == ([], [])


def test_a_recorded_unsampled_batch_span_reaches_on_end_and_no_exporter() -> None:
    fast_exported, fast_ended, _ = _run(_RecordOnly(), slow=False)
    slow_exported, slow_ended, _ = _run(_RecordOnly(), slow=True)
    assert fast_exported == slow_exported == []
    root_fast_, root_slow = _root(fast_ended), _root(slow_ended)
    assert _shape(root_fast_) == _shape(root_slow)
    assert not root_fast_.context.trace_flags.sampled
    assert root_fast_.context.trace_state == TraceState([("s", "1")])
    # the sampler's own attribute is kept; pairwatch's value wins where both set one
    assert root_fast_.attributes["sampler.rule"] == "r1"
    assert root_fast_.attributes["rpc.system.name"] == "jsonrpc"
    assert [s.name for s in fast_ended] == [s.name for s in slow_ended]


def test_a_sampler_that_adds_attributes_keeps_them_on_the_sampled_batch_span() -> None:
    sampler = _RecordOnly(Decision.RECORD_AND_SAMPLE)
    root_fast_ = _root(_run(sampler, slow=False)[0])
    root_slow = _root(_run(sampler, slow=True)[0])
    assert _shape(root_fast_) == _shape(root_slow)
    assert root_fast_.attributes["sampler.rule"] == "r1"
    assert list(root_fast_.attributes)[:2] == ["sampler.rule", "rpc.system.name"]
