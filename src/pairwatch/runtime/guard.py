"""Keep pairwatch's own failures away from the client, counted and logged once.

Whatever pairwatch, the meter, the tracer or an exporter raises on a client's path is
swallowed, counted under ``pairwatch.internal_errors`` and logged at most once per kind per
minute (:func:`report`); the client then behaves exactly as it would without pairwatch.
Integration glue that calls into pairwatch from a wrapped method (a channel call, a tap, a
hook) goes through :func:`shielded`, the one helper for "run this, and if it fails, report
it and carry on": one place decides what a failure costs, so no integration grows its own
``try/except`` flavour that forgets to count or to log.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Final, TypeVar

logger: Final = logging.getLogger("pairwatch")

_LOG_INTERVAL: Final = 60.0


class RateLimitedLog:
    """Logs the first event of each key, then at most one per interval with a count."""

    def __init__(
        self, interval: float = _LOG_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(
        self,
        level: int,
        key: str,
        message: str,
        *args: object,
        exc_info: BaseException | None = None,
    ) -> bool:
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return False
            self._last[key] = now
            skipped = self._suppressed.pop(key, 0)
        if skipped:
            message += " (%d similar events not logged)"
            args = (*args, skipped)
        logger.log(level, message, *args, exc_info=exc_info)
        return True


log_limited: Final = RateLimitedLog()

ErrorCounter = Callable[[str], None]

T = TypeVar("T")


def shielded(
    kind: str,
    fn: Callable[..., T],
    *args: object,
    count: ErrorCounter | None = None,
    fallback: T | None = None,
) -> T | None:
    """Call ``fn(*args)`` where a failure must not reach the client; return its result, or
    ``fallback`` after reporting the failure under ``kind`` (counted with ``count`` when the
    caller has the channel's counter at hand).

    Channel calls are shielded themselves; this is the second belt, for glue around them
    that fails or a shield that breaks.  ``Exception`` only: a ``KeyboardInterrupt`` or a
    cancellation raised inside is the caller's, and must keep travelling.
    """
    try:
        return fn(*args)
    except Exception as exc:
        report(kind, exc, count)
        return fallback


def report(kind: str, exc: BaseException, count: ErrorCounter | None) -> None:
    """Count and log one internal failure; never raises itself."""
    try:
        if count is not None:
            count(kind)
    except Exception:  # the meter itself may be what is broken
        pass
    with contextlib.suppress(Exception):
        log_limited(
            logging.WARNING,
            "internal:" + kind,
            "pairwatch: internal error in %s, the client is unaffected",
            kind,
            exc_info=exc,
        )
