"""Every metric pairwatch emits, and the only module that records them through OpenTelemetry.

The ledger hands over closed batches; this module turns each into at most one add per counter
(only the counters that moved), one ``batch.size`` record, the pair latencies and, when a
recording tracer is configured, one span per batch with a child per request id.  Spans are
made at close with the recorded timestamps, so nothing here runs while a request is in flight.

Recording strategy (measured in ``benchmarks/run.py``; the numbers are in the README):

* Out of the request and off every lock.  Closing a batch only queues it
  (:mod:`pairwatch.otel.deferred`); the SDK calls run in bulk: by the caller every 256 batches, at
  the start of every metric collection (an observable callback), on a daemon thread when
  callers are quiet, or at ``pairwatch.flush()``.  Readers therefore always see every batch
  closed before the collection began, with unchanged values and timestamps.
* Fewer SDK calls for the same numbers.  One SDK call costs about 9 µs; a 100-id batch has
  100 latencies, normally under one attribute set.  They are grouped per attribute set and
  applied to the SDK's explicit-bucket aggregation in one lookup (:mod:`pairwatch.otel.sdk_fast`),
  bit-for-bit what 100 ``record`` calls give; anything unusual (a view with another
  aggregation, exemplar sampling, an unknown SDK) falls back to one ``record`` per value.
* Spans cannot be aggregated: one SDK span per id costs 11 to 15 µs (more on a loaded
  machine), which is why per-id spans cost more than the loopback round trip they describe;
  turn them off with ``spans=False`` or sample traces (a non-recording root makes no children).

Attribute sets are built once per channel label set and reused: building dicts per call would
cost more than the counting itself.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import metrics, trace

from pairwatch import guard
from pairwatch._version import __version__
from pairwatch.otel import deferred
from pairwatch.otel.labels import Labels, MethodLimiter
from pairwatch.otel.names import (
    CLOSE_REASON,
    DIAGNOSIS,
    DUPLICATE_SCOPE,
    ERROR_KIND,
    INTEGRATION,
    JSONRPC_REQUEST_ID,
    LATENCY_BUCKETS,
    REASON,
    REPAIR_ACTION,
    RPC_METHOD,
    RPC_RESPONSE_STATUS_CODE,
    RPC_SYSTEM_NAME,
    SCOPE,
    SERVER_ADDRESS,
    SIZE_BUCKETS,
)
from pairwatch.otel.sdk_fast import HistogramWriter, Run, runs_of
from pairwatch.otel.spans import SpanAttributes, SpanWriter
from pairwatch.pairing.records import Batch, Tally

__all__ = [
    "INTEGRATION",
    "JSONRPC_REQUEST_ID",
    "LATENCY_BUCKETS",
    "RPC_METHOD",
    "RPC_RESPONSE_STATUS_CODE",
    "RPC_SYSTEM_NAME",
    "SERVER_ADDRESS",
    "Labels",
    "SpanAttributes",
    "Telemetry",
]

Attrs = Mapping[str, str]


class Telemetry:
    """The instruments for one (meter provider, tracer provider) pair."""

    def __init__(
        self,
        meter_provider: metrics.MeterProvider | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        method_cap: int = 32,
        spans: bool = True,
    ) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(SCOPE, __version__)
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(
            SCOPE, __version__
        )
        self.spans = spans
        self.methods = MethodLimiter(method_cap)
        self._labels: dict[tuple[str, str, str | None], Labels] = {}
        self._labels_lock = threading.Lock()
        self.span_writer = SpanWriter(self.tracer, self.internal_error)

        c = meter.create_counter
        self.size = meter.create_histogram(
            "batch.size",
            unit="{element}",
            description="Elements per batch sent",
            explicit_bucket_boundaries_advisory=list(SIZE_BUCKETS),
        )
        self.pair_latency = meter.create_histogram(
            "batch.pair_latency",
            unit="s",
            description="Time from sending a request to pairing its response, per id",
            explicit_bucket_boundaries_advisory=list(LATENCY_BUCKETS),
        )
        self.latency_writer = HistogramWriter(self.pair_latency)
        self.size_writer = HistogramWriter(self.size)
        # Adds and observations made while a drain records its queued batches, summed per
        # (instrument, attribute set) and applied once when the drain ends: one SDK call per
        # set per drain instead of several per batch, with identical exported values.
        self._adds: dict[tuple[int, int], list[Any]] = {}
        self._observations: dict[
            tuple[int, int], tuple[HistogramWriter, Attrs, list[Run], list[int]]
        ] = {}
        self._current = 0  # numbers the batches (and stray tallies) recorded, for error counts
        deferred.on_drained(self._commit)
        self.requests = c(
            "batch.requests", unit="{request}", description="Requests (elements with an id) sent"
        )
        self.closed = c(
            "batch.closed",
            unit="{batch}",
            description="Batches closed, by diagnosis and close reason",
        )
        self.mismatch = c(
            "batch.response_count_mismatch",
            unit="{batch}",
            description="Batches whose non-null-id response count != requests",
        )
        self.unknown = c(
            "batch.unknown_id_response",
            unit="{response}",
            description="Responses whose id matched nothing pending",
        )
        self.missing = c(
            "batch.missing_response",
            unit="{request}",
            description="Requests with no response when their batch closed",
        )
        self.null = c(
            "batch.null_id_response",
            unit="{response}",
            description="Responses with a null or absent id",
        )
        self.duplicate = c(
            "batch.duplicate_id",
            unit="{request}",
            description="Requests sent with an id that was already pending",
        )
        self.invalid = c(
            "batch.invalid_response",
            unit="{response}",
            description="Received elements that break the response rules",
        )
        self.invalid_request = c(
            "batch.invalid_request",
            unit="{request}",
            description="Sent elements that break or bend the request rules",
        )
        self.out_of_order = c(
            "batch.out_of_order",
            unit="{batch}",
            description="Batches answered in another order than sent",
        )
        self.violation = c(
            "batch.protocol_violation",
            unit="{event}",
            description="Replies where none was allowed, and similar",
        )
        self.repaired = c(
            "batch.repaired",
            unit="{change}",
            description="Changes repair mode made to a batch reply, by action",
        )
        self.internal_errors = c(
            "pairwatch.internal_errors",
            unit="{error}",
            description="Failures inside pairwatch, kept from the client",
        )
        # Observes nothing, so it is never exported: its callback runs at the start of every
        # collection and records what is still queued (see pairwatch.otel.deferred).
        meter.create_observable_gauge(
            "pairwatch.deferred_flush",
            callbacks=[_flush_on_collect],
            description="Not exported; drains deferred measurements before each collection",
        )

    def labels(self, transport: str, integration: str, server_address: str | None) -> Labels:
        key = (transport, integration, server_address)
        found = self._labels.get(key)
        if found is None:
            with self._labels_lock:
                found = self._labels.get(key)
                if found is None:
                    found = Labels(transport, integration, server_address)
                    self._labels[key] = found
        return found

    # ------------------------------------------------------------------ metrics
    def batch_closed(
        self, labels: Labels, batch: Batch, span_attributes: SpanAttributes | None = None
    ) -> None:
        """Queue a closed batch's metrics and spans; the caller pays only the append."""
        deferred.submit(self._batch_closed, labels, batch, span_attributes)

    def stray(self, labels: Labels, batch: Batch | None, tally: Tally) -> None:
        deferred.submit(self._stray, labels, batch, tally)

    def _batch_closed(
        self, labels: Labels, batch: Batch, span_attributes: SpanAttributes | None
    ) -> None:
        try:
            self._record_batch(labels, batch, span_attributes)
        except Exception as exc:
            guard.report("telemetry", exc, self.internal_error)

    def _stray(self, labels: Labels, batch: Batch | None, tally: Tally) -> None:
        try:
            self._current += 1
            is_batch = batch.is_batch if batch is not None else False
            self._record_tally(
                labels, is_batch, tally.unknown, tally.null, tally.invalid, tally.violations
            )
        except Exception as exc:
            guard.report("telemetry", exc, self.internal_error)

    def _add(self, counter: metrics.Counter, n: int, attrs: Attrs) -> None:
        key = (id(counter), id(attrs))
        entry = self._adds.get(key)
        if entry is None:
            self._adds[key] = [counter, attrs, n, [self._current]]
        else:
            entry[2] += n
            entry[3].append(self._current)

    def _observe(self, writer: HistogramWriter, runs: list[Run], attrs: Attrs) -> None:
        key = (id(writer), id(attrs))
        entry = self._observations.get(key)
        if entry is None:
            self._observations[key] = (writer, attrs, runs, [self._current])
        else:
            entry[2].extend(runs)  # in order: the sum is added value by value, as before
            entry[3].append(self._current)

    def _commit(self) -> None:
        """Apply what the drain summed (called by :mod:`pairwatch.otel.deferred`, under its lock).

        A failing SDK call counts one internal error per batch it carried, as recording each
        batch on its own would have.
        """
        adds, self._adds = self._adds, {}
        observations, self._observations = self._observations, {}
        failed: set[int] = set()
        last: Exception | None = None
        for counter, attrs, n, batches in adds.values():
            try:
                counter.add(n, attrs)
            except Exception as exc:
                failed.update(batches)
                last = exc
        for writer, attrs, runs, batches in observations.values():
            try:
                writer.record_runs(runs, attrs)
            except Exception as exc:
                failed.update(batches)
                last = exc
        if last is not None:
            for _ in failed:
                guard.report("telemetry", last, self.internal_error)

    def _record_batch(
        self, labels: Labels, batch: Batch, span_attributes: SpanAttributes | None
    ) -> None:
        self._current += 1
        is_batch = batch.is_batch
        attrs = labels.by_batch[is_batch]
        self._observe(self.size_writer, [(batch.size, 1)], attrs)
        self._add(
            self.closed,
            1,
            labels.extra(
                is_batch, **{DIAGNOSIS: batch.diagnosis, CLOSE_REASON: batch.close_reason}
            ),
        )
        if batch.keys:
            self._add(self.requests, len(batch.keys), attrs)
        self._record_latencies(labels, batch)
        if batch.missing:
            self._record_missing(labels, batch)
        if batch.count_mismatch:
            self._add(self.mismatch, 1, attrs)
        if batch.out_of_order:
            self._add(self.out_of_order, 1, attrs)
        if batch.duplicates_in:
            self._add(
                self.duplicate,
                batch.duplicates_in,
                labels.extra(is_batch, **{DUPLICATE_SCOPE: "in_batch"}),
            )
        if batch.duplicates_cross:
            self._add(
                self.duplicate,
                batch.duplicates_cross,
                labels.extra(is_batch, **{DUPLICATE_SCOPE: "cross_batch"}),
            )
        if batch.invalid_requests:
            for reason, n in batch.invalid_requests.items():
                self._add(self.invalid_request, n, labels.extra(is_batch, **{REASON: reason}))
        self._record_tally(
            labels, is_batch, batch.unknown, batch.null, batch.invalid, batch.violations
        )
        if self.spans:
            self.span_writer.write(batch, span_attributes)

    def repair(self, labels: Labels, is_batch: bool, actions: Mapping[str, int]) -> None:
        """Count what repair mode changed in one reply (see :mod:`pairwatch.pairing.repair`)."""
        for action, n in actions.items():
            if n:
                self.repaired.add(n, labels.extra(is_batch, **{REPAIR_ACTION: action}))

    def internal_error(self, kind: str) -> None:
        self.internal_errors.add(1, {ERROR_KIND: kind})

    def _record_tally(
        self,
        labels: Labels,
        is_batch: bool,
        unknown: int,
        null: int,
        invalid: dict[str, int] | None,
        violations: dict[str, int] | None,
    ) -> None:
        attrs = labels.by_batch[is_batch]
        if unknown:
            self._add(self.unknown, unknown, attrs)
        if null:
            self._add(self.null, null, attrs)
        if invalid:
            for reason, n in invalid.items():
                self._add(self.invalid, n, labels.extra(is_batch, **{REASON: reason}))
        if violations:
            for reason, n in violations.items():
                self._add(self.violation, n, labels.extra(is_batch, **{REASON: reason}))

    def _record_latencies(self, labels: Labels, batch: Batch) -> None:
        """One observation per paired id, grouped per attribute set (see sdk_fast)."""
        methods = self.methods
        sent_at = batch.sent_at
        is_batch = batch.is_batch
        received = batch.received
        n = len(received)
        if n and batch.paired == n and received.count(received[0]) == n:
            # One body answered the whole batch: one latency, counted per method in C.
            value = received[0] - sent_at  # type: ignore[operator]
            for method, k in Counter(batch.methods).items():
                attrs = labels.for_method(is_batch, methods(method))
                self._observe(self.latency_writer, [(value, k)], attrs)
            return
        groups: dict[str, list[float]] = {}
        for method, received_at in zip(batch.methods, batch.received, strict=True):
            if received_at is not None:
                name = methods(method)
                values = groups.get(name)
                if values is None:
                    values = groups[name] = []
                values.append(received_at - sent_at)
        for name, values in groups.items():
            self._observe(self.latency_writer, runs_of(values), labels.for_method(is_batch, name))

    def _record_missing(self, labels: Labels, batch: Batch) -> None:
        per_method: dict[tuple[str, str], int] = {}
        cut = batch.evicted_from if batch.evicted_from >= 0 else len(batch.keys)
        for index, (method, received_at) in enumerate(
            zip(batch.methods, batch.received, strict=True)
        ):
            if received_at is None:
                reason = batch.close_reason if index < cut else "evicted"
                key = (self.methods(method), reason)
                per_method[key] = per_method.get(key, 0) + 1
        for (method, reason), n in per_method.items():
            attrs = labels.extra(batch.is_batch, **{RPC_METHOD: method, CLOSE_REASON: reason})
            self._add(self.missing, n, attrs)


def _flush_on_collect(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
    deferred.flush()
    return ()
