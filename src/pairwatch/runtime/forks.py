"""Fork safety for pairwatch's process-wide objects: no lock is inherited held.

Why: ``fork()`` copies memory, not threads.  A lock that some other thread of the parent
held at that instant stays held for ever in the child, and the child's first batch would
hang on it (gunicorn ``--preload`` and ``multiprocessing`` fork while the parent's threads
run).  The locks pairwatch shares across a process (the shared telemetry cache and each
cached telemetry's label limiters, the rate-limited log, the pending-id budget) are
replaced by fresh ones in the child.  Per-channel books are dropped by
:meth:`pairwatch.channel.Channel.after_fork` (via the sweeper, which knows the channels),
and the deferred queue by :mod:`pairwatch.otel.deferred`.

The budget starts empty in the child: every batch it counted belongs to books the child
drops.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from pairwatch.pairing.limits import process_budget
from pairwatch.runtime import guard

__all__ = ["renew_lock", "renews", "shared_objects"]

_LOCK = type(threading.Lock())
_RLOCK = type(threading.RLock())


def renew_lock(obj: Any, attr: str = "_lock") -> bool:
    """Give ``obj`` a new, unheld lock of the kind it had; False when it has none."""
    lock = getattr(obj, attr, None)
    if isinstance(lock, _RLOCK):
        setattr(obj, attr, threading.RLock())
    elif isinstance(lock, _LOCK):
        setattr(obj, attr, threading.Lock())
    else:
        return False
    return True


_SOURCES: list[Callable[[], Iterable[Any]]] = []


def renews(source: Callable[[], Iterable[Any]]) -> None:
    """Renew, in every forked child, the locks of the objects ``source()`` returns then (a
    module with process-wide objects of its own registers them here)."""
    _SOURCES.append(source)


def shared_objects() -> list[Any]:
    """The process-wide objects whose ``_lock`` a child must not inherit."""
    found: list[Any] = [guard.log_limited, process_budget()]
    for source in _SOURCES:
        found.extend(source())
    return [obj for obj in found if obj is not None]


def _after_fork_in_child() -> None:
    for obj in shared_objects():
        renew_lock(obj)
    process_budget().reset()  # the books that held those ids are dropped in the child


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
