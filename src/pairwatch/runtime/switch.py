"""The process-wide off switch: ``pairwatch.disable()`` and ``pairwatch.enable()``.

Why a module of its own, importing nothing: every wrapper checks it on every call, so the
check must be one attribute read, and both the integrations' patcher and the channel must
reach it without importing each other (or the configuration code that sets it at start-up).

While off, wrappers call the client's original method straight through and the channel
records nothing, so the client pays one flag check per call and no counter moves.  Batches
in flight when the switch flips: one sent while off is not in the books, so its reply is
not looked at either; one sent while on whose reply is read while off still closes (at its
body's or stream's end, close or timeout) and counts the replies it did not see as missing.
Flip the switch between traffic, not in the middle of it, for exact books.
"""

from __future__ import annotations

__all__ = ["disable", "enable", "is_enabled"]

on: bool = True
"""Read directly (``switch.on``) on the hot path; change it only through the functions."""


def disable() -> None:
    """Stop observing: every wrapper passes straight through and nothing is counted."""
    global on
    on = False


def enable() -> None:
    """Resume observing; batches sent from now on are paired and counted."""
    global on
    on = True


def is_enabled() -> bool:
    return on
