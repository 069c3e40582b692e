"""How one closed batch becomes adds and observations on the drain's sums.

Split from :mod:`pairwatch.otel.telemetry`, which owns the instruments and decides when a
batch is recorded (queued, drained, spans first); this mixin says what each batch records:
the three records every batch makes, its latencies, and the counts only a batch that went
wrong has (missing per method and reason, unknown and null ids, violations, late replies).
Everything here runs inside a drain, under its lock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from opentelemetry import metrics
from opentelemetry.context import Context

from pairwatch.otel import zeros
from pairwatch.otel.labels import Labels, Limiter
from pairwatch.otel.names import CLOSE_REASON, DIAGNOSIS, REASON, RPC_METHOD
from pairwatch.otel.sdk.histograms import HistogramWriter, runs_of
from pairwatch.otel.sums import Adding, Columns, Observing, Sums
from pairwatch.pairing import diagnosis
from pairwatch.pairing.records import Batch, Tally

__all__ = ["BatchRecords"]

Attrs = Mapping[str, str | int]

_ANSWERED = object()
"""Marks :meth:`BatchRecords._record_answered`'s keys among the drain's accumulator keys."""


def _feed_common(
    sizes: Observing, closed: Adding, requests: Adding, size: int, n: int, current: int
) -> None:
    """Feed one batch into its ``batch.size``, ``batch.closed`` and ``batch.requests``
    accumulators: equal sizes in a row become one run."""
    runs = sizes.runs
    if runs and runs[-1][0] == size:
        runs[-1] = (size, runs[-1][1] + 1)
    else:
        runs.append((size, 1))
    sizes.batches.append(current)
    closed.total += 1
    closed.batches.append(current)
    if n:
        requests.total += n
        requests.batches.append(current)


class BatchRecords:
    """The per-batch recorders of :class:`~pairwatch.otel.telemetry.Telemetry`, which sets
    every attribute declared here."""

    _sums: Sums
    _instruments: dict[str, metrics.Counter]
    _add: Callable[[metrics.Counter, int, Attrs], None]
    _observe: Callable[..., None]
    methods: Limiter
    size_writer: HistogramWriter
    latency_writer: HistogramWriter
    lateness_writer: HistogramWriter
    _failed: Callable[[Exception], None]
    closed: metrics.Counter
    requests: metrics.Counter
    missing: metrics.Counter
    unchecked: metrics.Counter
    withdrawn: metrics.Counter
    after_withdrawal: metrics.Counter
    unknown: metrics.Counter
    null: metrics.Counter
    invalid: metrics.Counter
    violation: metrics.Counter
    late: metrics.Counter

    def _zeros(self, rows: list[zeros.Row]) -> None:
        """Export the given series at 0 (see :mod:`pairwatch.otel.zeros` for which)."""
        for key, attrs in rows:
            self._add(self._instruments[key], 0, attrs)

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

    def _record_excused(self, labels: Labels, batch: Batch) -> None:
        """Requests that closed unanswered without being missing: withdrawn by the caller,
        or unchecked by pairwatch, each under its reason."""
        for (kind, reason), n in (batch.excused or {}).items():
            counter = self.withdrawn if kind == "withdrawn" else self.unchecked
            self._add(counter, n, labels.extra(batch.is_batch, **{REASON: reason}))

    def _record_late(self, attrs: Attrs, record: Batch | Tally) -> None:
        """Replies for ids that had closed as missing by timeout, and how late they came.

        Read with ``getattr`` because the ledger fills ``late``/``lateness`` only from the
        release that detects late replies; until then both stay empty.
        """
        late: int = getattr(record, "late", 0)
        if late:
            self._add(self.late, late, attrs)
        lateness: Sequence[float] = getattr(record, "lateness", ())
        if lateness:
            self._observe(self.lateness_writer, runs_of(lateness), attrs)

    def _method_attrs(self, labels: Labels, is_batch: bool, method: str) -> Attrs:
        """The latency attributes of a limited method; its first sight exports zero rows."""
        if (is_batch, method) not in labels.zeroed_methods:
            self._zeros(zeros.method_rows(labels, is_batch, method))
        return labels.for_method(is_batch, method)

    def _record_common(
        self,
        labels: Labels,
        is_batch: bool,
        attrs: Attrs,
        diagnosed: str,
        close_reason: str,
        size: int,
        n: int,
    ) -> None:
        """The records every batch makes: ``batch.size``, ``batch.closed``, ``batch.requests``.

        Their accumulators are looked up once per drain per (label set, diagnosis, close
        reason), then fed in place: equal sizes in a row become one run, which
        :mod:`pairwatch.otel.sdk.histograms` applies as the same values one by one.
        """
        sums = self._sums
        current = sums.current
        key = (labels, is_batch, diagnosed, close_reason)
        found = sums.found.get(key)
        if found is None:
            found = sums.found[key] = self._common_sums(
                labels, is_batch, attrs, diagnosed, close_reason
            )
        sizes, closed, requests = found
        _feed_common(sizes, closed, requests, size, n, current)

    def _common_sums(
        self, labels: Labels, is_batch: bool, attrs: Attrs, diagnosed: str, close_reason: str
    ) -> tuple[Observing, Adding, Adding]:
        """The accumulators of :meth:`_record_common` for one label set and outcome."""
        sums = self._sums
        closed_attrs = labels.extra(is_batch, **{DIAGNOSIS: diagnosed, CLOSE_REASON: close_reason})
        return (
            sums.observing(self.size_writer, attrs),
            sums.adding(self.closed, closed_attrs),
            sums.adding(self.requests, attrs),
        )

    def _latency_sums(self, labels: Labels, is_batch: bool, method: str | None) -> Observing:
        """The latency accumulator of one method's ids, recorded with no exemplar context."""
        attrs = self._method_attrs(labels, is_batch, self.methods(method))
        return self._sums.observing(self.latency_writer, attrs)

    def _record_answered(self, labels: Labels, batch: Batch, reason: str) -> bool:
        """Record a batch whose every request one reply body answered, all of one method
        (nearly every batch), as a row of its label set's columns; False, recording
        nothing, for any other batch.

        Diagnosis ``ok`` and one latency for every id: what :meth:`_record_common` and
        :meth:`_record_one_latency` record, found under one key once per drain and fed to
        the same accumulators at commit (:meth:`~pairwatch.otel.sums.Sums.columns`).
        """
        received = batch.received
        n = len(received)
        methods = batch.methods
        first = methods[0] if n else None
        if (
            not n
            or batch.paired != n
            or first is None
            or (n != 1 and (received.count(received[0]) != n or methods.count(first) != n))
        ):
            return False
        sums = self._sums
        is_batch = batch.is_batch
        found = sums.found.get((_ANSWERED, labels, is_batch, reason, first))
        if found is None:
            found = self._answered_columns(labels, is_batch, first, reason)
        found.sizes.append(n)
        found.latencies.append(received[0] - batch.sent_at)  # type: ignore[operator]
        found.batches.append(sums.current)
        return True

    def _answered_columns(
        self, labels: Labels, is_batch: bool, method: str, reason: str
    ) -> Columns:
        """The columns of one-method healthy batches, found once per drain (the batch's zero
        rows exported first, the first time its label set closes a batch)."""
        if is_batch not in labels.zeroed:
            self._zeros(zeros.batch_rows(labels, is_batch))
        attrs = labels.by_batch[is_batch]
        sums = self._sums
        found = sums.found[(_ANSWERED, labels, is_batch, reason, method)] = sums.columns(
            *self._common_sums(labels, is_batch, attrs, diagnosis.OK, reason),
            self._latency_sums(labels, is_batch, method),
        )
        return found

    def _record_latencies(self, labels: Labels, batch: Batch, ctx: Context | None) -> None:
        """One observation per paired id, grouped per attribute set (see otel/sdk/histograms)."""
        methods = self.methods
        sent_at = batch.sent_at
        is_batch = batch.is_batch
        received = batch.received
        n = len(received)
        if n and batch.paired == n and received.count(received[0]) == n:
            # One body answered the whole batch: one latency for all its ids.
            value = received[0] - sent_at  # type: ignore[operator]
            self._record_one_latency(labels, is_batch, batch.methods, n, value, ctx)
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
            attrs = self._method_attrs(labels, is_batch, name)
            self._observe(self.latency_writer, runs_of(values), attrs, ctx)

    def _record_one_latency(
        self,
        labels: Labels,
        is_batch: bool,
        batch_methods: Sequence[str | None],
        n: int,
        value: float,
        ctx: Context | None,
    ) -> None:
        """The latency of a batch answered whole by one body, counted per method in C."""
        first = batch_methods[0]
        one_method = n == 1 or batch_methods.count(first) == n
        if ctx is None and one_method:
            # The usual batch: one method, one accumulator found once per drain.
            sums = self._sums
            key = (labels, is_batch, first)
            found = sums.found.get(key)
            if found is None:
                found = sums.found[key] = self._latency_sums(labels, is_batch, first)
            found.runs.append((value, n))
            found.batches.append(sums.current)
            return
        per_method = ((first, n),) if one_method else Counter(batch_methods).items()
        for method, k in per_method:
            attrs = self._method_attrs(labels, is_batch, self.methods(method))
            self._observe(self.latency_writer, [(value, k)], attrs, ctx)

    def _record_missing(self, labels: Labels, batch: Batch) -> None:
        per_method: dict[tuple[str, str], int] = {}
        cut = batch.tracked
        for index, (method, received_at) in enumerate(
            zip(batch.methods, batch.received, strict=True)
        ):
            if received_at is None and batch.excused_for(index) is None:
                reason = batch.close_reason if index < cut else "evicted"
                key = (self.methods(method), reason)
                per_method[key] = per_method.get(key, 0) + 1
        for (method, reason), n in per_method.items():
            self._method_attrs(labels, batch.is_batch, method)
            attrs = labels.extra(batch.is_batch, **{RPC_METHOD: method, CLOSE_REASON: reason})
            self._add(self.missing, n, attrs)
