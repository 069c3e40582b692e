"""The ids that closed as missing by timeout, remembered for a while, bounded.

A reply to such an id is still an unknown-id response (the pairing contract does not change:
nothing was pending), but it is evidence of something else than a server inventing ids: the
server answered after the client's timeout.  Remembering the ids lets the ledger say so, with
how late, and lets it recognise a client that re-sends an id it just gave up on, which would
make that late reply answer the new request (client duplicate evidence).

Bounded twice, so a server that never answers cannot grow it: at most ``capacity`` ids (the
oldest forgotten first) and none older than ``max_age`` seconds.  Each id is forgotten once
used: a second late reply for it is an ordinary unknown id.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Iterable

from pairwatch.pairing.records import Batch
from pairwatch.pairing.wire import IdKey

__all__ = ["TimedOut"]


class TimedOut:
    """id -> (the timeout moment, the batch that held it, weakly); insertion = time order.

    The batch is held weakly so that remembering an id never keeps a closed batch and its
    lists alive; a late reply whose batch is gone is attributed to no batch.
    """

    __slots__ = ("_ids", "capacity", "max_age")

    def __init__(self, capacity: int = 1024, max_age: float = 300.0) -> None:
        self.capacity = capacity
        self.max_age = max_age
        self._ids: OrderedDict[IdKey, tuple[float, weakref.ReferenceType[Batch]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._ids)

    def __bool__(self) -> bool:
        return bool(self._ids)

    def remember(self, batch: Batch, keys: Iterable[IdKey], now: float) -> None:
        """Remember the ids ``batch`` left missing when it timed out.

        The moment is its deadline, or ``now`` when a client library's own, shorter timeout
        closed it first: lateness is then counted from when the caller gave up.
        """
        if self.capacity <= 0:
            return
        ids = self._ids
        ref = weakref.ref(batch)
        entry = (min(batch.deadline, now), ref)
        for key in keys:
            if key in ids:
                ids.move_to_end(key)
            ids[key] = entry
        while len(ids) > self.capacity:
            ids.popitem(last=False)
        self._prune(now)

    def take(self, key: IdKey, now: float) -> tuple[float, Batch | None] | None:
        """Forget ``key`` and return (seconds after its timeout, its batch) if remembered."""
        ids = self._ids
        if not ids:
            return None
        entry = ids.pop(key, None)
        if entry is None:
            return None
        timed_out, ref = entry
        if now - timed_out > self.max_age:
            self._prune(now)
            return None
        return max(0.0, now - timed_out), ref()

    def reused(self, keys: list[IdKey | None], now: float) -> int:
        """Forget and count the ``keys`` the client sends again (the request now pends)."""
        ids = self._ids
        if not ids or ids.keys().isdisjoint(keys):
            return 0  # the common case, in C
        found = 0
        limit = now - self.max_age
        for key in keys:
            entry = ids.pop(key, None) if key is not None else None
            if entry is not None and entry[0] >= limit:
                found += 1
        return found

    def _prune(self, now: float) -> None:
        ids = self._ids
        limit = now - self.max_age
        while ids:
            first = next(iter(ids.values()))
            if first[0] >= limit:
                return
            ids.popitem(last=False)
