"""Process-wide taps that keep the raw text of every message an MCP client transport parses.

Why: by the time a message reaches the session's dispatcher the SDK has parsed it, and over
streamable HTTP it has even rewritten the id (a response on a POST's SSE stream gets the
POST's request id) or replaced the message with an error of its own.  Exact unknown-id,
null-id and invalid counts therefore need the text as it came off the wire.  The taps put it
where the per-session ``_dispatch`` wrapper (:mod:`pairwatch.integrations.mcp.session`) can
find it for the very item being dispatched:

* stdio: ``mcp.client.stdio._parse_line(line)`` is wrapped; the raw line is attached to the
  ``SessionMessage`` (or the parse exception) it returns, as ``_pairwatch_raw``.  The stdio
  streams are plain memory streams, so an attribute is the only thing that travels.
* streamable HTTP and SSE: both transports send into a ``ContextSendStream``, which snapshots
  the sender's contextvars at every ``send``; the dispatcher passes that snapshot to
  ``_dispatch`` as ``sender_ctx``.  The module-level ``jsonrpc_message_adapter`` that the
  transports parse with is replaced by a stand-in whose ``validate_json`` first stores the raw
  text in a :class:`~contextvars.ContextVar`.  That one hook sees every body the SDK parses:
  SSE event data, a JSON response body, and the JSON error body of a 4xx reply.
  ``StreamableHTTPTransport._handle_post_request``, ``_run_request_post``,
  ``_handle_resumption_request`` and ``handle_get_stream`` are wrapped only to publish the
  server's host name (for the ``server.address`` label) the same way, and to mark the tasks
  of an HTTP transport (:func:`from_wire`): an item sent from one without raw text is an
  error the SDK made up, while an item from no transport at all is a message object handed
  over in memory.

The same wrappers, and one on the SSE transport's ``request_within_origin`` (its POSTs), mark
their tasks as an HTTP exchange already tracked
(:data:`pairwatch.integrations._kit.exchange.ACTIVE`): an MCP transport's POSTs are the
session's, whose replies may come on another channel (a ``202 Accepted`` whose reply comes
on the SSE stream, a reply on a resumed GET stream), so the HTTP integrations must not
count them on their own (:func:`claim_targets`, which the global
instrumentor also installs, so that claim holds from the start).

A stored :class:`Raw` is taken once: an error the SDK synthesizes later in the same task (the
stream ended, a 202, an unexpected content type) finds it already taken and is recognised as
synthesized, not as a second copy of the server's message.

The taps are installed when the first session is instrumented and removed when the last one
is uninstrumented.  They never change what the SDK parses or returns.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sys
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from pairwatch.integrations._kit.exchange import ACTIVE
from pairwatch.integrations._kit.patch import Patches, Wrapper
from pairwatch.runtime import guard

__all__ = ["RAW_ATTRIBUTE", "Raw", "acquire", "claim_targets", "from_wire", "release", "take"]

RAW_ATTRIBUTE = "_pairwatch_raw"


class Raw:
    """One message's text as the transport received it, and where it came from."""

    __slots__ = ("address", "data", "process", "session_id", "taken", "transport")

    def __init__(
        self,
        transport: str,
        data: object,
        address: str | None,
        process: object = None,
        session_id: str | None = None,
    ) -> None:
        self.transport = transport
        self.data = data
        self.address = address
        self.process = process  # stdio: the server process the line came from
        self.session_id = session_id  # streamable HTTP: the session the server assigned
        self.taken = False


_RAW: contextvars.ContextVar[Raw | None] = contextvars.ContextVar("pairwatch_mcp_raw", default=None)
_SOURCE: contextvars.ContextVar[tuple[str | None, object] | None] = contextvars.ContextVar(
    "pairwatch_mcp_source", default=None
)
"""The HTTP transport whose task parses a body: its server's host name, and the transport
itself (whose ``session_id`` is set from the reply's headers before the body is parsed)."""
_WIRE: contextvars.ContextVar[bool] = contextvars.ContextVar("pairwatch_mcp_wire", default=False)


def from_wire(item: object, sender_ctx: contextvars.Context | None) -> bool:
    """Whether a dispatched item came through a transport that reads a wire (stdio, HTTP)."""
    if isinstance(getattr(item, RAW_ATTRIBUTE, None), Raw):
        return True
    return sender_ctx is not None and (
        sender_ctx.run(_WIRE.get) or sender_ctx.get(_RAW) is not None
    )


def take(item: object, sender_ctx: contextvars.Context | None) -> Raw | None:
    """The raw text behind a dispatched item, once; ``None`` for SDK-made items."""
    tagged = getattr(item, RAW_ATTRIBUTE, None)
    raw = tagged if isinstance(tagged, Raw) else None
    if raw is None and sender_ctx is not None:
        raw = sender_ctx.get(_RAW)
    if raw is None or raw.taken:
        return None
    raw.taken = True
    return raw


class _AdapterTap:
    """Stands in for ``jsonrpc_message_adapter`` inside one transport module."""

    def __init__(self, inner: Any, transport: str) -> None:
        self._inner = inner
        self._transport = transport

    def validate_json(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(Exception):  # never let the tap stop the SDK from parsing
            source = _SOURCE.get()
            if source is None:
                _RAW.set(Raw(self._transport, data, None))
            else:
                session_id = getattr(source[1], "session_id", None)
                session_id = session_id if isinstance(session_id, str) else None
                _RAW.set(Raw(self._transport, data, source[0], None, session_id))
        return self._inner.validate_json(data, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _TypesTap:
    """Stands in for the ``mcp_types`` module as the SSE transport sees it (``types.X``)."""

    def __init__(self, inner: Any, transport: str) -> None:
        self._inner = inner
        self.jsonrpc_message_adapter = _AdapterTap(inner.jsonrpc_message_adapter, transport)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _tag_line(
    wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    result = wrapped(*args, **kwargs)
    try:
        line = args[0] if args else kwargs.get("line")
        setattr(result, RAW_ATTRIBUTE, Raw("stdio", line, None, _server_process()))
    except Exception:  # an exception type without attributes: that line goes uncounted
        pass
    return result


def _server_process() -> object:
    """The server process of the stdio transport whose reader parses this line: the reader
    holds it as ``process`` (how the server ended tells a crash from an orderly end)."""
    try:
        frame: Any = sys._getframe(2)
        for _ in range(3):  # the reader, or the wrapper between it and this tap
            if frame is None:
                return None
            found = frame.f_locals.get("process")
            if found is not None and hasattr(found, "returncode"):
                return found
            frame = frame.f_back
    except (ValueError, AttributeError):
        pass
    return None


async def _with_address(
    wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    token = wire = None
    with contextlib.suppress(Exception):
        wire = _WIRE.set(True)
        token = _SOURCE.set((urlsplit(str(getattr(instance, "url", ""))).hostname, instance))
    claim = ACTIVE.set(True)
    try:
        return await wrapped(*args, **kwargs)
    finally:
        ACTIVE.reset(claim)
        if token is not None:
            _SOURCE.reset(token)
        if wire is not None:
            _WIRE.reset(wire)


async def _claimed(
    wrapped: Callable[..., Any], instance: object, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    claim = ACTIVE.set(True)
    try:
        return await wrapped(*args, **kwargs)
    finally:
        ACTIVE.reset(claim)


_TRANSPORT_METHODS = (
    "_handle_post_request",
    "_run_request_post",
    "_handle_resumption_request",
    "handle_get_stream",
)


def claim_targets() -> list[tuple[object, str, Wrapper]]:
    """Where an MCP transport sends HTTP requests, each to be wrapped so that it is claimed."""
    import mcp.client.sse as sse
    import mcp.client.streamable_http as shttp

    transport = shttp.StreamableHTTPTransport
    found: list[tuple[object, str, Wrapper]] = [
        (transport, m, _with_address) for m in _TRANSPORT_METHODS if hasattr(transport, m)
    ]
    if callable(getattr(sse, "request_within_origin", None)):
        found.append((sse, "request_within_origin", _claimed))
    return found


class _Taps:
    """Reference-counted installation, through one :class:`Patches` that remembers exactly
    what it replaced."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._patches = Patches()

    def acquire(self) -> None:
        with self._lock:
            self._users += 1
            if self._users == 1:
                self._install()

    def release(self) -> None:
        with self._lock:
            if self._users == 0:
                return
            self._users -= 1
            if self._users == 0:
                self._patches.uninstall()

    def _install(self) -> None:
        import mcp.client.sse as sse
        import mcp.client.stdio as stdio
        import mcp.client.streamable_http as shttp

        # Each tap on its own: an SDK that moved one attribute loses that tap, not the session.
        # always=True: these taps only read, and a suppressed call must still leave its raw
        # text for the session's dispatcher, which decides per session.
        patches = self._patches
        steps: list[tuple[str, Callable[[], None]]] = [
            ("_parse_line", lambda: patches.wrap(stdio, "_parse_line", _tag_line, always=True)),
            (
                "jsonrpc_message_adapter",
                lambda: patches.replace(
                    shttp, "jsonrpc_message_adapter", lambda a: _AdapterTap(a, "http")
                ),
            ),
            ("types", lambda: patches.replace(sse, "types", lambda t: _TypesTap(t, "sse"))),
        ]
        for target, name, wrapper in claim_targets():
            steps.append(
                (name, functools.partial(patches.wrap, target, name, wrapper, always=True))
            )
        for name, step in steps:
            guard.shielded("mcp_tap:" + name, step)


_taps = _Taps()
acquire = _taps.acquire
release = _taps.release
