"""Which open batch times out next, found without looking at the others.

The ledger used to copy its whole table of open batches on every ``sent`` and ``received``
to find the expired ones: the cost per request grew with the outstanding count (about 25 us
at 10 outstanding, 1.5 ms at 50,000, on a stream channel).

With one timeout and a monotonic clock, batches time out in the order they were sent: a
queue in send order is already ordered by deadline, and the next expiry is at its front.
A batch with another timeout (``method_timeouts``, an HTTP client's read timeout) is
inserted at its place.  A batch whose deadline moves later while queued (an exchange still
receiving, :meth:`Ledger.postpone`) only delays the expiry of those behind it, never
hastens one.  A batch that closes early (complete, evicted, its body ended) stays queued and is
skipped when it reaches the front (lazy deletion); closing pops it at once when it already
is the front, which is the usual case for in-order traffic, so a healthy channel keeps an
empty queue.  The queue is rebuilt from its open batches when closed ones outnumber them,
so its memory stays proportional to what is open (8 bytes per queued batch) and each
rebuild is paid for by the pushes before it.  A clock that steps back only delays the
expiry of the batches sent after the step, by the size of the step.

``examined`` counts the queue entries looked at: the tests assert it stays flat from 10 to
10,000 outstanding batches, which wall time on a shared machine could not show.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from pairwatch.pairing.records import Batch

__all__ = ["Deadlines"]


class Deadlines:
    """Open batches in send (= deadline) order, closed ones dropped lazily."""

    __slots__ = ("_queue", "examined")

    def __init__(self) -> None:
        self._queue: deque[Batch] = deque()
        self.examined = 0

    def __len__(self) -> int:
        return len(self._queue)

    def push(self, batch: Batch, live: int) -> None:
        """Queue an opened batch; ``live`` is how many batches are open, for compaction.

        Per-method timeouts (and an HTTP client's own read timeout) give batches different
        timeouts, so a later batch may be due first: it is inserted in deadline order,
        walking back from the end (no step at all for the usual equal timeouts).
        """
        queue = self._queue
        if len(queue) > 2 * live + 64:
            self._queue = queue = deque(b for b in queue if b.open)
        at = len(queue)
        deadline = batch.sent_at + batch.timeout  # Batch.deadline, without a call
        while at and queue[at - 1].deadline > deadline:
            at -= 1
        if at == len(queue):
            queue.append(batch)
        else:
            queue.insert(at, batch)

    def closed(self) -> None:
        """A batch just closed: drop the closed batches at the front (amortized O(1))."""
        queue = self._queue
        while queue:
            self.examined += 1
            if queue[0].open:
                return
            queue.popleft()

    def due(self, now: float) -> Iterator[Batch]:
        """Open batches whose deadline is not after ``now``, earliest first.

        Removed as they are yielded: the caller closes each one before asking for the next.
        """
        queue = self._queue
        while queue:
            self.examined += 1
            batch = queue[0]
            if batch.open and batch.sent_at + batch.timeout > now:  # not yet its deadline
                return
            queue.popleft()
            if batch.open:
                yield batch

    def oldest(self) -> Batch | None:
        """The open batch with the earliest deadline (the one eviction takes first)."""
        queue = self._queue
        while queue:
            self.examined += 1
            if queue[0].open:
                return queue[0]
            queue.popleft()
        return None

    def clear(self) -> None:
        self._queue.clear()
