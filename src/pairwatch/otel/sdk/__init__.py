"""The one door to OpenTelemetry's private internals: every private name pairwatch touches.

pairwatch records in bulk (a batch's latencies under one attribute set, its child spans
built finished, a ratio sampler's drops), and the public API has no way to say that, so a
few shortcuts reach past it.  Each is in this package and nowhere else, and each can be
turned off without changing a single exported value:

* ``context``: the current context read from the API's own context variable;
* ``histograms``: runs of equal latencies applied to the explicit-bucket aggregation;
* ``child_spans``: a batch's children built finished and handed to the span processors;
* ``batch_spans``: the batch span decided by the sampler and handed over finished;
* ``sampler_drops``: the SDK samplers' drop decisions made without asking them.

Each shortcut checks itself once per process, the first time it is wanted: it does the same
small job both ways on a scratch pipeline of its own (a provider with an in-memory reader or
exporter) and compares what comes out.  One that differs, or raises, stays off, with one log
line, and the public API does its work.  All of them are off under a free-threaded
interpreter (they assume the GIL) and with ``PAIRWATCH_SDK_SHORTCUTS=false``.  What is on,
and why, is :func:`status` (``pairwatch sdk`` prints it).
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
from importlib.metadata import version
from typing import Final

from pairwatch import config

__all__ = ["SHORTCUTS", "TESTED", "fell_back", "on", "sdk_version", "status"]

TESTED: Final = ("1.30.0", "1.45.2")
"""The opentelemetry-sdk versions every shortcut is tested on (``scripts/test_sdk_range.sh``):
the oldest ``pyproject.toml`` allows and the newest checked.  There, a shortcut that turns
itself off fails the range job; on a newer release it only warns, and the public API takes
over at run time."""

SHORTCUTS: Final = {
    "context": "the current context, read from the API's context variable",
    "histograms": "equal latencies applied to the histogram aggregation in runs",
    "child_spans": "a batch's child spans built finished, handed to the span processors",
    "batch_spans": "the batch span decided by the sampler, handed over finished",
    "sampler_drops": "the SDK samplers' drops decided without asking them",
}

_MODULES: Final = {
    "context": "context",
    "histograms": "histograms",
    "child_spans": "spans",
    "batch_spans": "spans",
    "sampler_drops": "sampling",
}
_log = logging.getLogger("pairwatch")
_SWITCHED_OFF: Final = "off: PAIRWATCH_SDK_SHORTCUTS is false"
_NO_GIL: Final = "off: a free-threaded interpreter (the shortcuts assume the GIL)"


def gil_enabled() -> bool:
    """False under a free-threaded interpreter with the GIL off (the shortcuts assume it)."""
    probe = getattr(sys, "_is_gil_enabled", None)
    return True if probe is None else bool(probe())


@functools.cache
def verdict(name: str) -> tuple[bool, str]:
    """Whether shortcut ``name`` is on in this process, and why; decided once."""
    if not config.sdk_shortcuts():
        return False, _SWITCHED_OFF
    if not gil_enabled():
        return False, _NO_GIL
    try:
        module = importlib.import_module(f"pairwatch.otel.sdk.{_MODULES[name]}")
        difference: str | None = module.check(name)
    except Exception as exc:
        difference = f"its check raised {exc!r}"
    if difference is not None:
        _log.warning(
            "pairwatch: SDK shortcut %s is off on opentelemetry-sdk %s (%s); the public "
            "API does its work",
            name,
            sdk_version(),
            difference,
        )
        return False, "off: " + difference
    return True, "on"


def on(name: str) -> bool:
    """Whether shortcut ``name`` may be taken (checked the first time it is asked)."""
    return verdict(name)[0]


def fell_back(name: str) -> bool:
    """Off because its check found a difference (not because it was switched off)."""
    on, why = verdict(name)
    return not on and why not in (_SWITCHED_OFF, _NO_GIL)


def status() -> dict[str, tuple[bool, str]]:
    """Every shortcut: on or off, and why (each checked now if it was not yet)."""
    return {name: verdict(name) for name in SHORTCUTS}


def sdk_version() -> str:
    try:
        return version("opentelemetry-sdk")
    except Exception:
        return "unknown"
