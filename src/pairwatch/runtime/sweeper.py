"""The daemon that times out batches of idle channels, so a hung call still counts.

Split from :mod:`pairwatch.channel`: it knows channels only as things with open batches to
expire, which keeps it free of the channel's imports and the channel module one job.

It is also the registry of the process's long-lived channels, which is what a forked child
needs: after ``fork()`` the child's channels drop the books they inherited (those requests
were sent by the parent, which pairs and counts them), the sweeper's lock is new, and its
thread (which did not survive the fork) starts again.  The process-wide locks and the
pending-id budget are :mod:`pairwatch.runtime.forks`'s job.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Protocol

from pairwatch.runtime import guard

__all__ = ["SWEEPER", "watch"]


class Expirable(Protocol):
    """What the sweeper needs of a channel: whether it has open batches, and a way to
    expire them."""

    @property
    def open_batches(self) -> int: ...

    def expire(self) -> None: ...

    def after_fork(self) -> None: ...


class _Sweeper:
    """Closes timed-out batches of idle stream channels, so a hung call still counts.

    A daemon thread wakes once a second and asks each live channel to expire; channels are
    held weakly so the sweeper never keeps a client alive.
    """

    interval = 1.0

    def __init__(self) -> None:
        self._channels: weakref.WeakSet[Expirable] = weakref.WeakSet()
        self._sources: list[Callable[[], Iterable[Expirable]]] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add_source(self, source: Callable[[], Iterable[Expirable]]) -> None:
        """Also sweep the channels ``source()`` returns at each pass: channels another module
        already keeps a registry of (the HTTP bodies callers hold open), which would
        otherwise be registered here one by one, an exchange at a time."""
        self._sources.append(source)

    def ensure_running(self) -> None:
        """Start the thread if it is not running (for channels a source will return)."""
        if self._thread is None:
            with self._lock:
                self._start()

    def watch(self, channel: Expirable) -> None:
        with self._lock:
            self._channels.add(channel)
            self._start()

    def _start(self) -> None:
        # Under the lock.  The thread never returns (see _run): only a fork, which clears
        # it, ends it.
        if self._thread is None and not sys.is_finalizing():  # none may start at exit
            self._thread = threading.Thread(target=self._run, name="pairwatch-sweeper", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            try:
                self.sweep()
            except Exception as exc:  # a channel's expire is shielded; this is the rest
                guard.report("sweep", exc, None)

    def sweep(self) -> None:
        """One pass: expire the timed-out batches of every watched channel (tests call it
        to stand for the thread's next wake-up, without waiting for it)."""
        for channel in self.channels():
            if channel.open_batches:
                channel.expire()

    def channels(self) -> list[Expirable]:
        """The channels watched now (a snapshot), the sources' included."""
        with self._lock:
            found = list(self._channels)
        for source in self._sources:
            found.extend(source())
        return found

    def before_fork(self) -> None:
        self._lock.acquire()

    def after_fork_in_parent(self) -> None:
        self._lock.release()

    def after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        self._thread = None
        channels = self.channels()
        for channel in channels:
            channel.after_fork()
        if channels:
            self.ensure_running()  # restart the thread: idle channels still time out


SWEEPER = _Sweeper()
"""The process's one sweeper thread (started by the first channel it watches)."""


def watch(channel: Expirable) -> None:
    """Expire ``channel``'s timed-out batches about once a second, while it lives."""
    SWEEPER.watch(channel)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=SWEEPER.before_fork,
        after_in_parent=SWEEPER.after_fork_in_parent,
        after_in_child=SWEEPER.after_fork_in_child,
    )
