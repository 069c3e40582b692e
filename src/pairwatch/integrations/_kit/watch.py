"""The responses callers hold open: a weak watch on each, and the sweeper's view of them.

Why a watch: a caller may drop a response (or hold it for ever) without reading its body to
the end, and nothing would then close its exchange.  A weak reference to the response, with a
callback, closes it as ``stream_dropped`` when the response is collected; and while the body
is held open the sweeper expires its channel's timed-out batch, so a hung read still counts.

Split from :mod:`pairwatch.integrations._kit.stream` so that the tap and the stand-in that builds
one on need (:mod:`pairwatch.integrations._kit.tap_on_need`) share one registry.
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol

from pairwatch.channel import Channel
from pairwatch.runtime import guard
from pairwatch.runtime.sweeper import SWEEPER

__all__ = ["WATCHED", "Watched", "adopt", "register", "unwatch", "watch_later"]


class Watched(Protocol):
    """What watches a caller's response: a :class:`Tap`, or a stand-in that builds one."""

    def dropped(self, reason: str = ...) -> None: ...

    def held_channel(self) -> Channel | None: ...


def watch_later(owner: object, tap: Watched) -> weakref.ref[Any]:
    """A watch that drops ``tap``'s exchange as ``stream_dropped`` if ``owner`` (the
    caller's response) is collected before its body ended.  Nothing sees it until
    :func:`register`, so its holder can keep it before a sweeper pass may look.

    A plain weak reference with a callback, kept alive by ``WATCHED`` until the body ends:
    a third of the cost of ``weakref.finalize``, paid on every aiohttp exchange.
    """
    return weakref.ref(owner, _Abandoned(tap))


def register(watch: weakref.ref[Any]) -> None:
    """Let the sweeper apply the timeout while the body is held open; :func:`unwatch`
    ends the watch."""
    WATCHED[id(watch)] = watch
    SWEEPER.ensure_running()  # it sweeps the channels of WATCHED (see _held_open)


def unwatch(watch: weakref.ref[Any]) -> None:
    """The body ended: its response is watched no more."""
    WATCHED.pop(id(watch), None)


def adopt(watch: weakref.ref[Any], tap: Watched) -> None:
    """Hand a watch over to ``tap``: the stand-in that set it up has built the real tap."""
    callback = watch.__callback__
    if isinstance(callback, _Abandoned):
        callback.tap = tap


WATCHED: dict[int, weakref.ref[Any]] = {}
"""The weak references watching callers' responses (see :func:`watch_later`): held here
so that each outlives its tap and its callback runs when the response goes."""


def _held_open() -> list[Channel]:
    """The channels of the bodies callers hold open, for the sweeper's passes: their
    timeouts still apply while nobody reads."""
    found: list[Channel] = []
    for ref in list(WATCHED.values()):
        callback = ref.__callback__
        if isinstance(callback, _Abandoned):
            channel = callback.tap.held_channel()
            if channel is not None:
                found.append(channel)
    return found


class _Abandoned:
    """The callback of a watched response: its body never ended, the exchange is dropped."""

    __slots__ = ("tap",)

    def __init__(self, tap: Watched) -> None:
        self.tap = tap

    def __call__(self, ref: weakref.ref[Any]) -> None:
        WATCHED.pop(id(ref), None)
        guard.shielded("abandoned", self.tap.dropped, "stream_dropped")


SWEEPER.add_source(_held_open)
