"""Run in a child process by test_sdk_door.py: a mix of batches through real channels,
with whatever SDK shortcuts this process's environment allows, printed as JSON (every
exported point and span shape).  Two children, shortcuts on and off, must print the same."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from otel_support import FakeClock, Otel

import pairwatch
from pairwatch.otel import sdk


def req(i: object, method: str = "eth_call") -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": i, "method": method}


def res(i: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": i, "result": "0x1"}


def err(i: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": i, "error": {"code": -32000, "message": "no"}}


SCENARIOS: list[tuple[list[object], list[object]]] = [
    ([req(i) for i in range(5)], [res(i) for i in range(5)]),
    ([req(i) for i in range(5)], [res(i) for i in (4, 0, 1)]),
    ([req(1, "a"), req(2, "b"), req(3, "a")], [res(1), err(2), res(3)]),
    ([req(7)], [res(7)]),
    (req(8), res(8)),
    ([req(1), req(1)], [res(1), res(1), res(9)]),
    ([req(i) for i in range(30)], [res(i) for i in range(30)]),
]


class Alternating(IdGenerator):
    """Trace ids below and above a ratio sampler's bound in turn, one span id: both ways
    of deciding draw the same trace ids, so the same batches are sampled."""

    def __init__(self) -> None:
        self.n = 0

    def generate_span_id(self) -> int:
        return 0x5EED

    def generate_trace_id(self) -> int:
        self.n += 1
        return self.n if self.n % 2 else (1 << 63) + self.n  # low 64 bits: under, over


def run(tracer_provider: TracerProvider, exporter: InMemorySpanExporter) -> Otel:
    otel, clock = Otel(), FakeClock()
    otel.tracer_provider = tracer_provider  # type: ignore[assignment]
    otel.exporter = exporter
    for sent, received in SCENARIOS:
        channel = pairwatch.open_channel(
            bound=True,
            transport="http",
            meter_provider=otel.meter_provider,
            tracer_provider=tracer_provider,
            clock=clock,
        )
        channel.sent(json.dumps(sent))
        clock.advance(0.25)
        channel.received(json.dumps(received))
        clock.advance(0.01)
        channel.close("body_end")
    pairwatch.flush()
    tracer_provider.force_flush()
    return otel


def main() -> None:
    found: dict[str, object] = {"status": {k: v[0] for k, v in sdk.status().items()}}
    for name, sampler, batch in (
        ("always", None, False),
        ("batch_processor", None, True),
        ("ratio", ParentBased(TraceIdRatioBased(0.5)), False),
    ):
        exporter = InMemorySpanExporter()
        provider = (
            TracerProvider()
            if sampler is None
            else TracerProvider(sampler=sampler, id_generator=Alternating())
        )
        provider.add_span_processor(
            BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        )
        otel = run(provider, exporter)
        found[name] = {"points": otel.points(), "spans": otel.span_shapes()}
    print(json.dumps(found, default=repr, sort_keys=True))


if __name__ == "__main__":
    main()
