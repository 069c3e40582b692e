"""Read an audit's books back from the exported OpenTelemetry data.

The report reads what any OpenTelemetry reader would export, not the ledger: the same
numbers a dashboard would show for the live path.  Latency percentiles are estimated from
the ``batch.pair_latency`` histogram buckets by linear interpolation (as Prometheus'
``histogram_quantile`` does), clamped to the exact min and max the SDK keeps, so memory stays
constant however many requests the capture holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

from pairwatch.otel.names import CLOSE_REASON, DIAGNOSIS, TRANSPORT
from pairwatch.otel.vocabulary import BY_KEY, INSTRUMENTS

# Short names (the report's rows and ``--fail-on`` names) for each counter instrument, from
# the vocabulary's ``short`` column.
COUNTERS: Final[dict[str, str]] = {i.short: i.name for i in INSTRUMENTS if i.short is not None}
_CLOSED: Final = BY_KEY["closed"].name
_LATENCY: Final = BY_KEY["pair_latency"].name
_INTERNAL: Final = BY_KEY["internal_errors"].name
QUANTILES: Final = (0.5, 0.95, 0.99)


@dataclass
class Point:
    """One exported data point: instrument name, attributes, and a counter value or buckets."""

    name: str
    attrs: dict[str, str]
    value: float = 0.0
    histogram: HistogramDataPoint | None = None
    help: str = ""


def points(reader: InMemoryMetricReader) -> Iterator[Point]:
    data = reader.get_metrics_data()
    if data is None:
        return
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    attrs = {k: str(v) for k, v in (p.attributes or {}).items()}
                    if isinstance(p, HistogramDataPoint):
                        yield Point(metric.name, attrs, float(p.count), p, metric.description or "")
                    else:
                        value = float(getattr(p, "value", 0))
                        yield Point(metric.name, attrs, value, None, metric.description or "")


@dataclass
class Buckets:
    """Histogram points merged across attribute sets (methods, batch or single)."""

    bounds: tuple[float, ...] = ()
    counts: list[int] = field(default_factory=list)
    count: int = 0
    total: float = 0.0
    low: float = float("inf")
    high: float = float("-inf")

    def add(self, p: HistogramDataPoint) -> None:
        if not self.counts:
            self.bounds = tuple(p.explicit_bounds)
            self.counts = [0] * len(p.bucket_counts)
        if tuple(p.explicit_bounds) == self.bounds:
            self.counts = [a + b for a, b in zip(self.counts, p.bucket_counts, strict=True)]
        self.count += p.count
        self.total += p.sum
        if p.count:
            self.low = min(self.low, p.min)
            self.high = max(self.high, p.max)

    def quantile(self, q: float) -> float | None:
        if not self.count:
            return None
        rank = q * self.count
        seen = 0
        for i, n in enumerate(self.counts):
            if n and seen + n >= rank:
                lower = self.bounds[i - 1] if i > 0 else self.low
                upper = self.bounds[i] if i < len(self.bounds) else self.high
                lower, upper = max(lower, self.low), min(upper, self.high)
                value = lower + (upper - lower) * (rank - seen) / n
                return min(max(value, self.low), self.high)
            seen += n
        return self.high

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"count": self.count}
        if self.count:
            for q in QUANTILES:
                out[f"p{round(q * 100)}"] = self.quantile(q)
            out["min"], out["max"], out["mean"] = self.low, self.high, self.total / self.count
        return out


@dataclass
class Group:
    """The books of one kind of channel (one transport) in one file."""

    transport: str
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    diagnoses: dict[str, int] = field(default_factory=dict)
    close_reasons: dict[str, int] = field(default_factory=dict)
    latency: Buckets = field(default_factory=Buckets)


_BY_INSTRUMENT: Final = {v: k for k, v in COUNTERS.items()}


def groups(reader: InMemoryMetricReader) -> tuple[list[Group], int]:
    """Per-transport books, and the internal error count (which has no transport)."""
    found: dict[str, Group] = {}
    internal = 0
    for p in points(reader):
        if p.name == _INTERNAL:
            internal += int(p.value)
            continue
        transport = p.attrs.get(TRANSPORT, "generic")
        group = found.setdefault(transport, Group(transport))
        if p.name == _LATENCY and p.histogram is not None:
            group.latency.add(p.histogram)
            continue
        short = _BY_INSTRUMENT.get(p.name)
        if short is None:
            continue
        group.counters[short] += int(p.value)
        if p.name == _CLOSED:
            _bump(group.diagnoses, p.attrs.get(DIAGNOSIS, "?"), p.value)
            _bump(group.close_reasons, p.attrs.get(CLOSE_REASON, "?"), p.value)
    return [found[k] for k in sorted(found)], internal


def _bump(into: dict[str, int], key: str, value: float) -> None:
    into[key] = into.get(key, 0) + int(value)
