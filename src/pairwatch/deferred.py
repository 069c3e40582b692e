"""Take OpenTelemetry recording off the caller's path, without ever losing or delaying data.

Why: one OpenTelemetry SDK call costs 7 to 15 µs (a ``Histogram.record`` about 9 µs, a span
11 to 15 µs), and a closed 100-request batch needs about 100 of them (one latency per paired
id, one child span per id).  Made inline, that is more than the whole loopback round trip the
caller is waiting for.  So closing a batch only appends one item to a queue (well under a
microsecond); the SDK calls run later, with exactly the same values, attributes and
timestamps (spans carry the times the ledger recorded, not the time they are made).

Who drains the queue, so that readers always see complete data:

* a daemon thread, every few milliseconds, yielding the GIL between items so that the
  caller's thread gets it back as soon as its socket read returns;
* every metric collection: :class:`Telemetry` registers an observable instrument whose
  callback drains the queue first (the SDK runs callbacks before it reads the aggregations),
  so a scrape, a periodic export or an ``InMemoryMetricReader`` sees every batch closed
  before the collection started.  The callback observes nothing, so it exports nothing;
* the caller itself, when the queue is longer than :data:`MAX_ITEMS` (the process produces
  faster than the thread drains): memory stays bounded and nothing is dropped;
* :func:`flush` (public as ``pairwatch.flush()``): for spans, which have no collection
  hook, in tests and before a process hands its exporters a final flush.  It is also run
  at interpreter exit.

One lock is held while an item is recorded, so a collection that arrives mid-item waits
for it: nothing is half-recorded when a reader looks.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

__all__ = ["MAX_ITEMS", "flush", "pause", "submit"]

MAX_ITEMS: Final = 1024
"""Queued closed batches beyond which the caller records inline (back-pressure)."""

INTERVAL: Final = 0.005
"""Seconds the drain thread sleeps when the queue is empty."""

Item = tuple[Callable[..., None], tuple[Any, ...]]

_items: deque[Item] = deque()
_lock = threading.RLock()  # re-entrant: a span processor may trigger a collection
_thread: threading.Thread | None = None
_start_lock = threading.Lock()


def submit(fn: Callable[..., None], *args: Any) -> None:
    """Queue ``fn(*args)``; the function must shield its own errors (telemetry does)."""
    _items.append((fn, args))
    if len(_items) > MAX_ITEMS:
        flush()
    elif _thread is None:
        _start()


def flush() -> None:
    """Record everything queued so far, on this thread; returns when it is recorded."""
    _drain(pause=False)


def pending() -> int:
    """Items queued and not yet recorded (for tests and the benchmark)."""
    return len(_items)


def pause() -> None:
    """Give the GIL away for a moment when called on the drain thread (a no-op elsewhere).

    Long items (a batch of 1000 ids is about 9 ms of SDK calls) call this every few SDK
    calls: a caller whose socket read just returned then waits microseconds for the GIL,
    not the interpreter's 5 ms switch interval.
    """
    if _thread is not None and threading.get_ident() == _thread.ident:
        time.sleep(0)


def _drain(pause: bool) -> None:
    with _lock:
        while _items:
            try:
                fn, args = _items.popleft()
            except IndexError:  # another thread took the last one
                return
            fn(*args)
            if pause:
                time.sleep(0)  # hand the GIL to a waiting caller between items


def _run() -> None:
    while True:
        if _items:
            _drain(pause=True)
        time.sleep(INTERVAL)


def _after_fork() -> None:
    # The child has no drain thread (only the forking thread survives) and must not inherit
    # a lock some other thread held at fork time.
    global _thread, _lock, _start_lock
    _thread = None
    _lock = threading.RLock()
    _start_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _start() -> None:
    global _thread
    with _start_lock:
        if _thread is None:
            # Registered now, after the providers the first batch uses were created, so it
            # runs before their own exit hooks shut them down (atexit is last-in, first-out).
            atexit.register(flush)
            _thread = threading.Thread(target=_run, name="pairwatch-telemetry", daemon=True)
            _thread.start()
