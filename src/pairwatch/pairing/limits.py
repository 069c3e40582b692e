"""The caps that keep pairwatch's memory bounded, per channel and for the whole process.

Per channel, :class:`Limits` caps open batches and pending ids.  A process with thousands of
channels (one per HTTP exchange, per websocket, per MCP session) could still hold
``channels x max_pending_ids`` ids, so a :class:`Budget` caps the ids of every open batch
of every channel together.  Whatever a cap evicts closes as missing with reason ``evicted``:
counted, never leaked, never silently dropped.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from typing import Final

__all__ = ["DEFAULT_PENDING_BUDGET", "Budget", "Limits", "process_budget"]

DEFAULT_PENDING_BUDGET: Final = 1 << 20
"""Ids of open batches, all channels together: 1,048,576 (about 100-200 MB at the worst)."""


class Limits:
    """Caps that keep memory bounded; what they evict is counted as missing, never leaked.

    ``late_ids`` and ``late_age`` bound the memory of ids that closed as missing by timeout
    (so that a reply to one reads as late, and a request reusing one as a client duplicate).

    ``method_timeouts`` gives some methods their own timeout (``{"eth_getLogs": 120}``):
    one slow method must not force a long timeout on every call, nor a short default turn
    its legitimately long calls into missing replies.  ``budget``: the process-wide budget
    of pending ids these books draw from (:func:`process_budget` unless given).
    """

    __slots__ = (
        "budget", "late_age", "late_ids", "max_open_batches", "max_pending_ids",
        "method_timeouts", "timeout",
    )  # fmt: skip

    def __init__(
        self,
        timeout: float = 30.0,
        max_open_batches: int = 1024,
        max_pending_ids: int = 65536,
        late_ids: int = 1024,
        late_age: float = 300.0,
        method_timeouts: Mapping[str, float] | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.budget = budget or process_budget()
        self.timeout = timeout
        self.max_open_batches = max_open_batches
        self.max_pending_ids = max_pending_ids
        self.late_ids = late_ids
        self.late_age = late_age
        self.method_timeouts: dict[str, float] = dict(method_timeouts or {})

    def timeout_for(self, methods: Iterable[str | None], base: float | None = None) -> float:
        """The timeout of a batch carrying ``methods``: the longest its requests are allowed.

        ``base`` replaces ``timeout`` for methods without their own (an HTTP exchange passes
        its client's read timeout, ``math.inf`` when the client waits forever).
        """
        timeout = self.timeout if base is None else base
        table = self.method_timeouts
        if table:
            longest = -math.inf
            for method in methods:
                longest = max(longest, table.get(method, timeout) if method else timeout)
            if longest > -math.inf:
                return longest
        return timeout


class Budget:
    """One process-wide limit on something many channels hold at once (pending ids, buffered
    body bytes), shared first come, first served.

    For pending ids (:func:`process_budget`) it is charged per batch (all its tracked ids
    when it opens, released when it closes), not per id: one locked add per batch keeps the
    pairing path free of a process-wide lock, at the price of counting a batch's
    already-paired ids until it closes.  A channel that needs room evicts its *own* oldest
    batches (a channel never reaches into another's books, which would need its lock); when
    it has none left, the ids past the budget are not tracked and close as missing with
    reason ``evicted``, exactly as for one batch larger than ``max_pending_ids``.
    """

    __slots__ = ("_lock", "_used", "limit")

    def __init__(self, limit: int = DEFAULT_PENDING_BUDGET) -> None:
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self._used

    # The lock is taken explicitly, not with ``with``: every exchange charges and releases
    # once, and the statement costs about as much as the arithmetic it guards.
    def take(self, n: int) -> int:
        """Charge up to ``n``; return how much fit (atomically, across threads)."""
        if n <= 0:
            return 0
        lock = self._lock
        lock.acquire()
        try:
            used = self._used
            granted = n if used + n <= self.limit else max(0, self.limit - used)
            self._used = used + granted
        finally:
            lock.release()
        return granted

    def take_all(self, n: int) -> bool:
        """Charge ``n`` if all of it fits; False (and nothing charged) if it does not."""
        lock = self._lock
        lock.acquire()
        try:
            if self._used + n > self.limit:
                return False
            self._used += n
            return True
        finally:
            lock.release()

    def fits(self, n: int) -> bool:
        """Whether ``n`` more would fit now, charging nothing (one read: no lock)."""
        return self._used + n <= self.limit

    def release(self, n: int) -> None:
        if n:
            lock = self._lock
            lock.acquire()
            try:
                used = self._used - n
                self._used = used if used > 0 else 0
            finally:
                lock.release()

    def reset(self) -> None:
        """A forked child starts with a fresh lock and nothing charged: what the parent held
        belongs to books the child drops (and a lock held mid-fork would never be released)."""
        self._lock = threading.Lock()
        self._used = 0


_process_budget = Budget()


def process_budget() -> Budget:
    """The budget every ledger shares unless it is given its own."""
    return _process_budget
