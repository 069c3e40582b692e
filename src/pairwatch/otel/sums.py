"""What one drain records, summed per (instrument, attribute set) and applied at its end.

Why: a drain records up to 256 closed batches (all that is queued, under
:func:`pairwatch.flush`), and nearly every one makes the same four records under attribute
sets its channel kind shares: a ``batch.closed`` and a ``batch.requests`` add, a
``batch.size`` and a ``batch.pair_latency`` observation.  Summed here, the drain makes one
SDK call per set instead of several per batch, with identical exported values: a counter
gets the sum of its adds, a histogram its values in the order they were observed
(:mod:`pairwatch.otel.sdk.histograms` applies them).

The accumulators are found by key, so a batch's records cost a few list operations each.
Every accumulator also lists the batches that fed it: an SDK call that fails counts one
internal error per batch it carried, as recording each batch on its own would have.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from opentelemetry import metrics
from opentelemetry.context import Context

from pairwatch.otel.sdk.histograms import HistogramWriter, Run, runs_of

__all__ = ["Adding", "Columns", "Observing", "Sums"]

Attrs = Mapping[str, str | int]


class Adding:
    """One counter's adds under one attribute set, summed, and the batches that fed them."""

    __slots__ = ("attrs", "batches", "counter", "total")

    def __init__(self, counter: metrics.Counter, attrs: Attrs) -> None:
        self.counter = counter
        self.attrs = attrs
        self.total = 0
        self.batches: list[int] = []


class Observing(NamedTuple):
    """One histogram's values under one attribute set (and one exemplar context), in
    order, and the batches that fed them."""

    writer: HistogramWriter
    attrs: Attrs
    runs: list[Run]
    batches: list[int]
    context: Context | None


class Columns(NamedTuple):
    """The batches of one label set and method that one body answered whole, this drain:
    their sizes, latencies and numbers, fed at commit into the accumulators of
    ``batch.size``, ``batch.closed``, ``batch.requests`` and ``batch.pair_latency``."""

    sizes: list[int]
    latencies: list[float]
    batches: list[int]
    into: tuple[Observing, Adding, Adding, Observing]


class Sums:
    """The adds and observations of the drain under way; :meth:`commit` applies them.

    ``current`` numbers the records (closed batches, stray tallies) for the error counts.
    """

    __slots__ = ("_adds", "_columns", "_observations", "current", "found")

    def __init__(self) -> None:
        self._adds: dict[tuple[int, int], Adding] = {}
        self._observations: dict[tuple[int, int, int], Observing] = {}
        self._columns: list[Columns] = []
        self.current = 0
        # Shortcuts of the telemetry to the accumulators it feeds for every batch, keyed by
        # what selects their attribute sets; emptied with the accumulators at each commit.
        self.found: dict[tuple[Any, ...], Any] = {}

    def add(self, counter: metrics.Counter, n: int, attrs: Attrs) -> None:
        """Add ``n`` (0 too: zero rows are exported on purpose) to a counter's set."""
        entry = self.adding(counter, attrs)
        entry.total += n
        entry.batches.append(self.current)

    def adding(self, counter: metrics.Counter, attrs: Attrs) -> Adding:
        """The accumulator of a counter's set; one fed no batch is never applied."""
        key = (id(counter), id(attrs))
        entry = self._adds.get(key)
        if entry is None:
            entry = self._adds[key] = Adding(counter, attrs)
        return entry

    def observe(
        self, writer: HistogramWriter, runs: list[Run], attrs: Attrs, ctx: Context | None = None
    ) -> None:
        """Append ``(value, count)`` runs to a histogram's set, after what it already has."""
        entry = self.observing(writer, attrs, ctx)
        entry.runs.extend(runs)
        entry.batches.append(self.current)

    def observing(
        self, writer: HistogramWriter, attrs: Attrs, ctx: Context | None = None
    ) -> Observing:
        """The accumulator of a histogram's set.  A batch with a sampled span keeps its own
        (its values are recorded in its span's context, for exemplars); the others share
        one per attribute set."""
        key = (id(writer), id(attrs), id(ctx) if ctx is not None else 0)
        entry = self._observations.get(key)
        if entry is None:
            entry = self._observations[key] = Observing(writer, attrs, [], [], ctx)
        return entry

    def columns(
        self, sizes: Observing, closed: Adding, requests: Adding, latencies: Observing
    ) -> Columns:
        """Columns for the batches one body answered whole under one label set and method,
        fed into these four accumulators when the drain commits.  Nearly every batch is
        one: three appends per batch instead of feeding four accumulators.  What is applied
        is the same: counters get the same sums, histograms the same values (after the
        values fed one by one in the same drain, which only an exemplar reservoir keeping
        the last value could tell, under a filter that samples without a span)."""
        found = Columns([], [], [], (sizes, closed, requests, latencies))
        self._columns.append(found)
        return found

    def _feed_columns(self, failed_batch: Callable[[Exception], None]) -> None:
        """The columns into their accumulators.  Shielded per label set: one that cannot be
        fed counts one failure per batch it held, and the rest of the drain still commits."""
        columns, self._columns = self._columns, []
        for found in columns:
            try:
                self._feed(found)
            except Exception as exc:
                for _ in found.batches:
                    failed_batch(exc)

    @staticmethod
    def _feed(found: Columns) -> None:
        sizes, values, batches = found.sizes, found.latencies, found.batches
        observed, closed, requests, latencies = found.into
        if batches:
            one_size = sizes.count(sizes[0]) == len(sizes)  # nearly always: one run
            runs = [(sizes[0], len(sizes))] if one_size else runs_of(sizes)
            latency_runs = list(zip(values, sizes, strict=True))  # before anything is fed
            observed.runs.extend(runs)
            observed.batches.extend(batches)
            closed.total += len(batches)
            closed.batches.extend(batches)
            requests.total += sum(sizes)
            requests.batches.extend(batches)
            latencies.runs.extend(latency_runs)
            latencies.batches.extend(batches)

    def commit(self, failed_batch: Callable[[Exception], None]) -> None:
        """Make the summed SDK calls; ``failed_batch`` runs once per batch a failing one
        carried."""
        self._feed_columns(failed_batch)
        adds, self._adds = self._adds, {}
        observations, self._observations = self._observations, {}
        self.found = {}
        failed: set[int] = set()
        last: Exception | None = None
        for entry in adds.values():
            if not entry.batches:
                continue
            try:
                entry.counter.add(entry.total, entry.attrs)
            except Exception as exc:
                failed.update(entry.batches)
                last = exc
        for writer, attrs, runs, batches, ctx in observations.values():
            if not batches:
                continue
            try:
                writer.record_runs(runs, attrs, ctx)
            except Exception as exc:
                failed.update(batches)
                last = exc
        if last is not None:
            for _ in failed:
                failed_batch(last)
