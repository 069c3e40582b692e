"""The open batches of one channel, earliest deadline first, found without a scan.

With one timeout and a monotonic clock, batches time out in the order they were sent, so a
queue in send order is already a deadline queue and the next expiry is at its front; a batch
with another timeout (``method_timeouts``, an HTTP client's read timeout) is inserted at its
place.  A deadline that moves later while queued (:meth:`Ledger.postpone`) only delays the
expiry of those behind it, never hastens one.  Closed batches leave lazily: at once when at
the front (in-order traffic), otherwise when closed entries outnumber open ones and the
queue is compacted, so its memory stays proportional to what is open.

``examined`` counts the entries looked at: the tests assert it stays flat from 10 to 10,000
outstanding batches, which wall time on a shared machine could not show.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from operator import attrgetter

from pairwatch.pairing.records import Batch

__all__ = ["OpenBatches"]

_SENT_AT = attrgetter("sent_at")


class OpenBatches:
    """Open batches by deadline; ``count`` is exact (an attribute: the hot paths read it)."""

    __slots__ = ("_queue", "count", "examined")

    def __init__(self) -> None:
        self._queue: deque[Batch] = deque()
        self.count = 0
        self.examined = 0

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[Batch]:
        """The open batches, earliest deadline first; none may open or close meanwhile."""
        for batch in self._queue:
            if batch.open:
                yield batch

    def values(self) -> list[Batch]:
        """The open batches in the order they were sent, as a list (safe to close them
        while walking it)."""
        found = [batch for batch in self._queue if batch.open]
        if len(found) > 1:
            found.sort(key=_SENT_AT)  # stable: equal send times keep their queue order
        return found

    def oldest_array(self) -> Batch | None:
        """The open batch sent as an array before every other one (rarely asked)."""
        arrays = [batch for batch in self._queue if batch.open and batch.is_batch]
        return min(arrays, key=_SENT_AT) if arrays else None

    def push(self, batch: Batch) -> None:
        """Queue an opened batch at its deadline's place (walking back from the end: no step
        at all for the usual equal timeouts)."""
        queue = self._queue
        self.count += 1
        if len(queue) > 2 * self.count + 64:
            self._queue = queue = deque(b for b in queue if b.open)
        at = len(queue)
        deadline = batch.deadline
        while at and queue[at - 1].deadline > deadline:
            at -= 1
        if at == len(queue):
            queue.append(batch)
        else:
            queue.insert(at, batch)

    def postpone(self, deadline: float) -> None:
        """Move every open batch's deadline to ``deadline``, never earlier."""
        for batch in self._queue:
            if batch.open:
                batch.postpone(deadline)

    def closed(self) -> None:
        """One of the pushed batches just closed: drop closed entries at the front."""
        self.count -= 1
        queue = self._queue
        while queue:
            self.examined += 1
            if queue[0].open:
                return
            queue.popleft()

    def due(self, now: float) -> Iterator[Batch]:
        """Open batches whose deadline is not after ``now``, earliest first; the caller
        closes each one before asking for the next."""
        queue = self._queue
        while queue:
            self.examined += 1
            batch = queue[0]
            if batch.open and batch.deadline > now:  # not yet its deadline
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

    def forget(self) -> None:
        """Mark every open batch closed, uncounted, and empty the queue (a forked child's
        inherited books: a batch of them handed back later must not count here)."""
        for batch in self._queue:
            batch.open = False
        self.clear()

    def clear(self) -> None:
        self._queue.clear()
        self.count = 0
