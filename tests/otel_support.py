"""Read what a user of pairwatch would read: exported metric points and finished spans."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import pairwatch

PAIRING_COUNTERS = (
    "batch.unknown_id_response",
    "batch.missing_response",
    "batch.null_id_response",
    "batch.response_count_mismatch",
    "batch.duplicate_id",
    "batch.invalid_response",
    "batch.out_of_order",
    "batch.protocol_violation",
    "batch.invalid_request",
)
"""Counters that stay at zero when nothing goes wrong: tests name the ones that moved."""


def _moved(point: Any) -> bool:
    return bool(point.count if isinstance(point, HistogramDataPoint) else point.value)


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Otel:
    reader: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)
    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)

    def __post_init__(self) -> None:
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self._points: list[tuple[str, dict[str, Any], Any]] | None = None

    def collect(self) -> list[tuple[str, dict[str, Any], Any]]:
        points = []
        data = self.reader.get_metrics_data()
        if data is not None:
            for rm in data.resource_metrics:
                for sm in rm.scope_metrics:
                    for metric in sm.metrics:
                        for p in metric.data.data_points:
                            points.append((metric.name, dict(p.attributes or {}), p))
        return points

    def _matching(self, name: str, attrs: dict[str, Any]) -> Iterator[Any]:
        for n, a, p in self.collect():
            if n == name and all(a.get(k) == v for k, v in attrs.items()):
                yield p

    def value(self, name: str, **attrs: Any) -> int:
        """Sum of a counter's points whose attributes include ``attrs`` (dots as __)."""
        want = {k.replace("__", "."): v for k, v in attrs.items()}
        return sum(p.value for p in self._matching(name, want))

    def hist(self, name: str, **attrs: Any) -> tuple[int, float]:
        want = {k.replace("__", "."): v for k, v in attrs.items()}
        count, total = 0, 0.0
        for p in self._matching(name, want):
            assert isinstance(p, HistogramDataPoint)
            count += p.count
            total += p.sum
        return count, total

    def attrs(self, name: str, *, zeros: bool = False) -> list[dict[str, Any]]:
        """The attribute sets that recorded something; ``zeros=True`` adds the series that
        pairwatch exports at 0 from the first batch on an attribute set."""
        return [a for n, a, p in self.collect() if n == name and (zeros or _moved(p))]

    def spans(self) -> list[ReadableSpan]:
        pairwatch.flush()  # spans are made off the caller's path; metrics flush on collect
        return list(self.exporter.get_finished_spans())

    def counters(self, *, zeros: bool = False) -> dict[str, int]:
        """Every counter's total, for comparing whole books in one assertion: the counters
        that moved, or with ``zeros=True`` also those exported at 0 (see docs/metrics.md)."""
        out: dict[str, int] = {}
        for n, _, p in self.collect():
            if not isinstance(p, HistogramDataPoint):
                out[n] = out.get(n, 0) + p.value
        return out if zeros else {n: v for n, v in out.items() if v}

    def points(self) -> list[tuple[str, list[tuple[str, Any]], Any]]:
        """Every exported point, sorted: for comparing two runs' whole books at once."""
        out = []
        for name, attrs, point in self.collect():
            value = getattr(point, "value", None)
            if value is None:
                value = (point.count, point.sum, tuple(point.bucket_counts))
            out.append((name, sorted(attrs.items()), value))
        return sorted(out, key=repr)

    def span_shapes(self) -> list[tuple[Any, ...]]:
        """Spans as an exporter reads them, with times relative to the first start (the
        clock-to-wall offset is taken when spans are written, so two runs differ in it)."""
        spans = self.spans()
        zero = min((s.start_time or 0 for s in spans), default=0)
        return sorted(
            (
                s.name,
                (s.start_time or 0) - zero,
                (s.end_time or 0) - zero,
                sorted((s.attributes or {}).items()),
                s.status.status_code,
            )
            for s in spans
        )
