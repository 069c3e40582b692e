"""One :class:`~pairwatch.otel.telemetry.Telemetry` per provider pair, forgotten with them.

Every channel of every instrumented client that uses the same providers must share one set
of instruments and one set of caps (a method cap per channel would be no cap).  The cache
is keyed by the providers' identities, so it must not outlive them: an entry kept after
its provider is gone would hold that provider's instruments for nothing, and a new provider
that happened to get the same ``id()`` would be handed instruments that export nowhere.
Entries therefore go when either provider is garbage-collected, and a
cap (:data:`TELEMETRY_CAP`, oldest first) bounds the providers that cannot be weakly referenced.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Final

from pairwatch.otel.telemetry import Telemetry
from pairwatch.runtime import forks

__all__ = ["CACHE", "TELEMETRY_CAP", "TelemetryCache"]

TELEMETRY_CAP: Final = 64
"""Telemetry instances kept at most; only reached by more live provider pairs than that."""

Key = tuple[int, int, int, bool]


class TelemetryCache:
    """Maps (meter provider, tracer provider, method cap, spans) to a shared Telemetry.

    ``get`` takes the builder per call, so the caller keeps its own fallbacks (the channel
    falls back to no-op providers when the user's raise) and this module stays unaware of
    channel options.
    """

    def __init__(self, cap: int = TELEMETRY_CAP) -> None:
        self.cap = cap
        self._entries: OrderedDict[Key, Telemetry] = OrderedDict()
        self._lock = threading.Lock()
        # Keys whose provider was collected.  The finalizer only appends here: it runs at
        # garbage-collection time, possibly in a thread that holds ``_lock`` inside ``get``
        # (``build`` allocates), so taking the lock there would deadlock.
        self._dead: list[Key] = []

    def get(
        self,
        meter_provider: object,
        tracer_provider: object,
        method_cap: int,
        spans: bool,
        build: Callable[[], Telemetry],
    ) -> Telemetry:
        key = (id(meter_provider), id(tracer_provider), method_cap, spans)
        if self._dead:  # before any lookup: a new provider may reuse a dead one's id()
            self._purge()
        found = self._entries.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                return found
            found = build()
            self._entries[key] = found
            for provider in (meter_provider, tracer_provider):
                if provider is not None:
                    # Not weakly referenceable: the cap bounds it.
                    with contextlib.suppress(TypeError):
                        weakref.finalize(provider, self._forget, key)
            while len(self._entries) > self.cap:
                self._entries.popitem(last=False)
            return found

    def _forget(self, key: Key) -> None:
        self._dead.append(key)

    def _purge(self) -> None:
        with self._lock:
            while self._dead:
                self._entries.pop(self._dead.pop(), None)

    def entries(self) -> list[Telemetry]:
        """The cached instances, for :mod:`pairwatch.runtime.forks` (their limiters' locks)."""
        return list(self._entries.values())

    def __len__(self) -> int:
        if self._dead:
            self._purge()
        return len(self._entries)


CACHE: Final = TelemetryCache()
"""The process's one cache."""


def _locked() -> Iterable[object]:
    """What a forked child must not inherit held: the cache's lock and each telemetry's
    limiters' and label sets'."""
    yield CACHE
    for telemetry in CACHE.entries():
        yield from (telemetry.methods, telemetry.addresses, telemetry.label_sets)


forks.renews(_locked)
