"""Record many observations of one histogram attribute set with one SDK lookup, not n calls.

Why: the OpenTelemetry Python SDK has no way to record a value more than once per call, and
each ``Histogram.record`` costs about 9 µs (a ``Measurement`` object, attribute cleaning and
hashing, three dispatch layers, a lock) while the arithmetic it exists for (one bucket
increment, one addition, a min and a max) costs well under a microsecond.  A 100-request
batch paired from one body has 100 latencies and usually one attribute set, so
``batch.pair_latency`` alone would cost more CPU than the loopback round trip.

What this does: for the SDK's default explicit-bucket histogram aggregation, it finds the
aggregation of the attribute set once (exactly as the SDK does: its view's attribute filter,
its hashed key, its cardinality limit) and applies the observations under the aggregation's
own lock with the SDK's own arithmetic, one value at a time, in order, so sums, counts,
buckets, min and max are bit-for-bit what n ``record`` calls give.  Exemplars too: values
are recorded in the context of their batch's span, and when the exemplar filter samples
(the SDK's default trace-based filter does for a sampled span) each run is offered once to
the histogram's bucket-aligned reservoir, which keeps the last offer per bucket: the same
exemplars n offers leave.  Everything else (another aggregation or reservoir chosen by a
view, a custom exemplar filter, a disabled meter, a non-finite or negative value, an SDK
whose internals look different) takes the plain path: one ``record`` per value.
``tests/test_sdk_fast.py`` pins the equality against the installed SDK, and any unexpected
error switches the fast path off for good.

This reads SDK internals (``opentelemetry.sdk.metrics._internal``): it is checked at start
and verified by the test above rather than trusted.
"""

from __future__ import annotations

import logging
import math
import sys
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from time import time_ns
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics
from opentelemetry.context import Context

__all__ = ["HistogramWriter", "Run", "runs_of"]

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


def _frozen_items(attributes: Mapping[str, str]) -> Any:
    return frozenset(attributes.items())


# How a view's match keys an attribute set: recent SDKs hash it, older ones (1.30) key it by
# the frozenset of its items.
_key_of: Callable[[Mapping[str, str]], Any] = _frozen_items
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
        if _AVAILABLE and _shape_ok(h):
            self._sdk = h
            return True
        return False

    def record_many(self, values: Sequence[float], attributes: Mapping[str, str]) -> None:
        """Record every value with the same attributes; identical to a ``record`` loop."""
        self.record_runs(runs_of(values), attributes)

    def record_runs(
        self, runs: Sequence[Run], attributes: Mapping[str, str], context: Context | None = None
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
                _log.warning("pairwatch: fast histogram path disabled: %r", exc)
        record = self.histogram.record
        for value, count in runs:
            for _ in range(count):
                record(value, attributes, context)

    def _fast(self, runs: Sequence[Run], attributes: Mapping[str, str], context: Context) -> bool:
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


def _filtered(match: Any, attributes: Mapping[str, str]) -> tuple[Any, dict[str, str]]:
    attrs = dict(attributes)
    keys = match._view._attribute_keys
    if keys is not None:
        attrs = {k: v for k, v in attrs.items() if k in keys}
    return _key_of(attrs), attrs


def _aggregation(match: Any, attributes: Mapping[str, str]) -> Any:
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


def _aggregation_locked(match: Any, attributes: Mapping[str, str]) -> Any:
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
