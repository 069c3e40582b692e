"""The open batches of one channel, in the order they were sent, and how many there are.

This used to be a dict keyed by a per-batch sequence number.  A stream channel may hold a
hundred thousand single requests pending, and for each the dict slot and the sequence
number cost about 80 bytes, a sixth of what the request's books held.  Nothing needs to find
one batch here by key: the ledger counts them, walks them in send order (stream end,
withdrawal, a postponed deadline, the oldest batch sent as an array) and drops each as it
closes.  A queue does that for 8 bytes a batch.

Closed batches leave lazily, as in :mod:`pairwatch.pairing.deadlines`: at once when they are
at the front (in-order traffic, the usual case), otherwise when the queue is compacted,
which happens once closed entries outnumber open ones, so its memory stays proportional to
what is open and each compaction is paid for by the appends before it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from pairwatch.pairing.records import Batch

__all__ = ["OpenBatches"]


class OpenBatches:
    """Open batches in send order; ``count`` is exact, closed entries are dropped lazily.

    The ledger owns membership: :meth:`add` when it registers a batch, :meth:`closed` once
    for each of those when it sets ``batch.open`` to False.  It reads ``count`` (an
    attribute) rather than ``len()`` on its hot paths: a ``__len__`` written in Python is a
    call.
    """

    __slots__ = ("_queue", "count")

    def __init__(self) -> None:
        self._queue: deque[Batch] = deque()
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Batch]:
        """The open batches, oldest first; nothing may open or close one meanwhile."""
        for batch in self._queue:
            if batch.open:
                yield batch

    def values(self) -> list[Batch]:
        """The open batches, oldest first, as a list (safe to close them while walking it)."""
        return [batch for batch in self._queue if batch.open]

    def add(self, batch: Batch) -> None:
        queue = self._queue
        if len(queue) > 2 * self.count + 64:
            self._queue = queue = deque(b for b in queue if b.open)
        queue.append(batch)
        self.count += 1

    def closed(self) -> None:
        """One of the added batches just closed: drop closed entries at the front."""
        self.count -= 1
        queue = self._queue
        while queue and not queue[0].open:
            queue.popleft()

    def forget(self) -> None:
        """Mark every open batch closed, uncounted, and empty the queue (a forked child's
        inherited books: a batch of them handed back later must not count here)."""
        for batch in self._queue:
            batch.open = False
        self.clear()

    def clear(self) -> None:
        self._queue.clear()
        self.count = 0
