"""What one drain records, summed per (instrument, attribute set) and applied at its end.

Why: a drain records up to 256 closed batches (all that is queued, under
:func:`pairwatch.flush`), and nearly every one makes the same four records under attribute
sets its channel kind shares: a ``batch.closed`` and a ``batch.requests`` add, a
``batch.size`` and a ``batch.pair_latency`` observation.  Summed here, the drain makes one
SDK call per set instead of several per batch, with identical exported values: a counter
gets the sum of its adds, a histogram its values in the order they were observed
(:mod:`pairwatch.otel.sdk_fast` applies them).

The accumulators are found by key, so a batch's records cost a few list operations each.
Every accumulator also lists the batches that fed it: an SDK call that fails counts one
internal error per batch it carried, as recording each batch on its own would have.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import metrics
from opentelemetry.context import Context

from pairwatch.otel.sdk_fast import HistogramWriter, Run

__all__ = ["Adding", "Observing", "Sums"]

Attrs = Mapping[str, str]

Adding = list[Any]
"""``[counter, attrs, summed n, batches]``: one counter's adds under one attribute set."""

Observing = tuple[HistogramWriter, Attrs, list[Run], list[int], "Context | None"]
"""One histogram's values under one attribute set (and one exemplar context), in order."""


class Sums:
    """The adds and observations of the drain under way; :meth:`commit` applies them.

    ``current`` numbers the records (closed batches, stray tallies) for the error counts.
    """

    __slots__ = ("_adds", "_observations", "current", "found")

    def __init__(self) -> None:
        self._adds: dict[tuple[int, int], Adding] = {}
        self._observations: dict[tuple[int, int, int], Observing] = {}
        self.current = 0
        # Shortcuts of the telemetry to the accumulators it feeds for every batch, keyed by
        # what selects their attribute sets; emptied with the accumulators at each commit.
        self.found: dict[tuple[Any, ...], Any] = {}

    def add(self, counter: metrics.Counter, n: int, attrs: Attrs) -> None:
        """Add ``n`` (0 too: zero rows are exported on purpose) to a counter's set."""
        entry = self.adding(counter, attrs)
        entry[2] += n
        entry[3].append(self.current)

    def adding(self, counter: metrics.Counter, attrs: Attrs) -> Adding:
        """The accumulator of a counter's set; one fed no batch is never applied."""
        key = (id(counter), id(attrs))
        entry = self._adds.get(key)
        if entry is None:
            entry = self._adds[key] = [counter, attrs, 0, []]
        return entry

    def observe(
        self, writer: HistogramWriter, runs: list[Run], attrs: Attrs, ctx: Context | None = None
    ) -> None:
        """Append ``(value, count)`` runs to a histogram's set, after what it already has."""
        entry = self.observing(writer, attrs, ctx)
        entry[2].extend(runs)
        entry[3].append(self.current)

    def observing(
        self, writer: HistogramWriter, attrs: Attrs, ctx: Context | None = None
    ) -> Observing:
        """The accumulator of a histogram's set.  A batch with a sampled span keeps its own
        (its values are recorded in its span's context, for exemplars); the others share
        one per attribute set."""
        key = (id(writer), id(attrs), id(ctx) if ctx is not None else 0)
        entry = self._observations.get(key)
        if entry is None:
            entry = self._observations[key] = (writer, attrs, [], [], ctx)
        return entry

    def commit(self, failed_batch: Callable[[Exception], None]) -> None:
        """Make the summed SDK calls; ``failed_batch`` runs once per batch a failing one
        carried."""
        adds, self._adds = self._adds, {}
        observations, self._observations = self._observations, {}
        self.found = {}
        failed: set[int] = set()
        last: Exception | None = None
        for counter, attrs, n, batches in adds.values():
            if not batches:
                continue
            try:
                counter.add(n, attrs)
            except Exception as exc:
                failed.update(batches)
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
