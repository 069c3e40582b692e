"""ASGI middleware: the server's books of every JSON-RPC exchange the application answers.

Wrap the application once (``app = PairwatchMiddleware(app)``).  The middleware sits between
the server and the application and sees two message streams go past: the ``http.request``
messages the application reads (the request body) and the ``http.response.*`` messages it
sends (the reply, a JSON body or an event stream such as MCP's streamable HTTP).  Each
message is handed on as the very same object, and only then is a copy looked at, so the
application and the server exchange exactly what they would without pairwatch, at the same
moments; nothing is buffered on their path, and nothing pairwatch does raises into either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from pairwatch.channel import Options
from pairwatch.runtime import guard, switch
from pairwatch.server.exchange import (
    APP_ERROR,
    Exchange,
    counter,
    may_be_jsonrpc,
    middleware_options,
    parent_context,
    server_name,
)

__all__ = ["PairwatchMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class PairwatchMiddleware:
    """Keeps the server's side of the books for an ASGI application.

    ``server_address`` names this server in ``server.address`` (default: the host name of
    each request's ``Host`` header, which is what client integrations label the same server
    with).  Other keywords are :class:`~pairwatch.channel.Options` fields
    (``meter_provider=...``, ``timeout=...``).  Only ``POST`` requests whose Content-Type may
    be JSON are looked at; the rest (uploads, the ``GET`` of an MCP event stream, lifespan,
    websockets) pass through untouched.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        server_address: str | None = None,
        options: Options | None = None,
        **settings: Any,
    ) -> None:
        self.app = app
        self.server_address = server_address
        self.options = middleware_options(options, settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        exchange = None
        if switch.on and scope.get("type") == "http" and scope.get("method") == "POST":
            exchange = self._exchange(scope)
        if exchange is None:
            await self.app(scope, receive, send)
            return

        async def tapped_receive() -> Message:
            message = await receive()
            if exchange.active:
                guard.shielded("server_read", _read, exchange, message)
            return message

        async def tapped_send(message: Message) -> None:
            try:
                await send(message)
            finally:
                # After the server took it: the reply leaves first, the books follow.  Also
                # when sending raised (the caller went away): the application did answer.
                if exchange.active:
                    guard.shielded("server_wrote", _wrote, exchange, message)

        try:
            await self.app(scope, tapped_receive, tapped_send)
        except BaseException:
            guard.shielded("server_app_error", exchange.dropped, APP_ERROR)
            raise
        guard.shielded("server_finished", exchange.finished)

    def _exchange(self, scope: Scope) -> Exchange | None:
        try:
            headers = [
                (bytes(k).decode("latin-1").lower(), bytes(v).decode("latin-1"))
                for k, v in scope.get("headers", ())
            ]
            if not may_be_jsonrpc(next((v for k, v in headers if k == "content-type"), None)):
                return None
            host = self.server_address
            if host is None:
                host = server_name(next((v for k, v in headers if k == "host"), None))
            return Exchange(self.options, "asgi", host, parent_context(headers))
        except Exception as exc:
            guard.report("server_exchange", exc, counter(self.options))
            return None


def _read(exchange: Exchange, message: Message) -> None:
    kind = message.get("type")
    if kind == "http.request":
        exchange.request_chunk(message.get("body", b""), bool(message.get("more_body", False)))
    elif kind == "http.disconnect":
        exchange.dropped("stream_dropped")


def _wrote(exchange: Exchange, message: Message) -> None:
    kind = message.get("type")
    if kind == "http.response.body":
        exchange.response_chunk(message.get("body", b""))
        if not message.get("more_body", False):
            exchange.response_end()
    elif kind == "http.response.start":
        content_type = encoding = None
        for key, value in message.get("headers", ()):
            name = bytes(key).lower()
            if name == b"content-type":
                content_type = bytes(value).decode("latin-1")
            elif name == b"content-encoding":
                encoding = bytes(value).decode("latin-1")
        exchange.response_start(int(message.get("status", 200)), content_type, encoding)
