"""Take OpenTelemetry recording off the caller's path, without losing or delaying data.

One SDK call per latency and per child span, made inline, would cost more than the round trip
the caller waits for; so closing a batch only appends it to a queue, and the SDK calls run
later, in bulk, with the same values, attributes and timestamps (spans carry the times the
books recorded).  Who drains the queue, so that readers always see complete data:

* the caller, once :data:`MAX_ITEMS` batches or :data:`MAX_REQUESTS` of their requests are
  queued (the back-pressure that bounds memory: a queued batch holds its ids, methods and
  receive times until it is recorded);
* a daemon thread, when callers have been quiet for :data:`INTERVAL` or the oldest item is
  :data:`MAX_AGE` old, so that a quiet process still exports its spans within a second;
* every metric collection: an observable instrument's callback drains first, so a scrape or
  an export sees every batch closed before it began (the callback itself exports nothing);
* :func:`flush` (``pairwatch.flush()``), and interpreter exit.

One lock is held while an item is recorded: a collection never sees one half-recorded.
After ``fork()`` the child empties its copy of the queue (the parent records those items),
gets new locks, and starts its own drain thread on its first batch.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Final

__all__ = ["MAX_ITEMS", "MAX_REQUESTS", "flush", "on_drained", "submit"]

MAX_ITEMS: Final = 256
"""Queued closed batches beyond which the caller records them itself, in one go."""

MAX_REQUESTS: Final = 4096
"""Requests of the queued batches beyond which the caller records them itself."""

INTERVAL: Final = 0.1
"""Seconds between the drain thread's looks at the queue."""

MAX_AGE: Final = 1.0
"""Seconds after which the drain thread records queued items even if the caller is busy."""

Item = tuple[Any, ...]
"""``(fn, *args)``: one tuple an item (every closed batch waits in one until a drain)."""

_items: deque[Item] = deque()
_lock = threading.RLock()  # re-entrant: a span processor may trigger a collection
_thread: threading.Thread | None = None
_start_lock = threading.Lock()
_last_submit = 0.0
_first_queued = 0.0
_requests = 0  # of the queued items (their weights): back-pressure, not an exact count
_exiting = False  # set by the exit flush: from then on the caller records what it closes
_on_drained: list[Callable[[], Callable[[], None] | None]] = []


def on_drained(callback: Callable[[], None]) -> None:
    """Run ``callback`` (under the drain lock) after each drain recorded its items.

    Telemetry sums a drain's adds per attribute set and applies them here, so a reader that
    drains first (every collection does) still sees everything.  A bound method is held
    weakly: registering must not keep a ``Telemetry`` (and its meter provider's instruments)
    alive after its provider is gone.
    """
    if hasattr(callback, "__self__") and hasattr(callback, "__func__"):
        _on_drained.append(weakref.WeakMethod(callback))
    else:
        _on_drained.append(lambda: callback)


def submit(fn: Callable[..., None], *args: Any, weight: int = 1) -> None:
    """Queue ``fn(*args)``; the function must shield its own errors (telemetry does).
    ``weight``: the requests the item holds (a closed batch's size)."""
    global _last_submit, _first_queued, _requests
    now = time.monotonic()
    if not _items:
        _first_queued = now
    _last_submit = now
    _items.append((fn, *args))
    _requests += weight
    if len(_items) > MAX_ITEMS or _requests > MAX_REQUESTS:
        flush()
    elif _thread is None:
        if _exiting or sys.is_finalizing():
            flush()  # no thread may start now: the interpreter would wait for it forever
        else:
            _start()


def flush() -> None:
    """Record everything queued so far, on this thread; returns when it is recorded."""
    _drain()


def _flush_at_exit() -> None:
    global _exiting
    _exiting = True
    _drain()


def pending() -> int:
    """Items queued and not yet recorded (for tests and the benchmark)."""
    return len(_items)


def _drain() -> None:
    global _requests
    with _lock:
        _requests = 0  # what is queued from here on is recorded by this drain or counted anew
        try:
            while _items:
                try:
                    item = _items.popleft()
                except IndexError:  # another thread took the last one
                    break
                item[0](*item[1:])
        finally:
            dead = False
            for ref in list(_on_drained):
                callback = ref()
                if callback is None:
                    dead = True
                else:
                    callback()
            if dead:
                _on_drained[:] = [ref for ref in _on_drained if ref() is not None]


def _run() -> None:
    while True:
        time.sleep(INTERVAL)
        if not _items:
            continue
        now = time.monotonic()
        # Only when the callers are quiet (or the oldest item is old): a CPU-bound thread
        # taking the GIL while a caller waits on its socket makes the caller wait the
        # interpreter's switch interval after every read (the GIL convoy), which measured
        # 3-4x more expensive than the caller recording the same items itself.
        if now - _last_submit >= INTERVAL or now - _first_queued >= MAX_AGE:
            _drain()


def _before_fork() -> None:
    # Hold the drain lock across fork(): no item is half-recorded in the parent's SDK state
    # that the child copies, and the child's copy of the lock is never held by a thread it
    # does not have.  Released in both processes right after.
    _lock.acquire()


def _after_fork_in_parent() -> None:
    _lock.release()


def _after_fork_in_child() -> None:
    """The child starts with an empty queue, fresh locks and no drain thread.

    What the parent queued belongs to the parent (it records it itself); recording it here
    too would count every batch once per worker.  The drain thread did not survive the fork
    (only the forking thread does); :func:`submit` starts a new one on the child's first
    batch, and then also registers the exit flush with multiprocessing's finalizers (a
    ``multiprocessing`` child ends with ``os._exit``, which skips ``atexit``).
    """
    global _thread, _lock, _start_lock, _last_submit, _first_queued, _requests
    _items.clear()
    _requests = 0
    _thread = None
    _lock = threading.RLock()
    _start_lock = threading.Lock()
    _last_submit = _first_queued = 0.0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )


def _start() -> None:
    global _thread
    with _start_lock:
        if _thread is None:
            # Registered now, after the providers the first batch uses were created, so it
            # runs before their own exit hooks shut them down (atexit is last-in, first-out).
            atexit.register(_flush_at_exit)
            # A multiprocessing child ends with os._exit (no atexit) after running its
            # finalizers; it clears the ones inherited from the parent after the fork, so
            # this runs here, at the child's first batch, not in the fork hook.
            util = sys.modules.get("multiprocessing.util")
            if util is not None:
                util.Finalize(None, flush, exitpriority=10)
            _thread = threading.Thread(target=_run, name="pairwatch-telemetry", daemon=True)
            _thread.start()
