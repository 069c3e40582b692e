"""Batches the SDK's samplers would drop are dropped without asking them, and only those.

The drop tests of :mod:`pairwatch.otel.sdk.sampling` must answer as the sampler does for
every parent and trace id, and a sampler they do not know must always be asked.  End to
end, a channel under a ratio sampler exports exactly the batches whose trace id is below
the bound, and a batch under a parent follows the parent's sampled flag.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_OFF,
    DEFAULT_ON,
    Decision,
    ParentBased,
    ParentBasedTraceIdRatio,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from otel_support import FakeClock, Otel

import pairwatch
from pairwatch.otel.sdk.sampling import drops_for

KNOWN: dict[str, Sampler] = {
    "ratio 0": TraceIdRatioBased(0.0),
    "ratio 0.01": TraceIdRatioBased(0.01),
    "ratio 0.5": TraceIdRatioBased(0.5),
    "ratio 1": TraceIdRatioBased(1.0),
    "always off": ALWAYS_OFF,
    "parent-based always on (the SDK default)": DEFAULT_ON,
    "parent-based always off": DEFAULT_OFF,
    "parent-based ratio 0.01": ParentBased(TraceIdRatioBased(0.01)),
    "ParentBasedTraceIdRatio 0.25": ParentBasedTraceIdRatio(0.25),
    "parent-based, delegates swapped": ParentBased(
        TraceIdRatioBased(0.3),
        remote_parent_sampled=ALWAYS_OFF,
        remote_parent_not_sampled=ALWAYS_ON,
        local_parent_sampled=TraceIdRatioBased(0.7),
        local_parent_not_sampled=ALWAYS_ON,
    ),
}

PARENTS: list[SpanContext | None] = [None] + [
    SpanContext(0x5EED, 0xBEEF, remote, TraceFlags(flags))
    for remote in (False, True)
    for flags in (TraceFlags.DEFAULT, TraceFlags.SAMPLED)
]


@pytest.mark.parametrize("name", list(KNOWN))
def test_drops_are_the_samplers_own(name: str) -> None:
    sampler = KNOWN[name]
    drops = drops_for(sampler)
    assert drops is not None
    draw = random.Random(16).getrandbits
    for parent in PARENTS:
        context = (
            Context() if parent is None else trace.set_span_in_context(NonRecordingSpan(parent))
        )
        for _ in range(2000):
            trace_id = parent.trace_id if parent is not None else draw(128) or 1
            asked = sampler.should_sample(context, trace_id, "jsonrpc batch", None, None, ())
            assert drops(parent, trace_id) == (asked.decision is Decision.DROP)


class _Overridden(TraceIdRatioBased):
    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        return SamplingResult(Decision.RECORD_AND_SAMPLE)


class _Own(Sampler):
    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        return SamplingResult(Decision.DROP)

    def get_description(self) -> str:
        return "own"


def test_samplers_it_does_not_know_are_always_asked() -> None:
    assert drops_for(_Own()) is None
    assert drops_for(_Overridden(0.5)) is None  # same class family, its own decision
    assert drops_for(ParentBased(_Own())) is None  # roots would be asked anyway
    assert drops_for(ALWAYS_ON) is None  # it never drops: nothing to decide here


class _Counting(IdGenerator):
    """Trace ids that alternate below and above a 0.5 ratio's bound (low 64 bits)."""

    def __init__(self) -> None:
        self.n = 0

    def generate_trace_id(self) -> int:
        self.n += 1
        low = (1 << 62) if self.n % 2 else (3 << 62)  # below, then above, 2**63
        return (self.n << 64) | low

    def generate_span_id(self) -> int:
        self.n += 1
        return self.n


def _batch(channel: Any, clock: FakeClock, n: int) -> None:
    channel.sent(json.dumps([{"jsonrpc": "2.0", "id": i, "method": "m"} for i in range(n)]))
    clock.advance(0.01)
    channel.received(json.dumps([{"jsonrpc": "2.0", "id": i, "result": i} for i in range(n)]))
    channel.close("body_end")


def _traced(sampler: Sampler) -> tuple[Any, FakeClock, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler, id_generator=_Counting())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel = Otel()
    clock = FakeClock()
    channel_options = {
        "meter_provider": otel.meter_provider,
        "tracer_provider": provider,
        "clock": clock,
    }
    return channel_options, clock, exporter


def test_a_ratio_sampler_exports_exactly_the_batches_below_its_bound() -> None:
    options, clock, exporter = _traced(ParentBased(TraceIdRatioBased(0.5)))
    for _ in range(10):
        _batch(pairwatch.open_channel(bound=True, **options), clock, 3)
    pairwatch.flush()
    spans = exporter.get_finished_spans()
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 5  # every other trace id is below the bound
    assert all(s.context.trace_id & ((1 << 64) - 1) == 1 << 62 for s in roots)
    assert len(spans) == 5 * (1 + 3)


@pytest.mark.parametrize(("remote", "sampled", "exported"), [
    (False, False, 0), (False, True, 4), (True, False, 0), (True, True, 4),
])  # fmt: skip
def test_a_batch_follows_its_parents_sampled_flag(
    remote: bool, sampled: bool, exported: int
) -> None:
    options, clock, exporter = _traced(ParentBased(TraceIdRatioBased(0.0)))
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    parent = SpanContext(0x5EED << 64, 0xBEEF, remote, flags)
    with trace.use_span(NonRecordingSpan(parent)):
        _batch(pairwatch.open_channel(bound=True, **options), clock, 3)
    pairwatch.flush()
    spans = exporter.get_finished_spans()
    assert len(spans) == exported
    assert all(s.context.trace_id == 0x5EED << 64 for s in spans)
