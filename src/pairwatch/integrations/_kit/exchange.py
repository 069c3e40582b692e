"""The one skeleton of a tracked HTTP exchange; each HTTP client library fills in its parts.

Every HTTP integration runs the same steps around its library's send method: pass through
when an outer wrapper already tracks this exchange; find the request body and classify it;
open the exchange and record what is sent; call the library, marked as tracked; close the
exchange as ``send_failed`` if that raises (the library's own exception goes on); then
either tap the response body before the caller reads it, or, for a buffered call the
skeleton sent as a stream, read the body as the library would and show it whole.  A
request body the library sends as a stream is seen as it goes out (:class:`Streamed`): the
exchange opens once it has been sent whole and turned out to be JSON-RPC.

The steps live in :class:`_Call`; :func:`sync_send` and :func:`async_send` only drive them,
differing in nothing but ``await``.  A library's integration says what differs
(:class:`HttpClient`): where the request is, how to tap or read the response.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Callable
from typing import Any

from pairwatch.channel import Options
from pairwatch.channel.channel import ended_by
from pairwatch.integrations._kit.client import HttpClient, Reply
from pairwatch.integrations._kit.patch import Wrapper
from pairwatch.integrations._kit.request import (
    REDIRECTS,
    Exchange,
    Request,
    Streamed,
    answered_elsewhere,
    decoded_payload,
    endpoint_of,
    host_of,
    inject_context,
    request_payload,
)
from pairwatch.otel.sdk.context import get_current
from pairwatch.pairing import wire
from pairwatch.runtime import guard

__all__ = [
    "ACTIVE",
    "REDIRECTS",
    "Exchange",
    "HttpClient",
    "Reply",
    "Request",
    "Streamed",
    "answered_elsewhere",
    "async_send",
    "decoded_payload",
    "endpoint_of",
    "fixed",
    "host_of",
    "request_payload",
    "sync_send",
]

ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("pairwatch_http", default=False)
"""Set while a tracked exchange's wrapped call runs (per thread, per asyncio task).

One exchange is counted once, whatever wraps it: an instance wrapper over a class-wide one,
web3's provider over the requests or aiohttp session it posts with, or a library that calls
its own wrapped method again (requests' redirects call ``Session.send`` per hop).  The
outermost tracked call is the exchange; nested calls pass through.
"""


def fixed(options: Options) -> Callable[[], Options]:
    """The ``options`` argument of :func:`sync_send` and :func:`async_send` for one
    client's own options (the global instrumentor's are read per call instead)."""
    return itertools.repeat(options).__next__


class _Call:
    """One tracked call of a library's send method: what it sends, and each step after."""

    __slots__ = ("client", "exchange", "kwargs", "reads", "streamed")

    def __init__(self, client: HttpClient, reads: bool, kwargs: dict[str, Any]) -> None:
        self.client = client
        self.reads = reads  # the skeleton reads the body for the caller (see _plan)
        self.kwargs = kwargs  # what the library is called with
        self.exchange: Exchange | None = None
        self.streamed: Streamed | None = None

    @classmethod
    def begin(
        cls,
        client: HttpClient,
        options: Options,
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> _Call | None:
        """Open the exchange of this call; None when it is not JSON-RPC (nothing tracked).

        A buffered call is sent as a stream when the library can (``stream_flag``), so that
        the skeleton sees the body before anyone reads it, and then reads it for the caller.
        """
        flag = client.stream_flag
        if flag is None:
            call = cls(client, False, kwargs)
        else:
            streaming = client.streaming
            reads = kwargs.get(flag, not streaming) != streaming
            call = cls(client, reads, {**kwargs, flag: streaming})
        try:
            request = client.request(instance, args, kwargs)
            payload = None if request is None else client.payload(request)
            if request is not None and payload is not None:
                current = get_current()  # read once: the span parent and the propagation
                host, port = (
                    (request.host, request.port) if request.host else endpoint_of(request.url)
                )
                call.exchange = Exchange.open(
                    payload, options, client.integration, host,
                    request.body, request.read_timeout, current, port,
                )  # fmt: skip
                if current and options.propagate and request.headers is not None:
                    inject_context(request.headers, current)  # an empty context has no span
                return call
            call.streamed = _streamed(client, options, instance, args, kwargs)
        except Exception as exc:
            guard.report(client.integration + "_send", exc, None)
            return None
        return call if call.streamed is not None else None

    def opened(self) -> Exchange | None:
        """The exchange, once known: a streamed request body opens it when sent whole."""
        exchange = self.exchange
        if exchange is None and self.streamed is not None:
            exchange = self.exchange = self.streamed.exchange
        return exchange

    def failed(self, exc: BaseException) -> None:
        """The library's send raised: nothing came back (or the caller cancelled it)."""
        exchange = self.opened()
        if exchange is not None:
            exchange.close(ended_by(exc, "send_failed"))

    def responded(self, response: Any, instance: Any, kwargs: dict[str, Any]) -> bool:
        """The response head is here; True when the skeleton reads the body next."""
        exchange = self.opened()
        client = self.client
        if exchange is not None and not (self.reads and client.reads_whole):
            try:
                tap = client.attach(exchange, response, instance, kwargs)
            except Exception as exc:
                guard.report(client.integration + "_attach", exc, exchange.telemetry.internal_error)
                exchange.close("closed")
            else:
                if tap is not None and not self.reads and client.stream_flag is not None:
                    tap.abandon_with(response)  # a stream the caller may drop before its end
        return self.reads

    def read(self, response: Any) -> None:
        """The skeleton read the body: a body the library keeps whole is shown whole."""
        exchange = self.exchange
        if exchange is None or not self.client.reads_whole:
            return
        client = self.client
        try:
            content_type, status, location = client.reply(exchange, response)
            body = client.body(response)
        except Exception as exc:  # the caller has its body: report, never raise
            guard.report(client.integration + "_attach", exc, exchange.telemetry.internal_error)
            exchange.close("closed")
            return
        exchange.whole(body, content_type, answered_elsewhere(status, location))

    def read_failed(self, response: Any, exc: BaseException) -> None:
        """The library's read of a buffered body raised: the body was cut short (a tee on
        the body has seen that already), or the caller cancelled the read."""
        exchange = self.exchange
        if exchange is None or not self.client.reads_whole:
            return
        try:
            content_type, status, location = self.client.reply(exchange, response)
            tap = exchange.tap(content_type, None, status=status, location=location)
            tap.dropped(ended_by(exc, "stream_dropped"))
        except Exception as exc:  # the library's own exception is what the caller gets
            errors = exchange.telemetry.internal_error
            guard.report(self.client.integration + "_attach", exc, errors)
            exchange.close("closed")


def _streamed(
    client: HttpClient, options: Options, instance: Any, args: tuple[Any, ...], kwargs: Any
) -> Streamed | None:
    """A request whose body is a stream: seen as it goes out (None when not offered)."""
    found: list[Request] = []

    def sent_whole(payload: wire.Payload, body: bytes) -> Exchange:
        request = found[0]
        host, port = endpoint_of(request.url)
        return Exchange.open(
            payload, options, client.integration, host, body, request.read_timeout, None, port
        )

    streamed = Streamed(sent_whole)
    request = client.stream_request(instance, args, kwargs, streamed)
    if request is None:
        return None
    found.append(request)
    return streamed


def sync_send(client: HttpClient, options: Callable[[], Options]) -> Wrapper:
    """The wrapper for a library's blocking send; ``options`` is read per call (the global
    instrumentor may be re-configured)."""

    def send(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if ACTIVE.get():
            return wrapped(*args, **kwargs)
        call = _Call.begin(client, options(), instance, args, kwargs)
        if call is None:
            return wrapped(*args, **kwargs)
        token = ACTIVE.set(True)  # marks the wrapped call as tracked (see ACTIVE)
        try:
            response = wrapped(*args, **call.kwargs)
        except BaseException as exc:
            call.failed(exc)
            raise
        finally:
            ACTIVE.reset(token)
        if call.responded(response, instance, kwargs):
            try:
                client.read(response)
            except BaseException as exc:
                call.read_failed(response, exc)
                raise
            call.read(response)
        return response

    return send


def async_send(client: HttpClient, options: Callable[[], Options]) -> Wrapper:
    """:func:`sync_send` for a coroutine send: the same steps, awaited."""

    async def send(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if ACTIVE.get():
            return await wrapped(*args, **kwargs)
        call = _Call.begin(client, options(), instance, args, kwargs)
        if call is None:
            return await wrapped(*args, **kwargs)
        token = ACTIVE.set(True)  # marks the wrapped call as tracked (see ACTIVE)
        try:
            response = await wrapped(*args, **call.kwargs)
        except BaseException as exc:
            call.failed(exc)
            raise
        finally:
            ACTIVE.reset(token)
        if call.responded(response, instance, kwargs):
            try:
                await client.aread(response)
            except BaseException as exc:
                call.read_failed(response, exc)
                raise
            call.read(response)
        return response

    return send
