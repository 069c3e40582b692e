"""Serve pairwatch's OpenTelemetry metrics for a Prometheus scrape, with prometheus-client.

Kept apart from :mod:`pairwatch.otel.telemetry` (the metric model) the way prometheus-client
keeps exposition apart from its metrics: the instruments do not know who reads them. The
names follow the OpenTelemetry-to-Prometheus conventions through the one translation in
:func:`pairwatch.otel.vocabulary.prometheus_name` (dots become underscores, counters end in
``_total``, a unit of seconds adds ``_seconds``), the same one the audit's text file uses,
so the dashboards and alert rules work the same whether this module or the OpenTelemetry
Prometheus exporter serves them; this one adds no ``otel_scope_*`` labels and needs no extra
package.

Usage::

    provider, server = pairwatch.otel.exposition.serve(port=9464)   # binds 127.0.0.1
    pairwatch.instrument(client, meter_provider=provider)
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ExponentialHistogram,
    ExponentialHistogramDataPoint,
    Histogram,
    HistogramDataPoint,
    MetricReader,
    MetricsData,
    Sum,
)
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar

from pairwatch.otel.scrape_server import ScrapeServer
from pairwatch.otel.vocabulary import label_name, prometheus_name

__all__ = ["PrometheusReader", "prometheus_name", "serve", "translate"]


def _labels(attributes: Any) -> dict[str, str]:
    return {label_name(k): str(v) for k, v in (attributes or {}).items()}


class PrometheusReader(MetricReader):
    """A pull reader: each scrape collects the SDK's cumulative state and translates it."""

    def __init__(self) -> None:
        super().__init__()  # cumulative temporality, what a Prometheus scrape expects
        self._data: MetricsData | None = None
        self._lock = threading.Lock()
        self._kept: Kept = {}  # the last exemplar of each bucket, for every later scrape

    def _receive_metrics(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> None:
        self._data = metrics_data

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._data = None

    def collector(self) -> Collector:
        """A prometheus-client collector backed by this reader."""
        return _Bridge(self)

    def families(self) -> Iterator[Metric]:
        with self._lock:
            self.collect()
            data = self._data
        if data is None:
            return
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    yield from translate(
                        metric.name,
                        metric.unit or "",
                        metric.description or "",
                        metric.data,
                        self._kept,
                    )


Kept = dict[tuple[str, tuple[tuple[str, str], ...], int], Exemplar]
"""A bucket's last exemplar, by (histogram, label set, bucket index)."""


def translate(
    name: str, unit: str, doc: str, data: Any, kept: Kept | None = None
) -> Iterable[Metric]:
    """One OpenTelemetry metric as Prometheus families (the names and samples a scrape
    shows); also what :mod:`pairwatch.otel.remote_write` pushes, so both routes agree.

    The SDK hands each exemplar to one collection only; a scrape endpoint gives ``kept`` so
    that a bucket shows its last exemplar on every scrape until a newer one replaces it, as
    a Prometheus client library does (a plain-text scrape in between loses none)."""
    base = prometheus_name(name, unit)
    if isinstance(data, Sum):
        kind = "counter" if data.is_monotonic else "gauge"
        family = Metric(base.removesuffix("_total"), doc or name, kind)
        sample = base if kind == "gauge" or base.endswith("_total") else base + "_total"
        for point in data.data_points:
            family.add_sample(sample, _labels(point.attributes), float(point.value))
        yield family
    elif isinstance(data, Histogram):
        family = Metric(base, doc or name, "histogram")
        points: Iterable[HistogramDataPoint] = data.data_points
        for hp in points:
            labels = _labels(hp.attributes)
            exemplars = _exemplars(hp)
            if kept is not None:
                exemplars = _keep(kept, base, labels, exemplars, len(hp.explicit_bounds) + 1)
            running = 0
            for i, (bound, count) in enumerate(
                zip(hp.explicit_bounds, hp.bucket_counts, strict=False)
            ):
                running += count
                family.add_sample(
                    base + "_bucket",
                    {**labels, "le": _le(bound)},
                    running,
                    exemplar=exemplars.get(i),
                )
            family.add_sample(
                base + "_bucket",
                {**labels, "le": "+Inf"},
                hp.count,
                exemplar=exemplars.get(len(hp.explicit_bounds)),
            )
            family.add_sample(base + "_count", labels, hp.count)
            family.add_sample(base + "_sum", labels, hp.sum)
        yield family
    elif isinstance(data, ExponentialHistogram):
        family = Metric(base, doc or name, "histogram")
        for ep in data.data_points:
            labels = _labels(ep.attributes)
            for le, running in _exponential_buckets(ep):
                family.add_sample(base + "_bucket", {**labels, "le": le}, running)
            family.add_sample(base + "_bucket", {**labels, "le": "+Inf"}, ep.count)
            family.add_sample(base + "_count", labels, ep.count)
            family.add_sample(base + "_sum", labels, ep.sum)
        yield family
    elif hasattr(data, "data_points"):  # gauges
        family = Metric(base, doc or name, "gauge")
        for point in data.data_points:
            family.add_sample(base, _labels(point.attributes), float(point.value))
        yield family


def _exponential_buckets(point: ExponentialHistogramDataPoint) -> Iterator[tuple[str, int]]:
    """(le, cumulative count) for an exponential histogram, as classic buckets.

    Why classic: the text format prometheus-client writes has no native histograms, and
    the application's own exponential histograms must not break a scrape (or vanish from
    it).  Every exponential bucket boundary becomes one ``le``, so nothing is merged:
    bucket ``i`` holds values in ``(base**i, base**(i+1)]`` with ``base = 2**(2**-scale)``;
    negative buckets mirror it, and the zero bucket ends at ``le="0.0"``.
    """
    step = math.ldexp(1.0, -point.scale)  # log2(base)
    running = 0
    negative = point.negative
    for k in range(len(negative.bucket_counts) - 1, -1, -1):
        running += negative.bucket_counts[k]
        yield _le(-math.pow(2.0, (negative.offset + k) * step)), running
    running += point.zero_count
    yield _le(0.0), running
    positive = point.positive
    for k, count in enumerate(positive.bucket_counts):
        running += count
        yield _le(math.pow(2.0, (positive.offset + k + 1) * step)), running


def _exemplars(point: HistogramDataPoint) -> dict[int, Exemplar]:
    """The SDK's exemplars by bucket index, as OpenMetrics writes them (trace and span id
    as labels), so that a scrape links a latency bucket to the trace of a batch in it."""
    out: dict[int, Exemplar] = {}
    for e in getattr(point, "exemplars", None) or ():
        if not e.trace_id or not e.span_id:
            continue
        index = bisect_left(list(point.explicit_bounds), e.value)
        out[index] = Exemplar(
            {"trace_id": f"{e.trace_id:032x}", "span_id": f"{e.span_id:016x}"},
            e.value,
            e.time_unix_nano / 1e9 if e.time_unix_nano else None,
        )
    return out


def _keep(
    kept: Kept, base: str, labels: dict[str, str], fresh: dict[int, Exemplar], buckets: int
) -> dict[int, Exemplar]:
    """This collection's exemplars, with each bucket's last one where it has none."""
    series = tuple(sorted(labels.items()))
    for index, exemplar in fresh.items():
        kept[(base, series, index)] = exemplar
    out: dict[int, Exemplar] = {}
    for index in range(buckets):
        found = kept.get((base, series, index))
        if found is not None:
            out[index] = found
    return out


def _le(bound: float) -> str:
    return repr(float(bound))


class _Bridge(Collector):
    def __init__(self, reader: PrometheusReader) -> None:
        self.reader = reader

    def collect(self) -> Iterable[Metric]:
        return list(self.reader.families())


def serve(
    port: int = 9464,
    addr: str = "127.0.0.1",
    *,
    registry: CollectorRegistry | None = None,
    views: Iterable[Any] = (),
    readers: Iterable[MetricReader] = (),
) -> tuple[MeterProvider, Any]:
    """Start a metrics endpoint and return the meter provider that feeds it, and the server.

    Binds loopback unless told otherwise: metrics leave the machine only when the user
    chooses an address that lets them.  ``port=0`` picks a free port (``server.server_port``).
    ``readers`` are further SDK readers on the same provider (an in-memory one, OTLP).
    """
    reader = PrometheusReader()
    provider = MeterProvider(metric_readers=[reader, *readers], views=list(views))
    registry = registry or CollectorRegistry()
    registry.register(reader.collector())
    try:
        server = ScrapeServer(addr, port, registry)
    except BaseException:
        provider.shutdown()
        raise
    return provider, server
