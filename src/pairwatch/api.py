"""``instrument`` and ``uninstrument``: the one line a user writes.

``instrument`` finds the integration for the client's library (or uses the generic one when
method names are given), installs its wrappers in place and returns the same object, so it
can wrap an expression: ``client = pairwatch.instrument(httpx.Client())``.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from opentelemetry import metrics, trace

from pairwatch import config
from pairwatch.channel import Options
from pairwatch.integrations import REGISTRY, Handle
from pairwatch.runtime import guard

T = TypeVar("T")

Ref = Callable[[], object]
_handles: dict[int, tuple[Ref, Handle]] = {}
"""id(client) -> (a reference to the client, its handle).  Weak where the client allows it,
so instrumenting never keeps a client alive; an entry goes when its client is collected."""
_lock = threading.RLock()  # re-entrant: a weakref callback may run inside a locked section
_lock_box = [_lock]  # what weakref callbacks hold, so a forked child's new lock reaches them


def _renew_lock_in_child() -> None:
    # A thread of the parent may have been inside instrument() when another forked.
    global _lock
    _lock = _lock_box[0] = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_lock_in_child)


def _reference(client: object) -> Ref:
    """A reference to ``client`` whose collection drops its entry (and closes a generic
    stream's pending ids).

    The callback can run while the interpreter tears modules down, after this module's
    globals have been set to None: it therefore reaches nothing through globals (the table,
    the lock and the shield are bound here, while they exist) and swallows whatever still
    fails, since an exception there could only be printed to stderr at exit.
    """
    key = id(client)
    handles, box, shielded = _handles, _lock_box, guard.shielded

    def forget(ref: object) -> None:
        try:
            with box[0]:
                entry = handles.get(key)
                if entry is None or entry[0] is not ref:
                    return
                del handles[key]
            channel = getattr(entry[1], "channel", None)  # a generic stream's pending ids
            if channel is not None:
                shielded("collected", channel.close, "closed")
        except Exception:  # at interpreter exit there is no one left to tell
            pass

    try:
        return weakref.ref(client, forget)
    except TypeError:  # no weak references to this type: held strongly, until uninstrument
        return lambda: client


def _entry(client: object) -> tuple[Ref, Handle] | None:
    entry = _handles.get(id(client))
    return entry if entry is not None and entry[0]() is client else None


OPTION_NAMES: frozenset[str] = frozenset(Options.__dataclass_fields__)
"""Every keyword ``instrument`` and the global instrumentor take as an :class:`Options` field."""


def build_options(explicit: dict[str, Any]) -> Options:
    """:class:`Options` from the ``PAIRWATCH_*`` environment, overridden by ``explicit``.

    ``None`` in ``explicit`` means "not given" (so ``timeout=None`` falls back to the
    environment, then to the default).  Unknown names raise ``TypeError`` at set-up time.
    """
    unknown = set(explicit) - OPTION_NAMES
    if unknown:
        raise TypeError(f"unknown pairwatch option(s): {', '.join(sorted(unknown))}")
    return Options(**config.merged(explicit))


_said_disabled = False


def _disabled_by_env() -> bool:
    """``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` names pairwatch: install nothing (said once)."""
    global _said_disabled
    if not config.instrumentation_disabled():
        return False
    if not _said_disabled:
        _said_disabled = True
        logging.getLogger("pairwatch").info(
            "pairwatch: OTEL_PYTHON_DISABLED_INSTRUMENTATIONS names pairwatch; not instrumenting"
        )
    return True


def instrument(
    client: T,
    *,
    meter_provider: metrics.MeterProvider | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    timeout: float | None = None,
    send: str | None = None,
    receive: str | None = None,
    close: str | None = None,
    **options: Any,
) -> T:
    """Instrument ``client`` in place and return it.

    Providers default to the global ones.  ``timeout`` closes batches whose responses are
    overdue (they count as missing; 30 s unless ``PAIRWATCH_TIMEOUT`` says otherwise).
    Options not given here come from the ``PAIRWATCH_*`` environment
    (:mod:`pairwatch.config`); when ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` names pairwatch
    the client is returned as it is.  ``send``/``receive``/``close`` select the generic
    integration for objects no built-in integration knows.  Other keyword options are
    :class:`pairwatch.Options` fields (``spans=False``, ``max_pending_ids=...``,
    ``repair=True`` where the integration supports it).

    Instrumenting twice is a no-op with a warning.  An object nobody knows how to instrument
    raises ``TypeError`` here, at set-up, never later inside the client.
    """
    opts = build_options(
        {
            **options,
            "meter_provider": meter_provider,
            "tracer_provider": tracer_provider,
            "timeout": timeout,
        }
    )
    if _disabled_by_env():
        return client
    with _lock:
        if _entry(client) is not None:
            warnings.warn(
                f"{type(client).__name__} is already instrumented by pairwatch", stacklevel=2
            )
            return client
        if send is not None or receive is not None:
            # Imported here: ``import pairwatch`` loads no integration until one is used.
            from pairwatch.integrations import generic

            handle: Handle = generic.install(client, opts, send=send, receive=receive, close=close)
        else:
            found = next((i for i in REGISTRY if _detects(i.detect, client)), None)
            if found is None:
                raise TypeError(
                    f"pairwatch does not know {type(client).__module__}."
                    f"{type(client).__qualname__}; name its methods: "
                    "instrument(obj, send='...', receive='...')"
                )
            handle = found.install(client, opts)
        _handles[id(client)] = (_reference(client), handle)
    return client


R = TypeVar("R")
W = TypeVar("W")


def instrument_streams(
    reader: R,
    writer: W,
    *,
    transport: str | None = None,
    integration: str | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    timeout: float | None = None,
    **options: Any,
) -> tuple[R, W]:
    """Instrument a ``Content-Length``-framed JSON-RPC stream pair (LSP) and return the pair
    to use: stand-ins that pass every call through to ``reader`` and ``writer``, or, for
    python-lsp-jsonrpc's ``JsonRpcStreamReader``/``JsonRpcStreamWriter``, the same two
    objects instrumented in place.  ``uninstrument(reader)`` (the returned one) undoes it.

    ``transport`` defaults to ``socket`` for a network connection, else ``stdio``;
    ``integration`` to ``pylsp-jsonrpc`` or ``lsp-stream``.  Raises ``TypeError`` at set-up
    for objects that cannot be read or written.
    """
    opts = build_options(
        {
            **options,
            "meter_provider": meter_provider,
            "tracer_provider": tracer_provider,
            "timeout": timeout,
        }
    )
    if _disabled_by_env():
        return reader, writer
    from pairwatch.integrations.lsp import streams

    with _lock:
        if _entry(reader) is not None:
            warnings.warn(
                f"{type(reader).__name__} is already instrumented by pairwatch", stacklevel=2
            )
            return reader, writer
        handle, used_reader, used_writer = streams.install(
            reader, writer, opts, transport=transport, integration=integration
        )
        _handles[id(used_reader)] = (_reference(used_reader), handle)
    return used_reader, used_writer


def _detects(detect: Any, client: object) -> bool:
    try:
        return bool(detect(client))
    except Exception:
        return False


def uninstrument(client: T) -> T:
    """Restore the client's original methods; pending requests close as missing."""
    with _lock:
        entry = _entry(client)
        if entry is not None:
            del _handles[id(client)]
    if entry is None:
        warnings.warn(f"{type(client).__name__} is not instrumented by pairwatch", stacklevel=2)
        return client
    try:
        entry[1].uninstall()
    except Exception as exc:  # restore what can be restored; never raise into the caller
        guard.report("uninstrument", exc, None)
    return client


def is_instrumented(client: object) -> bool:
    return _entry(client) is not None
