"""Push pairwatch's metrics with Prometheus remote write, under the names the dashboards query.

Why a wrapper: a fleet whose workers come and go (autoscaled, short-lived, behind NAT) is
easier to push from than to scrape, and OpenTelemetry maintains a remote-write exporter
(``opentelemetry-exporter-prometheus-remote-write``).  As of 0.66b1 that exporter names
series its own way: no ``_total`` on counters, the unit glued on as written
(``batch_pair_latency_s``), histogram buckets without ``_bucket`` and not cumulative, and
exponential histograms dropped.  The dashboards and alert rules would find nothing.  So this
exporter hands it each collection already shaped as a scrape shows it: every sample of
:func:`pairwatch.otel.exposition.translate` (the one translation the ``/metrics`` endpoint
uses) becomes a gauge point named and labelled exactly as scraped.  The remote-write exporter
then only serialises and sends.  Resource attributes become labels (``service_name``,
``service_instance_id``): give each worker its own ``service.instance.id``, or the workers'
samples land on one series and overwrite each other.

Usage::

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from pairwatch.otel.remote_write import exporter

    reader = PeriodicExportingMetricReader(exporter("http://prometheus:9090/api/v1/write"))
    resource = Resource.create({"service.name": "api", "service.instance.id": worker_id})
    pairwatch.instrument(client, meter_provider=MeterProvider(resource=resource,
                                                              metric_readers=[reader]))
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import (
    Gauge,
    Metric,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)

from pairwatch.otel.exposition import translate
from pairwatch.otel.sdk.exporters import preferences

__all__ = ["PrometheusShaped", "exporter", "shaped"]


def shaped(data: MetricsData) -> MetricsData:
    """``data`` with every metric replaced by the samples a scrape of it would show."""
    out: list[ResourceMetrics] = []
    for resource_metrics in data.resource_metrics:
        scopes: list[ScopeMetrics] = []
        for scope_metrics in resource_metrics.scope_metrics:
            metrics: list[Metric] = []
            for metric in scope_metrics.metrics:
                metrics.extend(_as_samples(metric))
            scopes.append(ScopeMetrics(scope_metrics.scope, metrics, scope_metrics.schema_url))
        out.append(ResourceMetrics(resource_metrics.resource, scopes, resource_metrics.schema_url))
    return MetricsData(out)


def _as_samples(metric: Metric) -> list[Metric]:
    points = list(getattr(metric.data, "data_points", ()))
    if not points:
        return []
    start = min(p.start_time_unix_nano or 0 for p in points)
    at = max(p.time_unix_nano for p in points)
    by_name: dict[str, list[NumberDataPoint]] = {}
    for family in translate(metric.name, metric.unit or "", metric.description or "", metric.data):
        for sample in family.samples:
            point = NumberDataPoint(dict(sample.labels), start, at, sample.value)
            by_name.setdefault(sample.name, []).append(point)
    # unit "" so the remote-write exporter appends nothing to the finished name
    return [Metric(name, metric.description or "", "", Gauge(pts)) for name, pts in by_name.items()]


class PrometheusShaped(MetricExporter):
    """Delegates to a push exporter, with each collection shaped as a scrape shows it."""

    def __init__(self, inner: MetricExporter) -> None:
        # Cumulative, as a Prometheus series must be: the inner exporter asks for it.
        temporality, aggregation = preferences(inner)
        super().__init__(preferred_temporality=temporality, preferred_aggregation=aggregation)
        self.inner = inner

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        result: MetricExportResult = self.inner.export(
            shaped(metrics_data), timeout_millis=timeout_millis
        )
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis)


def exporter(endpoint: str, **options: Any) -> PrometheusShaped:
    """A remote-write exporter to ``endpoint`` (``.../api/v1/write``), Prometheus-shaped.

    ``options`` go to ``PrometheusRemoteWriteMetricsExporter`` (``headers``,
    ``basic_auth``, ``timeout``...).  Needs ``pip install
    opentelemetry-exporter-prometheus-remote-write``; without it this raises
    ``ModuleNotFoundError`` naming the package.
    """
    try:
        from opentelemetry.exporter.prometheus_remote_write import (
            PrometheusRemoteWriteMetricsExporter,
        )
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(
            "pairwatch.otel.remote_write needs: pip install "
            "opentelemetry-exporter-prometheus-remote-write",
            name=exc.name,
        ) from exc
    return PrometheusShaped(PrometheusRemoteWriteMetricsExporter(endpoint=endpoint, **options))
