"""The only module that records pairwatch's metrics and spans through OpenTelemetry.

Instruments are made from the table in :mod:`pairwatch.otel.vocabulary`; this module decides
what to record and when.  A closed batch is queued (:mod:`pairwatch.otel.deferred`) and, in
the drain, becomes its spans (:mod:`pairwatch.otel.spans`) and at most one add per counter
that moved, one ``batch.size`` record and its latencies (what each batch records is
:mod:`pairwatch.otel.batch_records`), summed per instrument and attribute set
(:mod:`pairwatch.otel.sums`) and applied with one SDK call per set.  Spans cannot be summed:
turn them off (``spans=False``), sample traces, or bound them (``max_child_spans``,
``child_spans="abnormal"``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from opentelemetry import metrics, trace
from opentelemetry.context import Context

from pairwatch._version import __version__
from pairwatch.otel import deferred, zeros
from pairwatch.otel.batch_records import BatchRecords
from pairwatch.otel.labels import LabelCache, Labels, Limiter
from pairwatch.otel.names import (
    DEFERRED_FLUSH,
    DUPLICATE_SCOPE,
    ERROR_KIND,
    LABEL_SETS_CAP,
    METHOD_CAP,
    OTHER_METHOD,
    REASON,
    REPAIR_ACTION,
    SCHEMA_URL,
    SCOPE,
    SERVER_ADDRESS_CAP,
)
from pairwatch.otel.sdk.histograms import HistogramWriter
from pairwatch.otel.span_policy import DEFAULT_POLICY, SpanAttributes, SpanPolicy
from pairwatch.otel.spans import SpanWriter
from pairwatch.otel.sums import Sums
from pairwatch.otel.vocabulary import INSTRUMENTS, Instrument
from pairwatch.pairing.records import NOT_ENDED, Batch, Tally
from pairwatch.runtime import guard

__all__ = ["Labels", "SpanAttributes", "Telemetry"]

Attrs = Mapping[str, str | int]


class Telemetry(BatchRecords):
    """The instruments for one (meter provider, tracer provider) pair.

    Every instrument is made from its row in :mod:`pairwatch.otel.vocabulary`; the caps on
    method names and server addresses are per instance, which is per meter provider (see
    :mod:`pairwatch.otel.shared`), because a provider is what exports a set of series.
    """

    def __init__(
        self,
        meter_provider: metrics.MeterProvider | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        method_cap: int = METHOD_CAP,
        spans: bool = True,
        address_cap: int = SERVER_ADDRESS_CAP,
        label_sets_cap: int = LABEL_SETS_CAP,
    ) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter(
            SCOPE, __version__, schema_url=SCHEMA_URL
        )
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(
            SCOPE, __version__, schema_url=SCHEMA_URL
        )
        self.spans = spans
        self.methods = Limiter(method_cap)
        self.addresses = Limiter(address_cap)
        self.endpoints = Limiter(address_cap)  # address:port pairs, as many as addresses
        self.label_sets = LabelCache(Labels, label_sets_cap)
        self.span_writer = SpanWriter(self.tracer, self.internal_error, self.methods)
        # Every row of the vocabulary becomes an instrument, so a row added there is created
        # (and exported once recorded) without touching this constructor.
        counters = {r.key: _counter(meter, r) for r in INSTRUMENTS if r.kind == "counter"}
        histograms = {r.key: _histogram(meter, r) for r in INSTRUMENTS if r.kind == "histogram"}
        self._instruments = counters
        self.size = histograms["size"]
        self.pair_latency = histograms["pair_latency"]
        self.lateness = histograms["lateness"]
        self.latency_writer = HistogramWriter(self.pair_latency)
        self.size_writer = HistogramWriter(self.size)
        self.lateness_writer = HistogramWriter(self.lateness)
        # What a drain records, summed per (instrument, attribute set) and applied when it
        # ends (see pairwatch.otel.sums).
        self._sums = sums = Sums()
        self._add = sums.add
        self._observe = sums.observe
        deferred.on_drained(self._commit)
        self.requests = counters["requests"]
        self.closed = counters["closed"]
        self.mismatch = counters["mismatch"]
        self.unknown = counters["unknown"]
        self.missing = counters["missing"]
        self.unchecked = counters["unchecked"]
        self.withdrawn = counters["withdrawn"]
        self.after_withdrawal = counters["after_withdrawal"]
        self.null = counters["null"]
        self.duplicate = counters["duplicate"]
        self.invalid = counters["invalid"]
        self.invalid_request = counters["invalid_request"]
        self.out_of_order = counters["out_of_order"]
        self.violation = counters["violation"]
        self.late = counters["late"]
        self.repaired = counters["repaired"]
        self.internal_errors = counters["internal_errors"]
        meter.create_observable_gauge(
            DEFERRED_FLUSH,
            callbacks=[_flush_on_collect],
            description="Not exported; drains deferred measurements before each collection",
        )

    def labels(
        self,
        transport: str,
        integration: str,
        server_address: str | None,
        side: str = "client",
        server_port: int | None = None,
    ) -> Labels:
        """The shared attribute sets of a channel; the server address is capped here, and
        its port by the same cap on distinct address-and-port pairs (past it, no port)."""
        address = self.addresses(server_address) if server_address else None
        port = None
        if (
            address is not None
            and address != OTHER_METHOD
            and isinstance(server_port, int)
            and self.endpoints(f"{address}:{server_port}") != OTHER_METHOD
        ):
            port = server_port
        return self.label_sets.get(transport, integration, address, side, port)

    # ------------------------------------------------------------------ metrics
    def stray(self, labels: Labels, batch: Batch | None, tally: Tally) -> None:
        deferred.submit(self._stray, labels, batch, tally)

    def _stray(self, labels: Labels, batch: Batch | None, tally: Tally) -> None:
        try:
            self._sums.current += 1
            is_batch = batch.is_batch if batch is not None else False
            if is_batch not in labels.zeroed:
                self._zeros(zeros.batch_rows(labels, is_batch))
            self._record_tally(
                labels, is_batch, tally.unknown, tally.null, tally.invalid, tally.violations
            )
            if tally.after_withdrawal:
                self._add(self.after_withdrawal, tally.after_withdrawal, labels.by_batch[is_batch])
            self._record_late(labels.by_batch[is_batch], tally)
        except Exception as exc:
            guard.report("telemetry", exc, self.internal_error)

    def _commit(self) -> None:
        """Apply what the drain summed (run by :mod:`pairwatch.otel.deferred`, under its lock)."""
        self._sums.commit(self._failed)

    def _failed(self, exc: Exception) -> None:
        guard.report("telemetry", exc, self.internal_error)

    def batch_closed(
        self,
        labels: Labels,
        batch: Batch,
        span_attributes: SpanAttributes | None,
        policy: SpanPolicy = DEFAULT_POLICY,
    ) -> None:
        """Queue a closed batch's metrics and spans: the caller pays only the append."""
        deferred.submit(
            self._record_batch, labels, batch, span_attributes, policy, weight=len(batch.keys)
        )

    def _record_batch(
        self,
        labels: Labels,
        batch: Batch,
        span_attributes: SpanAttributes | None,
        policy: SpanPolicy = DEFAULT_POLICY,
    ) -> None:
        """Record one closed batch (in a drain, off the caller's path)."""
        sums = self._sums
        sums.current += 1
        # Spans first: a sampled batch span is the context its latencies are recorded in,
        # so that the SDK's trace-based exemplar filter links a latency bucket to the trace.
        ctx: Context | None = None
        if self.spans:
            try:
                ctx = self.span_writer.write(
                    batch, span_attributes, policy, server=labels.side == "server"
                )
            except Exception as exc:  # a broken tracer or processor costs the spans only
                guard.report("telemetry", exc, self.internal_error)
        try:
            is_batch = batch.is_batch
            # Batch.ended read whole: its close_reason and diagnosis properties cost a call each.
            close_reason, _, diagnosed = batch.ended or NOT_ENDED
            answered = ctx is None and batch.rare is None
            if answered and self._record_answered(labels, batch, close_reason):
                return  # answered whole by one body: its label set's columns
            attrs = labels.by_batch[is_batch]
            if is_batch not in labels.zeroed:
                self._zeros(zeros.batch_rows(labels, is_batch))
            n = len(batch.keys)
            self._record_common(labels, is_batch, attrs, diagnosed, close_reason, batch.size, n)
            self._record_latencies(labels, batch, ctx)
            if batch.rare is None:
                return  # what the checks below read was never written: nothing went wrong
            if batch.missing:
                self._record_missing(labels, batch)
            if batch.excused:
                self._record_excused(labels, batch)
            if batch.after_withdrawal:
                self._add(self.after_withdrawal, batch.after_withdrawal, attrs)
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
            if batch.unknown or batch.null or batch.invalid or batch.violations:
                self._record_tally(
                    labels, is_batch, batch.unknown, batch.null, batch.invalid, batch.violations
                )
            if batch.late:
                self._record_late(attrs, batch)
        except Exception as exc:  # a broken meter: this batch's records only
            guard.report("telemetry", exc, self.internal_error)

    def repair(self, labels: Labels, is_batch: bool, actions: Mapping[str, int]) -> None:
        """Count what repair mode changed in one reply (see :mod:`pairwatch.pairing.repair`)."""
        for action, n in actions.items():
            if n:
                self.repaired.add(n, labels.extra(is_batch, **{REPAIR_ACTION: action}))

    def internal_error(self, kind: str) -> None:
        self.internal_errors.add(1, {ERROR_KIND: kind})


def _counter(meter: metrics.Meter, row: Instrument) -> metrics.Counter:
    return meter.create_counter(row.name, unit=row.unit, description=row.description)


def _histogram(meter: metrics.Meter, row: Instrument) -> metrics.Histogram:
    return meter.create_histogram(
        row.name,
        unit=row.unit,
        description=row.description,
        explicit_bucket_boundaries_advisory=list(row.buckets),
    )


def _flush_on_collect(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
    deferred.flush()
    return ()
