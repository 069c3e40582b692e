"""Settings from the environment: ``PAIRWATCH_*`` and the OpenTelemetry variables that apply.

Why the environment at all: under ``opentelemetry-instrument`` (or a container image shared
by many services) nobody writes the call to ``instrument``, so the only place to set a
timeout or switch spans off is the process environment.  The same variables are read by the
one-liner ``pairwatch.instrument`` so a setting means the same thing on both paths.

Precedence, lowest first: :class:`pairwatch.Options` defaults, then the environment, then
the keyword arguments the program passes (code is closer to the intent than the deployment).

A bad value (``PAIRWATCH_TIMEOUT=soon``) is logged once per variable and value and ignored:
a typo in a deployment must never take the application down, and must not fill its log.

=====================================  ==========================================
variable                               meaning
=====================================  ==========================================
``PAIRWATCH_TIMEOUT``                  seconds, > 0
``PAIRWATCH_SPANS``                    boolean
``PAIRWATCH_MAX_OPEN_BATCHES``         integer >= 1
``PAIRWATCH_MAX_PENDING_IDS``          integer >= 1
``PAIRWATCH_METHOD_CAP``               integer >= 1
``PAIRWATCH_LATE_IDS``                 integer >= 0
``PAIRWATCH_LATE_AGE``                 seconds, >= 0
``PAIRWATCH_REPAIR``                   boolean
``PAIRWATCH_CAPTURE_PAYLOADS``         boolean
``PAIRWATCH_PROPAGATE``                boolean; ``true`` adds ``traceparent`` to HTTP requests
``PAIRWATCH_MAX_PAYLOAD_BYTES``        integer >= 0
``PAIRWATCH_ENABLED``                  boolean; ``false`` starts with the switch off
``PAIRWATCH_SDK_SHORTCUTS``            boolean; ``false``: the public OpenTelemetry API only
``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``  contains ``pairwatch`` (or ``*``): install nothing
``OTEL_SDK_DISABLED``                  ``true``: start with the switch off (nothing can export)
=====================================  ==========================================

Booleans accept ``1/0``, ``true/false``, ``yes/no``, ``on/off`` in any case.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = [
    "ENV_FIELDS", "from_env", "instrumentation_disabled", "sdk_shortcuts", "starts_disabled",
]  # fmt: skip

_log = logging.getLogger("pairwatch")

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})


def _bool(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError("not a boolean (true/false, 1/0, yes/no, on/off)")


def _number(low: float, *, above: bool, integer: bool) -> Callable[[str], float | int]:
    def parse(text: str) -> float | int:
        value: float | int = int(text.strip()) if integer else float(text.strip())
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("not a finite number")
        if value < low or (above and value == low):
            raise ValueError(f"must be {'>' if above else '>='} {low:g}")
        return value

    return parse


ENV_FIELDS: Final[Mapping[str, tuple[str, Callable[[str], Any]]]] = {
    "PAIRWATCH_TIMEOUT": ("timeout", _number(0, above=True, integer=False)),
    "PAIRWATCH_SPANS": ("spans", _bool),
    "PAIRWATCH_MAX_OPEN_BATCHES": ("max_open_batches", _number(1, above=False, integer=True)),
    "PAIRWATCH_MAX_PENDING_IDS": ("max_pending_ids", _number(1, above=False, integer=True)),
    "PAIRWATCH_METHOD_CAP": ("method_cap", _number(1, above=False, integer=True)),
    "PAIRWATCH_LATE_IDS": ("late_ids", _number(0, above=False, integer=True)),
    "PAIRWATCH_LATE_AGE": ("late_age", _number(0, above=False, integer=False)),
    "PAIRWATCH_REPAIR": ("repair", _bool),
    "PAIRWATCH_CAPTURE_PAYLOADS": ("capture_payloads", _bool),
    "PAIRWATCH_PROPAGATE": ("propagate", _bool),
    "PAIRWATCH_MAX_PAYLOAD_BYTES": ("max_payload_bytes", _number(0, above=False, integer=True)),
}
"""Variable -> (``Options`` field, parser).  Callables and providers have no text form."""

_warned: set[tuple[str, str]] = set()


def _bad(name: str, text: str, why: object) -> None:
    if (name, text) in _warned:
        return
    _warned.add((name, text))
    _log.warning("pairwatch: ignoring %s=%r: %s", name, text, why)


def from_env(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``Options`` fields the environment sets, parsed; bad or empty values left out."""
    env = os.environ if environ is None else environ
    found: dict[str, Any] = {}
    for name, (field, parse) in ENV_FIELDS.items():
        text = env.get(name)
        if text is None or not text.strip():
            continue
        try:
            found[field] = parse(text)
        except (ValueError, TypeError) as exc:
            _bad(name, text, exc)
    return found


def merged(explicit: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Environment settings overridden by the explicit ones (``None`` means not given)."""
    fields = from_env(environ)
    fields.update({k: v for k, v in explicit.items() if v is not None})
    return fields


def _flag(name: str, env: Mapping[str, str]) -> bool | None:
    text = env.get(name)
    if text is None or not text.strip():
        return None
    try:
        return _bool(text)
    except ValueError as exc:
        _bad(name, text, exc)
        return None


def instrumentation_disabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` names pairwatch (or is ``*``).

    OpenTelemetry's auto-instrumentation already skips our entry point for it; reading it
    here makes a direct ``PairwatchInstrumentor().instrument()`` and the one-liner agree.
    """
    env = os.environ if environ is None else environ
    names = {
        n.strip().lower() for n in env.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "").split(",")
    }
    return "pairwatch" in names or "*" in names


def starts_disabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the off switch starts off: ``PAIRWATCH_ENABLED=false`` or, with nothing said
    about pairwatch, ``OTEL_SDK_DISABLED=true`` (the SDK then exports nothing anyway, so
    observing would cost the client for no reader)."""
    env = os.environ if environ is None else environ
    enabled = _flag("PAIRWATCH_ENABLED", env)
    if enabled is not None:
        return not enabled
    return bool(_flag("OTEL_SDK_DISABLED", env))


def sdk_shortcuts(environ: Mapping[str, str] | None = None) -> bool:
    """Whether pairwatch may take its shortcuts through the OpenTelemetry SDK's internals
    (:mod:`pairwatch.otel.sdk`): unless ``PAIRWATCH_SDK_SHORTCUTS`` says false."""
    env = os.environ if environ is None else environ
    return _flag("PAIRWATCH_SDK_SHORTCUTS", env) is not False
