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
from collections.abc import Callable
from typing import Final

from pairwatch.otel.telemetry import Telemetry

__all__ = ["TELEMETRY_CAP", "TelemetryCache"]

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
        # Re-entrant: building instruments allocates, an allocation can run the garbage
        # collector, and a collected provider's finalizer calls _forget on this very thread
        # while get() holds the lock (a plain Lock deadlocked the test run on it).
        self._lock = threading.RLock()

    def get(
        self,
        meter_provider: object,
        tracer_provider: object,
        method_cap: int,
        spans: bool,
        build: Callable[[], Telemetry],
    ) -> Telemetry:
        key = (id(meter_provider), id(tracer_provider), method_cap, spans)
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
        with self._lock:
            self._entries.pop(key, None)

    def __len__(self) -> int:
        return len(self._entries)
