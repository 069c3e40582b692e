"""Record runs of equal values into one histogram attribute set with one look-up.

The SDK records one value per ``Histogram.record``: a ``Measurement``, attribute cleaning and
hashing, three dispatch layers and a lock, around one bucket increment.  A batch answered by
one body has one latency for all its ids, so its latencies are one run.  For the SDK's
default explicit-bucket aggregation, the run is applied under the aggregation's own lock
with the SDK's own arithmetic, value by value in order, so sums, counts, buckets, min and
max are what that many ``record`` calls give; exemplars too (one offer per run to the
bucket-aligned reservoir, which keeps the last offer per bucket).  Another aggregation or
reservoir chosen by a view, another exemplar filter, a disabled meter, a negative or
non-finite value: one ``record`` per value, as the public API does.
"""

from __future__ import annotations

import logging
import math
import sys
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from time import time_ns
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import metrics
from opentelemetry.context import Context

__all__ = ["HistogramWriter", "Run", "check", "runs_of"]

Run = tuple[float, int]
"""``(value, count)``: ``count`` observations of one value, in order."""

_log = logging.getLogger("pairwatch")

try:  # the SDK is a dependency, but its internals may move
    from opentelemetry.sdk.metrics._internal.aggregation import (
        _ExplicitBucketHistogramAggregation,
    )
    from opentelemetry.sdk.metrics._internal.exemplar import (
        AlignedHistogramBucketExemplarReservoir,
        AlwaysOffExemplarFilter,
        AlwaysOnExemplarFilter,
        TraceBasedExemplarFilter,
    )
    from opentelemetry.sdk.metrics._internal.instrument import Histogram as _SdkHistogram
    from opentelemetry.sdk.metrics._internal.measurement import Measurement
    from opentelemetry.sdk.metrics._internal.measurement_consumer import (
        SynchronousMeasurementConsumer,
    )

    _ALIGNED: Any = AlignedHistogramBucketExemplarReservoir
    _AVAILABLE = True
except Exception:  # pragma: no cover - depends on the installed SDK
    _AVAILABLE = False


def _frozen_items(attributes: Mapping[str, str | int]) -> Any:
    return frozenset(attributes.items())


# How a view's match keys an attribute set: recent SDKs hash it, older ones (1.30) key it by
# the frozenset of its items.
_key_of: Callable[[Mapping[str, str | int]], Any] = _frozen_items
try:
    from opentelemetry.sdk.metrics._internal._view_instrument_match import _hash_attributes

    _key_of = _hash_attributes
except Exception:  # pragma: no cover - depends on the installed SDK
    pass


class HistogramWriter:
    """``record_many(values, attributes)`` for one histogram instrument."""

    __slots__ = ("_sdk", "enabled", "histogram", "waiting")

    def __init__(self, histogram: metrics.Histogram) -> None:
        self.histogram = histogram
        self._sdk: Any = None
        # instrument() often runs at import time, before the application sets its meter
        # provider: the API then hands out a proxy instrument whose SDK instrument appears
        # later.  While that is so, each record looks again (one attribute read), so the
        # fast path engages as soon as the real provider exists.
        self.waiting = type(histogram).__name__ == "_ProxyHistogram"
        self.enabled = self._resolve()

    def _resolve(self) -> bool:
        h: Any = self.histogram
        if self.waiting:
            h = getattr(h, "_real_instrument", None)
            if h is None:
                return False
            self.waiting = False
        from pairwatch.otel import sdk

        if _AVAILABLE and sdk.on("histograms") and _shape_ok(h):
            self._sdk = h
            return True
        return False

    def record_many(self, values: Sequence[float], attributes: Mapping[str, str | int]) -> None:
        """Record every value with the same attributes; identical to a ``record`` loop."""
        self.record_runs(runs_of(values), attributes)

    def record_runs(
        self,
        runs: Sequence[Run],
        attributes: Mapping[str, str | int],
        context: Context | None = None,
    ) -> None:
        """Record each ``(value, count)`` run in order: ``count`` records of ``value``.

        Ids answered in one body share one latency, so a batch is usually one run: its
        bucket is found once, while the sum is still added value by value.  ``context`` is
        what the values are recorded in (the batch span's, for exemplars); by default the
        current one, as ``record`` does.
        """
        if context is None:
            context = otel_context.get_current()
        if self.waiting:
            self.enabled = self._resolve()
        if self.enabled and runs:
            try:
                if self._fast(runs, attributes, context):
                    return
            except Exception as exc:  # an SDK we do not know after all: never again
                self.enabled = False
                _log.warning("pairwatch: SDK shortcut histograms off: %r", exc)
        record = self.histogram.record
        for value, count in runs:
            for _ in range(count):
                record(value, attributes, context)

    def _fast(
        self, runs: Sequence[Run], attributes: Mapping[str, str | int], context: Context
    ) -> bool:
        h: Any = self._sdk
        enabled = getattr(h, "_is_enabled", None)  # absent before meters could be disabled
        if enabled is not None and not enabled():
            return False
        for value, _count in runs:
            if value < 0 or not math.isfinite(value):
                return False  # the SDK logs and drops these: let it
        consumer: Any = h._measurement_consumer
        exemplar_filter = consumer._sdk_config.exemplar_filter
        sample = _would_sample(exemplar_filter, runs[0][0], attributes, context)
        if sample is None:
            return False  # a filter we cannot decide for a whole run: one record per value
        targets = []
        for storage in consumer._reader_storages.values():
            for match in storage._get_or_init_view_instrument_match(h):
                aggregation = _aggregation(match, attributes)
                if aggregation is None:
                    return False  # a view chose another aggregation: nothing applied yet
                if sample and type(aggregation._reservoir) is not _ALIGNED:
                    return False  # a reservoir that samples per offer must see each one
                targets.append((match, aggregation))
        for match, aggregation in targets:
            if getattr(match, "_reset_on_collect", False):
                # Delta temporality: a collection swaps aggregations out under this lock,
                # so fetch and apply under one hold, as the SDK does.
                with match._lock:
                    aggregation = _aggregation_locked(match, attributes)
                    _apply(aggregation, runs)
                    if sample:
                        _offer(aggregation, h, runs, attributes, context)
            else:
                _apply(aggregation, runs)
                if sample:
                    _offer(aggregation, h, runs, attributes, context)
        return True


def runs_of(values: Sequence[float]) -> list[Run]:
    """Consecutive equal values as ``(value, count)`` runs, in order."""
    runs: list[Run] = []
    for value in values:
        if runs and runs[-1][0] == value:
            runs[-1] = (value, runs[-1][1] + 1)
        else:
            runs.append((value, 1))
    return runs


def _would_sample(exemplar_filter: Any, value: float, attributes: Any, ctx: Context) -> bool | None:
    """The filter's decision for every value of these runs, or None if it may differ."""
    kind = type(exemplar_filter)
    if kind is AlwaysOffExemplarFilter:
        return False
    if kind is AlwaysOnExemplarFilter:
        return True
    if kind is TraceBasedExemplarFilter:  # decided by the context alone
        return bool(exemplar_filter.should_sample(value, 0, attributes, ctx))
    return None


def _offer(
    aggregation: Any, histogram: Any, runs: Sequence[Run], attributes: Any, ctx: Context
) -> None:
    """One offer per run: the bucket-aligned reservoir keeps the last value per bucket, and
    every value of a run is the same value in the same context."""
    now = time_ns()
    for value, _count in runs:
        aggregation._sample_exemplar(Measurement(value, now, histogram, ctx, attributes), True)


def _filtered(match: Any, attributes: Mapping[str, str | int]) -> tuple[Any, dict[str, str | int]]:
    attrs = dict(attributes)
    keys = match._view._attribute_keys
    if keys is not None:
        attrs = {k: v for k, v in attrs.items() if k in keys}
    return _key_of(attrs), attrs


def _aggregation(match: Any, attributes: Mapping[str, str | int]) -> Any:
    """The attribute set's aggregation (created as the SDK would), if it is ours to touch."""
    key, attrs = _filtered(match, attributes)
    aggregation = match._attributes_aggregation.get(key)
    if aggregation is None:
        create = getattr(match, "_get_or_create_aggregation", None)
        if create is None:
            return None  # an older SDK creates it inline: one plain record does, this time
        with match._lock:
            aggregation = create(key, attrs)
    return aggregation if type(aggregation) is _ExplicitBucketHistogramAggregation else None


def _aggregation_locked(match: Any, attributes: Mapping[str, str | int]) -> Any:
    key, attrs = _filtered(match, attributes)
    return match._get_or_create_aggregation(key, attrs)


def _apply(aggregation: Any, runs: Sequence[Run]) -> None:
    """The body of ``_ExplicitBucketHistogramAggregation.aggregate``, once per value.

    Per run the bucket is found once; the sum is still added value by value so that it stays
    bit-for-bit the sum the same ``record`` calls make.
    """
    boundaries = aggregation._boundaries
    with aggregation._lock:
        if aggregation._value is None:
            aggregation._value = aggregation._get_empty_bucket_counts()
        counts = aggregation._value
        total = aggregation._sum
        low, high = aggregation._min, aggregation._max
        for value, count in runs:
            if count == 1:  # most latency runs (one value per batch): no call
                total += value
            else:
                total = _added(total, value, count)
            if value < low:
                low = value
            if value > high:
                high = value
            counts[bisect_left(boundaries, value)] += count
        aggregation._sum = total
        if aggregation._record_min_max:
            aggregation._min, aggregation._max = low, high


if sys.version_info < (3, 12):

    def _added(total: float, value: float, count: int) -> float:
        """``total`` plus ``value``, ``count`` times, rounded after each addition as the
        SDK's ``_sum += value`` is: before 3.12, ``sum()`` adds floats exactly that way, in C."""
        return sum(repeat(value, count), total) if count > 1 else total + value

else:

    def _added(total: float, value: float, count: int) -> float:
        """From 3.12 on ``sum()`` compensates the rounding of floats, which the SDK's
        ``_sum += value`` does not: the same additions, one by one."""
        for _ in range(count):
            total += value
        return total


def _shape_ok(histogram: object) -> bool:
    """The internals this module relies on are where it expects them."""
    h: Any = histogram
    return (
        isinstance(h, _SdkHistogram)
        and isinstance(getattr(h, "_measurement_consumer", None), SynchronousMeasurementConsumer)
        and hasattr(h._measurement_consumer, "_reader_storages")
        and hasattr(h._measurement_consumer, "_sdk_config")
        and all(
            hasattr(_ExplicitBucketHistogramAggregation, name)
            for name in ("_get_empty_bucket_counts", "aggregate", "collect")
        )
    )


_SAMPLE: Final = (
    (0.005, 3), (0.0123, 1), (0.2, 2), (0.2, 1), (5.0, 1), (0.0, 2), (1e-9, 4), (0.1, 1),
)  # fmt: skip
"""Runs at, between and beyond bucket boundaries, repeated and single."""


def check(name: str = "histograms") -> str | None:
    """None when runs applied here export what one ``record`` per value exports, with
    cumulative and delta temporality and trace-based exemplars; else what differs."""
    if not _AVAILABLE:
        return "the SDK's aggregation internals are not where expected"
    from opentelemetry.sdk.metrics import Histogram as SdkHistogram
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

    sampled = set_span_in_context(
        NonRecordingSpan(SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED)))
    )
    for temporality in (AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA):
        reader = InMemoryMetricReader(preferred_temporality={SdkHistogram: temporality})
        provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
        try:
            histogram = provider.get_meter("pairwatch.check").create_histogram(
                "check", explicit_bucket_boundaries_advisory=[0.005, 0.01, 0.1, 1.0]
            )
            if not _shape_ok(histogram):
                return "the SDK's histogram is not shaped as expected"
            writer = object.__new__(HistogramWriter)
            writer.histogram, writer._sdk, writer.waiting = histogram, histogram, False
            for by in ("record", "runs"):  # an SDK before 1.31 makes each set's aggregation
                histogram.record(0.5, {"by": by})  # in record(): the same first value in both
            for context in (otel_context.Context(), sampled):
                for value, count in _SAMPLE:
                    for _ in range(count):
                        histogram.record(value, {"by": "record"}, context)
                if not writer._fast(_SAMPLE, {"by": "runs"}, context):
                    return "it declined the default aggregation"
            data: Any = reader.get_metrics_data()
            points = {
                dict(point.attributes or {})["by"]: point
                for metric in data.resource_metrics[0].scope_metrics[0].metrics
                for point in metric.data.data_points
            }
        finally:
            provider.shutdown()
        one, runs = points.get("record"), points.get("runs")
        if one is None or runs is None or _exported(one) != _exported(runs):
            return f"{temporality.name.lower()} points differ from one record per value"
    return None


def _exported(point: Any) -> tuple[Any, ...]:
    """What an exporter reads of a histogram point, but its times and span ids."""
    exemplars = sorted(
        (e.value, e.span_id is not None) for e in getattr(point, "exemplars", None) or ()
    )
    return (
        point.count, point.sum, tuple(point.bucket_counts), point.min, point.max, exemplars,
    )  # fmt: skip
