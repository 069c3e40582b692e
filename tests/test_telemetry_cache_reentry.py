"""The shared telemetry cache survives a garbage collection inside its own locked section.

Building a Telemetry allocates; a collection there can finalize a dead provider whose
entry the cache then forgets, on the same thread, taking the same lock.  With a plain lock
that thread waited on itself for ever (seen in the full suite: a 120 s pytest-timeout
inside ``_forget``).  Run on a thread with a deadline, so a regression fails, not hangs.
"""

from __future__ import annotations

import gc
import threading

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from pairwatch.otel.shared import TelemetryCache
from pairwatch.otel.telemetry import Telemetry


class Provider:
    """A provider only this test holds (SDK providers are kept alive by their exit hook)."""


def test_a_provider_finalized_while_another_is_built_is_forgotten():
    cache = TelemetryCache()
    tracer = TracerProvider(shutdown_on_exit=False)
    kept = MeterProvider(shutdown_on_exit=False)
    doomed: list[Provider] = [Provider()]
    cache.get(doomed[0], tracer, 32, True, lambda: Telemetry(kept, tracer))
    assert len(cache) == 1

    def build() -> Telemetry:
        doomed.clear()  # the last reference: its finalizer runs now, under the cache's lock
        gc.collect()
        return Telemetry(kept, tracer)

    done = threading.Event()

    def run() -> None:
        cache.get(kept, tracer, 32, False, build)
        done.set()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    assert done.wait(20), "the cache's lock was taken twice by one thread"
    assert len(cache) == 1  # the dead provider's entry went, the new one stayed
