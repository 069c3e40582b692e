"""How a channel's books close batches: at body or stream end, one by one when a caller stops
waiting, at their deadline, or not at all when the replies come on another channel.

Split from :mod:`pairwatch.pairing.ledger` (which registers and pairs) so that each file has
one job: this one says what a batch looks like when it closes (what is still pending is
missing; the count mismatch, re-typed ids and the diagnosis are settled here, once) and
where it goes (the sink).  :class:`Closing` is the ledger's half that does this; it holds no
state of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from pairwatch.pairing import diagnosis
from pairwatch.pairing.deadlines import Deadlines
from pairwatch.pairing.intake import count_retyped
from pairwatch.pairing.late import TimedOut
from pairwatch.pairing.limits import Budget
from pairwatch.pairing.opened import OpenBatches
from pairwatch.pairing.records import Batch, Tally
from pairwatch.pairing.table import PendingTable

__all__ = ["Closing", "LedgerSink"]


class LedgerSink(Protocol):
    """Where closed batches and unattributed responses go (telemetry, audit, tests)."""

    def batch_closed(self, batch: Batch) -> None: ...

    def stray(self, batch: Batch | None, tally: Tally) -> None: ...


class Closing:
    """The closing half of :class:`~pairwatch.pairing.ledger.Ledger` (which sets these)."""

    __slots__ = ()

    _lock: threading.Lock
    _open: OpenBatches
    _deadlines: Deadlines
    _budget: Budget
    _table: PendingTable
    _held: Batch | None
    _clock: Callable[[], float]
    timed_out: TimedOut
    sink: LedgerSink

    def close(self, reason: str = "closed") -> None:
        """Close every open batch of the channel (body end, stream end, stream dropped...)."""
        closed: list[Batch] = []
        with self._lock:
            self._drop_held()
            for batch in self._open.values():
                self._finish(batch, reason, closed)
            self._open.clear()
            self._deadlines.clear()
        self._emit(closed)

    def withdraw(self) -> None:
        """Forget every open batch uncounted: a 202 or a redirect says its requests are
        answered on another channel, where they are counted (else twice, once as missing)."""
        with self._lock:
            self._drop_held()
            for batch in self._open.values():
                batch.open = False
                self._budget.release(
                    batch.evicted_from if batch.evicted_from >= 0 else len(batch.keys)
                )
                self._table.release(batch)
            self._open.clear()
            self._deadlines.clear()

    def close_batch(self, batch: Batch, reason: str) -> None:
        """Close one batch now: its caller stopped waiting (a client library's own timeout,
        an error it synthesized).  What is still pending counts as missing with ``reason``."""
        closed: list[Batch] = []
        with self._lock:
            if batch is self._held:
                self._drop_held()
            elif batch.open and not batch.expected_nothing:  # see _finish
                self._finish(batch, reason, closed)
        self._emit(closed)

    def forget(self) -> None:
        """Mark every open batch closed, uncounted, and keep nothing: for a forked child,
        whose fresh books must not take the parent's batches back (the parent counts them).

        Without the lock: in a child only the forking thread runs, and the lock may have
        been copied held by a thread that no longer exists.
        """
        self._drop_held()
        self._open.forget()
        self._deadlines.clear()

    def expire(self) -> None:
        """Close batches whose timeout passed; called by the sweeper and on every event."""
        closed: list[Batch] = []
        with self._lock:
            self._expire(self._clock(), closed)
        self._emit(closed)

    def _drop_held(self) -> None:
        if self._held is not None:
            self._held.open = False
            self._held = None  # type: ignore[misc]  # a slot of Ledger, which sets it

    def _expire(self, now: float, closed: list[Batch]) -> None:
        if self._open.count:
            for batch in self._deadlines.due(now):
                self._finish(batch, "timeout", closed)

    def _finish(self, batch: Batch, reason: str, closed: list[Batch]) -> None:
        if not batch.open:
            return
        batch.open = False
        closed_at = self._clock()
        batch.ended = (reason, closed_at, "")  # close_reason, closed_at, diagnosis
        keys = batch.keys
        # Nothing unusual was written (no rare field): each reads as its default, so the
        # usual batch is judged from its slots alone (a descriptor read costs a call).
        usual = batch.rare is None
        # Registered (in the table, the open batches, the deadlines and the budget) unless it
        # expected nothing: a held [] or a batch without ids closes without ever being.  An
        # open batch is always this ledger's: a forked child's fresh books forget the
        # inherited ones (see :meth:`forget`).
        if usual or not batch.expected_nothing:
            self._open.closed()
            evicted_from = -1 if usual else batch.evicted_from
            self._budget.release(evicted_from if evicted_from >= 0 else len(keys))
            self._deadlines.closed()
        missing_keys = self._table.release(batch) if batch.paired < len(keys) else []
        if usual:  # no unknown id came, so none can be a missing id re-typed
            if batch.paired != len(keys):
                batch.count_mismatch = True
        else:
            if not batch.expected_nothing and batch.paired + batch.unknown != len(keys):
                batch.count_mismatch = True
            retyped = count_retyped(batch.unknown_keys, missing_keys)
            if retyped:
                batch.type_mismatch = retyped
        if reason == "timeout" and missing_keys:
            self.timed_out.remember(batch, missing_keys, closed_at)
        batch.ended = (reason, closed_at, diagnosis.diagnose_batch(batch))
        closed.append(batch)

    def _emit(self, closed: list[Batch]) -> None:
        for batch in closed:
            self.sink.batch_closed(batch)
