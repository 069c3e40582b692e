"""The one skeleton of a tracked HTTP exchange; each HTTP client library fills in its parts.

Every HTTP integration runs the same steps around its library's send method: pass through
when an outer wrapper already tracks this exchange; find the request body and sniff it; open
one *bound* channel and record what is sent; call the library, marked as tracked; close the
exchange as ``send_failed`` if that raises (re-raising the library's own exception); put a
tap on the response body before the caller reads it; and, for a buffered call that was sent
as a stream so that the body could be tapped, read the body exactly as the library would.

Written once here, so a library's integration says only what differs (:class:`HttpClient`):
where the request body and URL are in the call's arguments, and how to show the response
body to a :class:`~pairwatch.integrations._stream.Tap`.  Failures in either are reported and
the call goes on as if pairwatch were absent.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry import propagate, trace

from pairwatch import guard
from pairwatch.channel import Channel, Options
from pairwatch.integrations._calls import Args, Kwargs
from pairwatch.integrations._patch import Wrapper
from pairwatch.integrations._stream import Tap
from pairwatch.pairing import wire

ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("pairwatch_http", default=False)
"""Set while a tracked exchange's wrapped call runs (per thread, per asyncio task).

One exchange must be counted once, whatever wraps it: an instance wrapper over a class-wide
one (``instrument(client)`` with the global instrumentor on), web3's provider over the
requests or aiohttp session it posts with, or a library that calls its own wrapped method
again (requests' redirects call ``Session.send`` per hop).  The outermost tracked call is
the exchange; nested calls pass through.
"""


@contextmanager
def tracking() -> Iterator[None]:
    """Mark the current context as inside a tracked exchange for the wrapped call."""
    token = ACTIVE.set(True)
    try:
        yield
    finally:
        ACTIVE.reset(token)


def host_of(url: object) -> str | None:
    """The host name of a URL object or string, or None; never raises."""
    try:
        host = getattr(url, "host", None)
        if isinstance(host, str):
            return host or None
        from urllib.parse import urlsplit

        return urlsplit(str(url)).hostname
    except Exception:
        return None


def request_payload(body: object) -> wire.Payload | None:
    """Classify a request body when, and only when, it looks like JSON-RPC.

    The sniff looks at one character and one substring, so the common case (not JSON-RPC)
    costs well under a microsecond and parses nothing.
    """
    if not isinstance(body, (bytes, bytearray, memoryview, str)) or not wire.sniff(body):
        return None
    parsed = wire.parse(body, wire.Kind.REQUEST)
    if not parsed.size:
        return None
    return parsed


def decoded_payload(value: object) -> wire.Payload | None:
    """Like :func:`request_payload` for a body the caller passed as a JSON object."""
    if isinstance(value, dict):
        looks = "jsonrpc" in value
    elif isinstance(value, list):
        looks = bool(value) and isinstance(value[0], dict) and "jsonrpc" in value[0]
    else:
        looks = False
    if not looks:
        return None
    parsed = wire.parse(value)
    return parsed if parsed.messages else None


def start_exchange(
    payload: wire.Payload,
    options: Options,
    integration: str,
    host: str | None,
    raw: object = None,
) -> Channel:
    """Open the bound channel of one HTTP exchange and record what is being sent (``raw``,
    the body as sent, is read only when payload capture is on)."""
    channel = Channel(
        transport="http",
        integration=integration,
        server_address=host or None,
        bound=True,
        options=options,
    )
    channel.sent_parsed(payload, raw)
    return channel


@dataclass(frozen=True)
class Request:
    """What a library's send call carries: the body as sent and where it goes.

    ``decoded`` marks a body handed over as a JSON object (aiohttp's ``json=``) rather than
    bytes or text.
    """

    body: object
    url: object
    decoded: bool = False
    headers: Any = None
    """The library's own mutable header mapping of this request, where trace context can be
    added (None where the library keeps none pairwatch may write to)."""


@dataclass(frozen=True)
class Exchange:
    """One tracked HTTP exchange: its bound channel and the payload sent on it."""

    channel: Channel
    payload: wire.Payload

    def tap(self, content_type: str | None, encoding: str | None) -> Tap:
        """A tap for the response body; a batch sent may come back one element per event."""
        return Tap(self.channel, content_type, encoding, batch_sent=self.payload.is_batch)

    def close(self, reason: str) -> None:
        guard.shielded("close_" + reason, self.channel.close, reason)


class HttpClient:
    """What one HTTP client library tells the skeleton; subclasses fill in the blanks.

    ``stream_flag``: set when the library reads a buffered body inside its send.  The
    skeleton then sends with ``stream_flag=streaming`` (``stream=True`` for httpx and
    requests, ``preload_content=False`` for urllib3) so the body can be tapped before anyone
    reads it, and calls :meth:`read` (or :meth:`aread`) for a caller who did not ask for a
    stream, as the library would have.
    """

    integration = "http"
    stream_flag: str | None = None
    streaming: object = True

    def request(self, instance: Any, args: Args, kwargs: Kwargs) -> Request | None:
        """Where the request body and URL are in this call; None when there is no body."""
        raise NotImplementedError

    def payload(self, request: Request) -> wire.Payload | None:
        """The JSON-RPC payload of the body, or None when it is not JSON-RPC."""
        return decoded_payload(request.body) if request.decoded else request_payload(request.body)

    def attach(
        self, exchange: Exchange, response: Any, instance: Any, kwargs: dict[str, Any]
    ) -> Tap | None:
        """Show the response body to a tap; return the tap while the body is still to come."""
        raise NotImplementedError

    def read(self, response: Any) -> None:
        """Read a buffered body the way the library's own send does (``stream_flag`` only)."""

    async def aread(self, response: Any) -> None:
        """:meth:`read` for a coroutine send."""


def _begin(
    client: HttpClient, options: Options, instance: Any, args: tuple[Any, ...], kwargs: Any
) -> Exchange | None:
    try:
        request = client.request(instance, args, kwargs)
        payload = None if request is None else client.payload(request)
        if request is None or payload is None:
            return None
        host = host_of(request.url)
        channel = start_exchange(payload, options, client.integration, host, request.body)
        if options.propagate and request.headers is not None:
            inject_context(request.headers)
        return Exchange(channel, payload)
    except Exception as exc:
        guard.report(client.integration + "_send", exc, None)
        return None


def inject_context(headers: Any) -> None:
    """Add the current trace context to a request's headers, as OpenTelemetry's HTTP client
    instrumentations do, so the server's batch span joins this trace.

    Nothing is added without a current span (an untraced request goes out unchanged), nor
    over a header the caller or another instrumentation already set.
    """
    if not trace.get_current_span().get_span_context().is_valid:
        return
    propagator = propagate.get_global_textmap()
    if any(field in headers for field in propagator.fields):
        return
    propagator.inject(headers)


def _sent_kwargs(client: HttpClient, kwargs: dict[str, Any]) -> dict[str, Any]:
    flag = client.stream_flag
    return kwargs if flag is None else {**kwargs, flag: client.streaming}


def _attach(
    client: HttpClient, exchange: Exchange, response: Any, instance: Any, kwargs: dict[str, Any]
) -> bool:
    """Tap the response; True when the skeleton must then read the body for the caller."""
    flag = client.stream_flag
    caller_streams = flag is not None and kwargs.get(flag, not client.streaming) == client.streaming
    wants_read = flag is not None and not caller_streams
    try:
        tap = client.attach(exchange, response, instance, kwargs)
    except Exception as exc:
        guard.report(client.integration + "_attach", exc, exchange.channel.telemetry.internal_error)
        exchange.close("closed")
        return wants_read
    if caller_streams and tap is not None:
        tap.abandon_with(response)  # a stream the caller may drop before its end
    return wants_read


def sync_send(client: HttpClient, options: Callable[[], Options]) -> Wrapper:
    """The wrapper for a library's blocking send; ``options`` is read per call (the global
    instrumentor may be re-configured)."""

    def send(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        exchange = None if ACTIVE.get() else _begin(client, options(), instance, args, kwargs)
        if exchange is None:
            return wrapped(*args, **kwargs)
        try:
            with tracking():
                response = wrapped(*args, **_sent_kwargs(client, kwargs))
        except BaseException:
            exchange.close("send_failed")
            raise
        if _attach(client, exchange, response, instance, kwargs):
            client.read(response)
        return response

    return send


def async_send(client: HttpClient, options: Callable[[], Options]) -> Wrapper:
    """:func:`sync_send` for a coroutine send."""

    async def send(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        exchange = None if ACTIVE.get() else _begin(client, options(), instance, args, kwargs)
        if exchange is None:
            return await wrapped(*args, **kwargs)
        try:
            with tracking():
                response = await wrapped(*args, **_sent_kwargs(client, kwargs))
        except BaseException:
            exchange.close("send_failed")
            raise
        if _attach(client, exchange, response, instance, kwargs):
            await client.aread(response)
        return response

    return send
