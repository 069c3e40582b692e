"""The grouped histogram path exports exactly what one ``record`` per value exports."""

from __future__ import annotations

import random

import pytest
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View

from pairwatch.otel.names import LATENCY_BUCKETS
from pairwatch.otel.sdk import histograms as sdk_histograms

ATTRS = {"rpc.method": "eth_call", "jsonrpc.batch": "true"}


def _points(reader: InMemoryMetricReader) -> list[tuple[object, ...]]:
    data = reader.get_metrics_data()
    out = []
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    out.append(
                        (
                            metric.name,
                            tuple(sorted((p.attributes or {}).items())),
                            p.count,
                            p.sum,
                            tuple(getattr(p, "bucket_counts", ())),
                            p.min,
                            p.max,
                        )
                    )
    return sorted(out, key=repr)


def _values(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.choice([0.0, 0.001, 0.1, 0.3, 7.5, 31.0]) + rng.random() / 3 for _ in range(n)]


@pytest.mark.parametrize(
    "temporality", [AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA]
)
def test_grouped_equals_one_record_per_value(temporality):
    readers = [
        InMemoryMetricReader(preferred_temporality={Histogram: temporality}) for _ in range(2)
    ]
    hs = [
        MeterProvider(metric_readers=[r])
        .get_meter("t")
        .create_histogram("lat", unit="s", explicit_bucket_boundaries_advisory=LATENCY_BUCKETS)
        for r in readers
    ]
    writer = sdk_histograms.HistogramWriter(hs[1])
    assert writer.enabled, "the fast path should apply to the installed SDK"
    for round_ in range(3):
        for attrs in (ATTRS, {**ATTRS, "rpc.method": "_OTHER"}):
            values = _values(150, round_)
            for v in values:
                hs[0].record(v, attrs)
            writer.record_many(values, attrs)
        assert _points(readers[0]) == _points(readers[1])
    assert writer.enabled


@pytest.mark.parametrize("value", [0.0004, 0.0123456789, 0.1, 2.5, 29.999])
def test_one_latency_for_a_whole_body_equals_one_record_per_id(value):
    """The usual case (100 ids answered in one body share one latency) takes a shortcut:
    one bucket lookup. The exported sum must still be the sum of 100 separate records."""
    readers = [InMemoryMetricReader() for _ in range(2)]
    hs = [
        MeterProvider(metric_readers=[r])
        .get_meter("t")
        .create_histogram("lat", unit="s", explicit_bucket_boundaries_advisory=LATENCY_BUCKETS)
        for r in readers
    ]
    writer = sdk_histograms.HistogramWriter(hs[1])
    for k in (1, 7, 100):
        for _ in range(k):
            hs[0].record(value, ATTRS)
        writer.record_many([value] * k, ATTRS)
        assert _points(readers[0]) == _points(readers[1])
    assert writer.enabled


def test_views_and_exemplars_fall_back_to_the_sdk():
    views = [
        View(instrument_name="lat", attribute_keys={"rpc.method"}),
        View(
            instrument_name="lat",
            name="lat.exp",
            aggregation=ExponentialBucketHistogramAggregation(),
        ),
    ]
    readers = [InMemoryMetricReader() for _ in range(2)]
    hs = [
        MeterProvider(metric_readers=[r], views=views).get_meter("t").create_histogram("lat")
        for r in readers
    ]
    writer = sdk_histograms.HistogramWriter(hs[1])
    values = _values(50, 7)
    for v in values:
        hs[0].record(v, ATTRS)
    writer.record_many(values, ATTRS)
    assert _points(readers[0]) == _points(readers[1])


def test_non_finite_and_negative_values_go_through_the_sdk():
    readers = [InMemoryMetricReader() for _ in range(2)]
    hs = [MeterProvider(metric_readers=[r]).get_meter("t").create_histogram("lat") for r in readers]
    values = [0.5, -1.0, float("inf"), 0.25]
    for v in values:
        hs[0].record(v, ATTRS)
    sdk_histograms.HistogramWriter(hs[1]).record_many(values, ATTRS)
    assert _points(readers[0]) == _points(readers[1])
