"""A body tap built only when the body needs one: a reply read whole goes straight to the
exchange's books.

Why: aiohttp hands the body to whoever reads ``response.content``, so pairwatch puts its tee
there when the headers arrive, before anyone reads.  Nearly every body is then read in one
piece (``json()``, ``read()``, ``text()``): the tee's first read returns the whole body at
its end, and :meth:`~pairwatch.integrations._kit.request.Exchange.whole` judges it as a
buffered client's body is judged.  A :class:`~pairwatch.integrations._kit.stream.Tap` is
needed only when something else happens: a read of part of the body, a body cut short, a
response released unread, or a sweeper pass that finds the body still held open.
:class:`TapOnNeed` stands in for the tap until then and hands every such event to the tap it
builds.

Two threads may reach it: the caller's (its reads) and the sweeper's (its passes over held
open bodies).  Whichever first takes the one token decides: the caller's whole read claims
the reply for the exchange, or a builder (under a lock, so two builders build one tap) builds
the tap.  Taking the token is a single ``list.pop``, atomic in the interpreter, so the plain
path takes no lock; the reply itself is judged outside everything.
"""

from __future__ import annotations

import weakref
from typing import Any, Final

from pairwatch.channel import Channel
from pairwatch.integrations._kit.request import Exchange
from pairwatch.integrations._kit.stream import Tap
from pairwatch.integrations._kit.watch import WATCHED, register, unwatch, watch_later
from pairwatch.runtime import guard

try:  # the lock threading.RLock() returns, without that function's own Python call
    from _thread import RLock
except ImportError:  # pragma: no cover - an interpreter without the C lock
    from threading import RLock

__all__ = ["TapOnNeed"]

_WAIT: Final = 5.0
"""Seconds a read waits for another thread to finish building the tap.  Only a lock a fork
left held (its holder is not in the child) waits that long; the read then goes unobserved
rather than hang."""


class TapOnNeed:
    """Stands in for the :class:`Tap` of one exchange whose body may be read whole.

    Only for the body the caller gets undecoded by pairwatch (no ``Content-Encoding`` left
    to undo), of a Content-Type that is not an event stream, on a response that
    does not say the request is answered elsewhere: everything else gets its tap at once.
    """

    __slots__ = (
        "_content_type", "_done", "_drop", "_exchange", "_lock", "_tap", "_token", "_watch",
    )  # fmt: skip

    def __init__(self, exchange: Exchange, content_type: str | None) -> None:
        self._exchange = exchange
        self._content_type = content_type
        self._tap: Tap | None = None
        self._token = [True]  # popped once: by the whole read, or by the tap's builder
        self._done = False  # the whole read took the token: no tap, ever
        # Re-entrant: a collection during a build may run the response's callback (dropped)
        # on the building thread itself.
        self._lock = RLock()
        self._watch: weakref.ref[Any] | None = None
        self._drop: str | None = None  # a drop that came while this thread built the tap

    @property
    def done(self) -> bool:
        tap = self._tap
        return self._done if tap is None else tap.done

    def abandon_with(self, owner: object) -> None:
        """:meth:`Tap.abandon_with`; the tap, once built, takes the watch over.  The watch
        is kept here before the sweeper can see it: a pass that builds the tap right away
        hands the tap this watch.  Called last, once the tee is on the response: an attach
        that fails before leaves nothing watching, to drop its batch a second time."""
        try:
            self._watch = watch = watch_later(owner, self)
            register(watch)
        except Exception as exc:
            tap = self._built()
            if tap is not None:
                tap.fail("tap_watch", exc)

    def last_raw_chunk(self, data: bytes | bytearray | memoryview) -> None:
        """The read that ends the body: the whole body, unless a tap already holds a part.

        Taking the token here (a single ``list.pop``, see the module docstring)
        gives the whole body to the exchange, and no tap is ever built."""
        try:
            self._token.pop()
        except IndexError:  # a builder took it: the tap has the body
            tap = self._built()
            if tap is not None:
                tap.last_raw_chunk(data)
            return
        self._done = True
        watch = self._watch
        if watch is not None:
            self._watch = None
            unwatch(watch)
        self._exchange.whole(bytes(data), self._content_type, False)

    def raw_chunk(self, data: bytes | bytearray | memoryview) -> None:
        tap = self._built()
        if tap is not None:
            tap.raw_chunk(data)

    def end(self) -> None:
        tap = self._built()
        if tap is not None:
            tap.end()

    def dropped(self, reason: str = "stream_dropped") -> None:
        tap = self._built()
        if tap is not None:
            tap.dropped(reason)
        elif not self._done:  # this very thread is building the tap: it drops it when built
            self._drop = reason

    def held_channel(self) -> Channel | None:
        """For the sweeper: the body is still held open, so its tap is built now.  Skipped
        for this pass while another thread builds it."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            tap = self._build()
        finally:
            self._lock.release()
        return None if tap is None else tap.held_channel()

    def _built(self) -> Tap | None:
        """The tap, built now if it is not yet; None once the whole read claimed the body."""
        tap = self._tap
        if tap is not None or self._done:
            return tap
        lock = self._lock
        if not lock.acquire(timeout=_WAIT):
            return None
        try:
            return self._build()
        finally:
            lock.release()

    def _build(self) -> Tap | None:
        """Under the lock: the tap, built if this call takes the token (as
        :meth:`Exchange.tap` gives it, holding the watch); None if the whole read took it."""
        try:
            self._token.pop()
        except IndexError:
            return self._tap
        try:
            tap = self._exchange.tap(self._content_type, None)
        except Exception as exc:
            self._failed(exc)
            return None
        watch = self._watch
        if watch is not None:
            self._watch = None
            tap.adopt_watch(watch)
        self._tap = tap
        if self._drop is not None:
            tap.dropped(self._drop)
        return tap

    def _failed(self, exc: BaseException) -> None:
        """Under the lock: building the tap failed.  As a failed attach: reported, and the
        exchange closed; what the caller reads from here on goes unobserved."""
        self._done = True
        watch = self._watch
        if watch is not None:
            self._watch = None
            WATCHED.pop(id(watch), None)
        guard.report("tap_build", exc, None)
        self._exchange.close("closed")
