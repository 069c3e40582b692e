"""The meter provider ``instrument()`` falls back to when it is given none.

``serve_metrics()`` then ``instrument(client)`` is the two-line set-up a user writes first;
without a fallback its page would stay empty, because OpenTelemetry's global provider is a
no-op until the application sets one.  So a running endpoint lends its provider to every
channel that names none, but only while the application has set no SDK provider of its own:
an explicit ``meter_provider=`` and an application's global SDK provider both still win.
"""

from __future__ import annotations

import threading

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider

__all__ = ["lend", "resolve", "take_back"]

_lock = threading.Lock()
_lent: list[MeterProvider] = []  # endpoints' providers, newest last


def lend(provider: MeterProvider) -> None:
    """A ``/metrics`` endpoint started: channels with no provider may record into it."""
    with _lock:
        _lent.append(provider)


def take_back(provider: MeterProvider) -> None:
    """That endpoint closed: its provider is no longer anyone's fallback."""
    with _lock:
        if provider in _lent:
            _lent.remove(provider)


def resolve(explicit: metrics.MeterProvider | None) -> metrics.MeterProvider | None:
    """``explicit`` if given; else the newest open endpoint's provider, unless the
    application set a global SDK provider (then ``None``: the global one is used)."""
    if explicit is not None or not _lent:
        return explicit
    if isinstance(metrics.get_meter_provider(), MeterProvider):
        return None
    return _lent[-1] if _lent else None
