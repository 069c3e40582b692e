"""One HTTP exchange as a JSON-RPC server saw it: the books both middlewares keep.

The server's side of the books uses the same channel and ledger as a client: the request
body the caller sent is what was "sent", the body the application answers is what was
"received".  So every counter keeps its contract meaning, only seen from the other end:
a missing response on the server side is a request the application never answered, a
null-id response is one the application produced.  Nothing here pairs anything itself.

ASGI and WSGI differ only in how the bytes flow past; both hand them to an
:class:`Exchange`: a copy of each request chunk the application read, the response head,
a copy of each response chunk it produced.  Every method is shielded: a failure here is
counted in ``pairwatch.internal_errors`` and the exchange gives up, never the application.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from pairwatch import config
from pairwatch.channel import Channel, Options
from pairwatch.channel.sink import telemetry_for
from pairwatch.integrations._kit.body import body_budget
from pairwatch.integrations._kit.request import request_payload
from pairwatch.integrations._kit.stream import MAX_BODY, Tap
from pairwatch.runtime import guard

__all__ = [
    "APP_ERROR",
    "Exchange",
    "counter",
    "may_be_jsonrpc",
    "middleware_options",
    "parent_context",
    "server_name",
]

APP_ERROR: Final = "app_error"
"""Close reason: the application raised before it finished its reply."""

_NO_REPLY: Final = frozenset({204, 205, 304})


def may_be_jsonrpc(content_type: str | None) -> bool:
    """Whether a request body of this Content-Type may be JSON-RPC, so worth buffering: none
    given, or a JSON type (``application/json``, ``application/json-rpc``, ``*+json``).
    Uploads, forms and the rest stream through without a byte kept."""
    if not content_type:
        return True
    return "json" in content_type.split(";", 1)[0].lower()


def middleware_options(options: Options | None, settings: dict[str, Any]) -> Options:
    """The middleware's settings, read as ``pairwatch.instrument`` reads a client's: an
    explicit ``Options`` with keyword overrides, else ``PAIRWATCH_*`` variables overridden
    by the keywords."""
    if options is not None:
        return dataclasses.replace(options, **settings) if settings else options
    return Options(**config.merged(settings))


def server_name(host: str | None) -> str | None:
    """The host name of a ``Host`` header (no port), as client integrations label theirs, so
    the two sides of one server share ``server.address`` when clients call it by that name."""
    if not host:
        return None
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:8080
        end = host.find("]")
        return host[1:end] if end > 0 else None
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host or None


def parent_context(headers: Iterable[tuple[str, str]]) -> otel_context.Context | None:
    """The context the caller propagated (W3C ``traceparent`` with the default propagator),
    unless a span is already current: an HTTP server instrumentation outside this
    middleware made one from the same header, and the batch span belongs under it.

    Only the header fields the global propagator reads are copied, so a request costs a
    dict of one or two entries, not of every header.
    """
    if trace.get_current_span().get_span_context().is_valid:
        return None
    propagator = propagate.get_global_textmap()
    fields = propagator.fields
    carrier = {k: v for k, v in headers if k in fields}
    if not carrier:
        return None
    return propagator.extract(carrier)


def counter(options: Options) -> guard.ErrorCounter | None:
    """Where a failure before any channel exists is counted: the same
    ``pairwatch.internal_errors`` the channel would use (None if even that fails)."""
    try:
        return telemetry_for(options).internal_error
    except Exception:
        return None


class Exchange:
    """The books of one request/response exchange, opened when the request body is complete.

    A body that is not JSON-RPC (or larger than the cap, or past the process body budget,
    which its bytes are charged to before they are kept) opens nothing, and everything after
    is a no-op: a health check costs one sniff of its body.  A response that starts before
    the body was read (a redirect, a 404 of an unread body) is not a reply to it.
    """

    __slots__ = (
        "_body", "_channel", "_gave_up", "_head", "_host", "_integration", "_is_batch",
        "_options", "_parent", "_size", "_tap",
    )  # fmt: skip

    def __init__(
        self,
        options: Options,
        integration: str,
        host: str | None,
        parent: otel_context.Context | None,
    ) -> None:
        self._options = options
        self._integration = integration
        self._host = host
        self._parent = parent
        self._body: list[bytes] = []
        self._size = 0
        self._channel: Channel | None = None
        self._tap: Tap | None = None
        self._head: tuple[int, str | None, str | None] | None = None
        self._gave_up = False
        self._is_batch = False

    @property
    def active(self) -> bool:
        """Whether anything is still worth looking at (cheap check for the hot paths)."""
        return not self._gave_up and (self._tap is None or not self._tap.done)

    def request_chunk(self, data: bytes, more: bool) -> None:
        """A copy of what the application read from the request body; ``more=False`` at
        its end, which records the body as sent."""
        if self._gave_up or self._channel is not None or self._head is not None:
            return
        try:
            if data:
                size = len(data)
                if self._size + size > MAX_BODY or not body_budget().take_all(size):
                    self._give_up()
                    return
                self._size += size
                self._body.append(bytes(data))
            if not more:
                self._open()
        except Exception as exc:
            self._fail("server_request", exc)

    def _open(self) -> None:
        body = b"".join(self._body)
        self._forget_body()
        payload = request_payload(body)
        if payload is None:
            self._gave_up = True
            return
        channel = Channel(
            transport="http",
            integration=self._integration,
            server_address=self._host,
            bound=True,
            options=self._options,
            side="server",
        )
        self._channel = channel
        # For the tap: a batch answered over SSE comes back one element per event.
        self._is_batch = payload.is_batch
        channel.sent_parsed(payload, body, parent=self._parent)
        # An application that never answers (or a stream held open) still times out.
        channel.watch()

    def response_start(self, status: int, content_type: str | None, encoding: str | None) -> None:
        """The response head: where the books learn whether the reply is JSON or a stream."""
        if self._gave_up or self._head is not None:
            return
        try:
            self._head = (status, content_type, encoding)
            channel = self._channel
            if channel is None:
                self._give_up()  # answered before its body was read: not a reply to it
                return
            if status in _NO_REPLY or 300 <= status < 400:
                # No body can carry a reply: whatever was pending is missing at once.
                self._tap = Tap(channel, None)
                self._tap.end()
                return
            self._tap = Tap(channel, content_type, encoding, batch_sent=self._is_batch)
        except Exception as exc:
            self._fail("server_response", exc)

    def response_chunk(self, data: bytes) -> None:
        tap = self._tap
        if tap is not None and data:
            tap.raw_chunk(data)  # the Content-Encoding is the application's own

    def response_end(self) -> None:
        if self._tap is not None:
            self._tap.end()

    def dropped(self, reason: str) -> None:
        """The reply was cut short (the application raised, the caller went away)."""
        if self._tap is not None:
            self._tap.dropped(reason)
        elif self._channel is not None and not self._gave_up:
            self._gave_up = True
            guard.shielded("server_drop", self._channel.close, reason)

    def finished(self) -> None:
        """The application returned: a reply it started but never ended closes as
        ``stream_dropped``, no reply at all as ``app_error`` (the server answers 500)."""
        if self._tap is not None:
            if not self._tap.done:
                self._tap.dropped("stream_dropped")
        else:
            self.dropped(APP_ERROR)

    def _give_up(self) -> None:
        self._gave_up = True
        self._forget_body()

    def _forget_body(self) -> None:
        self._body = []
        size, self._size = self._size, 0
        body_budget().release(size)

    def __del__(self) -> None:
        if self._size:  # a request body the application never finished reading
            self._forget_body()

    def _fail(self, kind: str, exc: BaseException) -> None:
        self._give_up()
        channel = self._channel
        guard.report(
            kind,
            exc,
            counter(self._options) if channel is None else channel.telemetry.internal_error,
        )
        if channel is not None:
            guard.shielded("server_close", channel.close, "closed")
