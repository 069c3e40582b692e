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
import weakref
from collections.abc import Callable
from typing import Any

from pairwatch.integrations._kit.exchange import ACTIVE
from pairwatch.integrations._kit.patch import Patches, Wrapper
from pairwatch.integrations._kit.request import endpoint_of
from pairwatch.integrations.mcp.follow import REQUEST
from pairwatch.runtime import guard

__all__ = [
    "RAW_ATTRIBUTE",
    "Raw",
    "Source",
    "acquire",
    "broken",
    "claim_targets",
    "dropped",
    "from_wire",
    "release",
    "take",
]

RAW_ATTRIBUTE = "_pairwatch_raw"


class Raw:
    """One message's text as the transport received it, and where it came from."""

    __slots__ = ("address", "data", "port", "process", "session_id", "taken", "transport")

    def __init__(
        self,
        transport: str,
        data: object,
        address: str | None,
        process: object = None,
        session_id: str | None = None,
        port: int | None = None,
    ) -> None:
        self.transport = transport
        self.data = data
        self.address = address
        self.port = port
        self.process = process  # stdio: the server process the line came from
        self.session_id = session_id  # streamable HTTP: the session the server assigned
        self.taken = False


class Source:
    """One HTTP exchange of a streamable HTTP transport, as its task sees it: the server's
    host name, the transport, and whether the connection broke under it (the SDK swallows a
    broken SSE stream and resolves the request with the same error as a stream that ended)."""

    __slots__ = ("address", "broken", "port", "transport")

    def __init__(self, address: str | None, transport: object, port: int | None = None) -> None:
        self.address = address
        self.port = port
        self.transport = transport
        self.broken = False


_BROKEN: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
"""Transports whose connection broke under an exchange, with the close reason it reads as:
the SDK then cancels the calls in flight, which must not read as the caller's withdrawal."""


def broken(transport: object) -> str | None:
    """``stream_dropped`` (or ``send_failed``) when ``transport``'s connection broke."""
    try:
        return _BROKEN.get(transport)
    except TypeError:
        return None


def dropped(sender_ctx: contextvars.Context | None) -> bool:
    """Whether an item the SDK made up was sent after the connection under it broke."""
    source = sender_ctx.get(_SOURCE) if sender_ctx is not None else None
    return source is not None and source.broken


_RAW: contextvars.ContextVar[Raw | None] = contextvars.ContextVar("pairwatch_mcp_raw", default=None)
_SOURCE: contextvars.ContextVar[Source | None] = contextvars.ContextVar(
    "pairwatch_mcp_source", default=None
)
"""The exchange whose task parses a body (the transport's ``session_id`` is set from the
reply's headers before the body is parsed)."""
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
                session_id = getattr(source.transport, "session_id", None)
                session_id = session_id if isinstance(session_id, str) else None
                _RAW.set(Raw(self._transport, data, source.address, None, session_id, source.port))
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
        address, port = endpoint_of(str(getattr(instance, "url", "")))
        token = _SOURCE.set(Source(address, instance, port))
        request = REQUEST.get()  # the POST task runs in a copy of the caller's context
        if request is not None:
            request.transport = instance
    claim = ACTIVE.set(True)
    try:
        return await wrapped(*args, **kwargs)
    except Exception as exc:
        with contextlib.suppress(Exception):
            _broke(instance, exc)
        raise
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


def _broke(transport: object, exc: BaseException) -> None:
    """An exchange failed on the wire: remember it of its transport (and of this exchange)."""
    import httpx2

    if not isinstance(exc, httpx2.TransportError) or isinstance(exc, httpx2.SSEError):
        return  # an event over the SDK's own size limit, or malformed: not a broken wire
    source = _SOURCE.get()
    if source is not None:
        source.broken = True
    unreachable = isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout))
    _BROKEN[transport] = "send_failed" if unreachable else "stream_dropped"


class _EventSourceTap:
    """Stands in for ``EventSource`` in the streamable HTTP transport: the SDK catches what
    breaks an SSE stream and resolves the request with the error it gives a stream that
    ended in order; this sees the break first and marks the exchange."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __call__(self, response: Any, *args: Any, **kwargs: Any) -> Any:
        return _WatchedEvents(self._inner(response, *args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _WatchedEvents:
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def __aiter__(self) -> Any:
        try:
            async for event in self._inner:
                yield event
        except Exception as exc:
            source = _SOURCE.get()
            if source is not None:
                with contextlib.suppress(Exception):
                    _broke(source.transport, exc)
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


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
            ("EventSource", lambda: patches.replace(shttp, "EventSource", _EventSourceTap)),
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
