"""Which open batch times out next, found without looking at the others.

The ledger used to copy its whole table of open batches on every ``sent`` and ``received``
to find the expired ones: the cost per request grew with the outstanding count (about 25 us
at 10 outstanding, 1.5 ms at 50,000, on a stream channel).  A heap ordered by deadline finds
the next expiry at its top; a batch that closes early (complete, evicted, its body ended)
stays in the heap and is skipped when it surfaces (lazy deletion), so closing never searches
the heap.  The heap is rebuilt from the open batches when dead entries outnumber live ones,
which keeps its memory proportional to what is open and each rebuild paid for by the pushes
before it.

``examined`` counts the entries looked at by :meth:`Deadlines.due` and :meth:`oldest`: the
tests assert it stays flat from 10 to 10,000 outstanding batches, which wall time on a shared
machine could not show.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from pairwatch.pairing.records import Batch

__all__ = ["Deadlines"]


class Deadlines:
    """A min-heap of ``(deadline, seq, batch)`` with lazy deletion of closed batches."""

    __slots__ = ("_heap", "examined")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Batch]] = []
        self.examined = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, batch: Batch, live: int) -> None:
        """Add an opened batch; ``live`` is how many batches are open, for compaction."""
        heap = self._heap
        if len(heap) > 2 * live + 64:
            heap[:] = [e for e in heap if e[2].open]
            heapq.heapify(heap)
        heapq.heappush(heap, (batch.deadline, batch.seq, batch))

    def due(self, now: float) -> Iterator[Batch]:
        """Open batches whose deadline is not after ``now``, earliest first.

        Popped as they are yielded: the caller closes each one before asking for the next.
        """
        heap = self._heap
        while heap:
            self.examined += 1
            deadline, _seq, batch = heap[0]
            if not batch.open:
                heapq.heappop(heap)
                continue
            if deadline > now:
                return
            heapq.heappop(heap)
            yield batch

    def oldest(self) -> Batch | None:
        """The open batch with the earliest deadline (the oldest: one timeout per ledger)."""
        heap = self._heap
        while heap:
            self.examined += 1
            batch = heap[0][2]
            if batch.open:
                return batch
            heapq.heappop(heap)
        return None

    def reset(self, batches: Iterable[Batch]) -> None:
        self._heap = [(b.deadline, b.seq, b) for b in batches if b.open]
        heapq.heapify(self._heap)
