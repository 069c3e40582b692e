"""The one skeleton of a tracked HTTP exchange; each HTTP client library fills in its parts.

Every HTTP integration runs the same steps around its library's send method: pass through
when an outer wrapper already tracks this exchange; find the request body and sniff it; open
the exchange and record what is sent (its *bound* channel is built only when something
needs it, see :class:`Exchange`); call the library, marked as tracked; close the exchange as
``send_failed`` if that raises (re-raising the library's own exception); put a tap on the
response body before the caller reads it; and, for a buffered call that was sent as a
stream so that the body could be tapped, read the body exactly as the library would, then
show it whole (:meth:`Exchange.whole`).
A request body the library sends as a stream is seen as it goes out (:class:`Streamed`):
the exchange opens once it has been sent whole and turned out to be JSON-RPC.

Written once here, so a library's integration says only what differs (:class:`HttpClient`):
where the request body and URL are in the call's arguments, and how to show the response
body to a :class:`~pairwatch.integrations._stream.Tap`.  Failures in either are reported and
the call goes on as if pairwatch were absent.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Callable
from typing import Any

from pairwatch import guard
from pairwatch.channel import Options
from pairwatch.integrations import _healthy
from pairwatch.integrations._client import HttpClient, Reply
from pairwatch.integrations._healthy import Begun
from pairwatch.integrations._patch import Wrapper
from pairwatch.integrations._request import (
    REDIRECTS,
    Exchange,
    Request,
    Streamed,
    answered_elsewhere,
    decoded_payload,
    host_of,
    inject_context,
    open_exchange,
    request_payload,
)
from pairwatch.otel.current import get_current
from pairwatch.pairing import wire

__all__ = [
    "ACTIVE",
    "REDIRECTS",
    "Begun",
    "Exchange",
    "HttpClient",
    "Reply",
    "Request",
    "Streamed",
    "answered_elsewhere",
    "async_send",
    "decoded_payload",
    "fixed",
    "host_of",
    "open_exchange",
    "request_payload",
    "sync_send",
]

ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("pairwatch_http", default=False)
"""Set while a tracked exchange's wrapped call runs (per thread, per asyncio task).

One exchange must be counted once, whatever wraps it: an instance wrapper over a class-wide
one (``instrument(client)`` with the global instrumentor on), web3's provider over the
requests or aiohttp session it posts with, or a library that calls its own wrapped method
again (requests' redirects call ``Session.send`` per hop).  The outermost tracked call is
the exchange; nested calls pass through.
"""


def fixed(options: Options) -> Callable[[], Options]:
    """The ``options`` argument of :func:`sync_send` and :func:`async_send` for one
    client's own options: a callable that always returns them, called without a Python
    frame (a ``lambda`` is one more Python call on every exchange)."""
    return itertools.repeat(options).__next__


def _begin(
    client: HttpClient,
    options: Options,
    instance: Any,
    args: tuple[Any, ...],
    kwargs: Any,
    quick: bool = False,
) -> Exchange | Begun | None:
    """Open the exchange of this call; with ``quick`` (a buffered call, or a library whose
    attach takes a Begun), a request of the healthy shape opens the quick way
    (:mod:`pairwatch.integrations._healthy`)."""
    try:
        request = client.request(instance, args, kwargs)
        payload = None if request is None else client.payload(request)
        if request is None or payload is None:
            return None
        host = request.host or host_of(request.url)
        current = get_current()  # read once: the span parent and the propagation
        opened: Exchange | Begun
        if quick and payload.plain is not None and _healthy.ENABLED:
            opened = _healthy.begin(client.integration, options, payload, request, host, current)
        else:
            opened = open_exchange(
                payload, options, client.integration, host, request.body, request.read_timeout,
                current,
            )  # fmt: skip
        # inject_context's first check made here: an empty context holds no span to send.
        if options.propagate and request.headers is not None and (current is None or current):
            inject_context(request.headers, current)
        return opened
    except Exception as exc:
        guard.report(client.integration + "_send", exc, None)
        return None


def _begin_streamed(
    client: HttpClient, options: Options, instance: Any, args: tuple[Any, ...], kwargs: Any
) -> Streamed | None:
    found: list[Request] = []

    def sent_whole(payload: wire.Payload, body: bytes) -> Exchange:
        request = found[0]
        timeout = request.read_timeout
        host = host_of(request.url)
        return open_exchange(payload, options, client.integration, host, body, timeout)

    try:
        streamed = Streamed(sent_whole)
        request = client.stream_request(instance, args, kwargs, streamed)
        if request is None:
            return None
        found.append(request)
        return streamed
    except Exception as exc:
        guard.report(client.integration + "_send", exc, None)
        return None


def _opened(streamed: Streamed | None) -> Exchange | None:
    return None if streamed is None else streamed.exchange


def _plan(client: HttpClient, kwargs: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether the skeleton reads the body for the caller (a buffered call sent as a
    stream), and the keyword arguments the library is called with."""
    flag = client.stream_flag
    if flag is None:
        return False, kwargs
    streaming = client.streaming
    return kwargs.get(flag, not streaming) != streaming, {**kwargs, flag: streaming}


def _attach(
    client: HttpClient,
    exchange: Exchange,
    response: Any,
    instance: Any,
    kwargs: dict[str, Any],
    wants_read: bool,
) -> None:
    """Tap the response (the skeleton reads the body afterwards when ``wants_read``)."""
    caller_streams = client.stream_flag is not None and not wants_read
    try:
        tap = client.attach(exchange, response, instance, kwargs)
    except Exception as exc:
        guard.report(client.integration + "_attach", exc, exchange.internal_error())
        exchange.close("closed")
        return
    if caller_streams and tap is not None:
        tap.abandon_with(response)  # a stream the caller may drop before its end


def _whole(client: HttpClient, exchange: Exchange, response: Any) -> None:
    """The body the library has read, to the books in one piece.

    Why not the tee: the tee's wrappers live on the response and cost a few dozen calls per
    exchange; a body the library keeps whole can be shown once it is read, at the moment the
    tee would have ended, with the same bytes.
    """
    try:
        content_type, status, location = client.reply(exchange, response)
        body = client.body(response)
    except Exception as exc:  # the caller has its body: report, never raise
        guard.report(client.integration + "_attach", exc, exchange.internal_error())
        exchange.close("closed")
        return
    exchange.whole(body, content_type, answered_elsewhere(status, location))


def _replied(client: HttpClient, begun: Begun, response: Any) -> None:
    """:func:`_whole` for a buffered call opened the quick way: a reply that pairs whole
    closes it (:func:`_healthy.reply_body`); a redirect, a 202 or any other body builds the
    exchange and is shown to it the general way."""
    try:
        status, content_type, body = client.whole_reply(response)
    except Exception as exc:  # the caller has its body: report, never raise
        held = _healthy.exchange(begun)
        guard.report(client.integration + "_attach", exc, held.internal_error())
        held.close("closed")
        return
    if status == 202 or status in REDIRECTS:
        rest: Exchange | None = _healthy.exchange(begun)  # reply() remembers a redirect
    else:
        rest = _healthy.reply_body(begun, body, content_type)
    if rest is not None:
        _whole(client, rest, response)


def _whole_failed(client: HttpClient, exchange: Exchange, response: Any) -> None:
    """The library's read of a buffered body raised: the body was cut short."""
    try:
        content_type, status, location = client.reply(exchange, response)
        exchange.tap(content_type, None, status=status, location=location).dropped()
    except Exception as exc:  # the library's own exception is what the caller gets
        guard.report(client.integration + "_attach", exc, exchange.internal_error())
        exchange.close("closed")


def sync_send(client: HttpClient, options: Callable[[], Options]) -> Wrapper:
    """The wrapper for a library's blocking send; ``options`` is read per call (the global
    instrumentor may be re-configured)."""

    def send(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if ACTIVE.get():
            return wrapped(*args, **kwargs)
        opts = options()
        wants_read, sent = _plan(client, kwargs)
        exchange = _begin(client, opts, instance, args, kwargs, wants_read and client.reads_whole)
        if isinstance(exchange, Begun):
            return _healthy_send(client, exchange, wrapped, args, sent)
        streamed = None
        if exchange is None:
            streamed = _begin_streamed(client, opts, instance, args, kwargs)
            if streamed is None:
                return wrapped(*args, **kwargs)
        token = ACTIVE.set(True)  # marks the wrapped call as tracked (see ACTIVE)
        try:
            response = wrapped(*args, **sent)
        except BaseException:
            exchange = exchange or _opened(streamed)
            if exchange is not None:
                exchange.close("send_failed")
            raise
        finally:
            ACTIVE.reset(token)
        exchange = exchange or _opened(streamed)
        if exchange is None:  # the streamed body was not JSON-RPC after all
            if wants_read:
                client.read(response)
            return response
        if wants_read and client.reads_whole:
            try:
                client.read(response)
            except BaseException:
                _whole_failed(client, exchange, response)
                raise
            _whole(client, exchange, response)
            return response
        _attach(client, exchange, response, instance, kwargs, wants_read)
        if wants_read:
            client.read(response)
        return response

    return send


def _healthy_send(
    client: HttpClient,
    begun: Begun,
    wrapped: Callable[..., Any],
    args: tuple[Any, ...],
    sent: dict[str, Any],
) -> Any:
    """:func:`sync_send`'s steps for a buffered call opened the quick way."""
    token = ACTIVE.set(True)
    try:
        response = wrapped(*args, **sent)
    except BaseException:
        _healthy.exchange(begun).close("send_failed")
        raise
    finally:
        ACTIVE.reset(token)
    try:
        client.read(response)
    except BaseException:
        _whole_failed(client, _healthy.exchange(begun), response)
        raise
    _replied(client, begun, response)
    return response


def async_send(client: HttpClient, options: Callable[[], Options]) -> Wrapper:
    """:func:`sync_send` for a coroutine send."""

    async def send(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if ACTIVE.get():
            return await wrapped(*args, **kwargs)
        opts = options()
        wants_read, sent = _plan(client, kwargs)
        quick = (wants_read and client.reads_whole) or client.attaches_begun
        exchange = _begin(client, opts, instance, args, kwargs, quick)
        if isinstance(exchange, Begun):
            if client.reads_whole:
                return await _healthy_asend(client, exchange, wrapped, args, sent)
            # A library that attaches to the response itself (``attaches_begun``): its
            # steps written out here, as one coroutine fewer is paid on every aiohttp call.
            token = ACTIVE.set(True)
            try:
                response = await wrapped(*args, **kwargs)
            except BaseException:
                _healthy.exchange(exchange).close("send_failed")
                raise
            finally:
                ACTIVE.reset(token)
            try:  # attach_begun closes what it opened on failure; this is defensive
                client.attach_begun(exchange, response, instance, kwargs)
            except Exception as exc:
                guard.report(client.integration + "_attach", exc, exchange.parts[1].internal_error)
            return response
        streamed = None
        if exchange is None:
            streamed = _begin_streamed(client, opts, instance, args, kwargs)
            if streamed is None:
                return await wrapped(*args, **kwargs)
        token = ACTIVE.set(True)  # marks the wrapped call as tracked (see ACTIVE)
        try:
            response = await wrapped(*args, **sent)
        except BaseException:
            exchange = exchange or _opened(streamed)
            if exchange is not None:
                exchange.close("send_failed")
            raise
        finally:
            ACTIVE.reset(token)
        exchange = exchange or _opened(streamed)
        if exchange is None:  # the streamed body was not JSON-RPC after all
            if wants_read:
                await client.aread(response)
            return response
        if wants_read and client.reads_whole:
            try:
                await client.aread(response)
            except BaseException:
                _whole_failed(client, exchange, response)
                raise
            _whole(client, exchange, response)
            return response
        _attach(client, exchange, response, instance, kwargs, wants_read)
        if wants_read:
            await client.aread(response)
        return response

    return send


async def _healthy_asend(
    client: HttpClient,
    begun: Begun,
    wrapped: Callable[..., Any],
    args: tuple[Any, ...],
    sent: dict[str, Any],
) -> Any:
    """:func:`_healthy_send` for a coroutine send."""
    token = ACTIVE.set(True)
    try:
        response = await wrapped(*args, **sent)
    except BaseException:
        _healthy.exchange(begun).close("send_failed")
        raise
    finally:
        ACTIVE.reset(token)
    try:
        await client.aread(response)
    except BaseException:
        _whole_failed(client, _healthy.exchange(begun), response)
        raise
    _replied(client, begun, response)
    return response
