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
from typing import Any, Final

from pairwatch import guard
from pairwatch.channel import Channel, Options
from pairwatch.integrations._calls import Args, Kwargs
from pairwatch.integrations._decoders import Chosen
from pairwatch.integrations._patch import Wrapper
from pairwatch.integrations._stream import MAX_BODY, Tap
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
    if not parsed.size and not parsed.empty_batch:
        return None
    return parsed  # [] too: the ledger holds it until its reply shows JSON-RPC


def decoded_payload(value: object) -> wire.Payload | None:
    """Like :func:`request_payload` for a body the caller passed as a JSON object."""
    if isinstance(value, dict):
        looks = "jsonrpc" in value
    elif isinstance(value, list):
        looks = not value or (isinstance(value[0], dict) and "jsonrpc" in value[0])
    else:
        looks = False
    if not looks:
        return None
    parsed = wire.parse(value)
    return parsed if parsed.messages or parsed.empty_batch else None


def start_exchange(
    payload: wire.Payload,
    options: Options,
    integration: str,
    host: str | None,
    raw: object = None,
    read_timeout: float | None = None,
) -> Channel:
    """Open the bound channel of one HTTP exchange and record what is being sent (``raw``,
    the body as sent, is read only when payload capture is on).

    ``read_timeout`` is the client's own (``math.inf`` when it waits forever); the batch
    waits that long instead of :attr:`Options.timeout`, so a long call the client still
    awaits is not counted missing.  None: the client's setting is unknown.
    """
    channel = Channel(
        transport="http",
        integration=integration,
        server_address=host or None,
        bound=True,
        options=options,
    )
    channel.sent_parsed(payload, raw, read_timeout)
    return channel


REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})


def answered_elsewhere(status: object, location: object) -> bool:
    """Whether a response says the request is answered on another channel: 202 Accepted
    (the reply comes on a stream), or a redirect (the request is sent again)."""
    return status == 202 or (status in REDIRECTS and bool(location))


@dataclass(frozen=True)
class Request:
    """What a library's send call carries: the body as sent and where it goes.

    ``decoded`` marks a body handed over as a JSON object (aiohttp's ``json=``) rather than
    bytes or text.  ``parsed`` is the payload when the integration already knows it (a
    redirected request whose body is a stream pairwatch must not read).  ``read_timeout``
    is the client's own for this call: seconds, ``math.inf`` for none, None when unknown.
    """

    body: object
    url: object
    decoded: bool = False
    parsed: wire.Payload | None = None
    read_timeout: float | None = None


@dataclass(frozen=True)
class Exchange:
    """One tracked HTTP exchange: its bound channel and the payload sent on it."""

    channel: Channel
    payload: wire.Payload
    read_timeout: float | None = None
    raw: object = None

    def tap(
        self,
        content_type: str | None,
        encoding: str | None,
        *,
        decoder: Chosen | None = None,
        status: object = None,
        location: object = None,
    ) -> Tap:
        """A tap for the response body; a batch sent may come back one element per event.

        ``decoder`` is built from the client library's own content decoders; without one,
        ``encoding`` gets the standard library's gzip and deflate.
        """
        return Tap(
            self.channel,
            content_type,
            encoding,
            batch_sent=self.payload.is_batch,
            decoder=decoder,
            elsewhere=answered_elsewhere(status, location),
            read_timeout=self.read_timeout,
        )

    def close(self, reason: str) -> None:
        guard.shielded("close_" + reason, self.channel.close, reason)


class Streamed:
    """A request body the library sends as a stream (a generator, a file): pairwatch sees a
    copy of each chunk as it goes out, and the exchange opens when the body has been sent.

    Only what could be JSON text is kept (the first byte must open an object or array) and
    at most ``MAX_BODY`` bytes of it, so an upload costs one look at its first chunk.
    """

    __slots__ = ("_chunks", "_open", "_size", "dead", "exchange")

    def __init__(self, open_exchange: Callable[[wire.Payload, bytes], Exchange]) -> None:
        self._open = open_exchange
        self._chunks: list[bytes] = []
        self._size = 0
        self.dead = False
        self.exchange: Exchange | None = None

    def chunk(self, data: bytes) -> None:
        if self.dead or not data:
            return
        if not self._size:
            head = data.lstrip(b" \t\r\n\xef\xbb\xbf")[:1]
            if head and head not in (b"{", b"["):
                self.dead = True
                return
        self._size += len(data)
        if self._size > MAX_BODY:
            self.dead, self._chunks = True, []
            return
        self._chunks.append(bytes(data))

    def end(self) -> None:
        """The body was sent whole: open the exchange if it was JSON-RPC."""
        if self.dead or self.exchange is not None:
            return
        self.dead = True
        body = b"".join(self._chunks)
        self._chunks = []
        payload = request_payload(body)
        if payload is not None:
            self.exchange = self._open(payload, body)


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
        if request.parsed is not None:
            return request.parsed
        return decoded_payload(request.body) if request.decoded else request_payload(request.body)

    def attach(
        self, exchange: Exchange, response: Any, instance: Any, kwargs: dict[str, Any]
    ) -> Tap | None:
        """Show the response body to a tap; return the tap while the body is still to come."""
        raise NotImplementedError

    def stream_request(
        self, instance: Any, args: Args, kwargs: Kwargs, streamed: Streamed
    ) -> Request | None:
        """For a request whose body is a stream: let ``streamed`` see it as it is sent and
        say where it goes; None when the library (or this body) offers no such view."""
        return None

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
        timeout = request.read_timeout
        channel = start_exchange(payload, options, client.integration, host, request.body, timeout)
        return Exchange(channel, payload, timeout, request.body)
    except Exception as exc:
        guard.report(client.integration + "_send", exc, None)
        return None


def _begin_streamed(
    client: HttpClient, options: Options, instance: Any, args: tuple[Any, ...], kwargs: Any
) -> Streamed | None:
    found: list[Request] = []

    def open_exchange(payload: wire.Payload, body: bytes) -> Exchange:
        request = found[0]
        timeout = request.read_timeout
        host = host_of(request.url)
        channel = start_exchange(payload, options, client.integration, host, body, timeout)
        return Exchange(channel, payload, timeout, body)

    try:
        streamed = Streamed(open_exchange)
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


def _wants_read(client: HttpClient, kwargs: dict[str, Any]) -> bool:
    flag = client.stream_flag
    return flag is not None and kwargs.get(flag, not client.streaming) != client.streaming


def _sent_kwargs(client: HttpClient, kwargs: dict[str, Any]) -> dict[str, Any]:
    flag = client.stream_flag
    return kwargs if flag is None else {**kwargs, flag: client.streaming}


def _attach(
    client: HttpClient, exchange: Exchange, response: Any, instance: Any, kwargs: dict[str, Any]
) -> bool:
    """Tap the response; True when the skeleton must then read the body for the caller."""
    wants_read = _wants_read(client, kwargs)
    caller_streams = client.stream_flag is not None and not wants_read
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
        if ACTIVE.get():
            return wrapped(*args, **kwargs)
        opts = options()
        exchange = _begin(client, opts, instance, args, kwargs)
        streamed = None
        if exchange is None:
            streamed = _begin_streamed(client, opts, instance, args, kwargs)
            if streamed is None:
                return wrapped(*args, **kwargs)
        try:
            with tracking():
                response = wrapped(*args, **_sent_kwargs(client, kwargs))
        except BaseException:
            exchange = exchange or _opened(streamed)
            if exchange is not None:
                exchange.close("send_failed")
            raise
        exchange = exchange or _opened(streamed)
        if exchange is None:  # the streamed body was not JSON-RPC after all
            if _wants_read(client, kwargs):
                client.read(response)
            return response
        if _attach(client, exchange, response, instance, kwargs):
            client.read(response)
        return response

    return send


def async_send(client: HttpClient, options: Callable[[], Options]) -> Wrapper:
    """:func:`sync_send` for a coroutine send."""

    async def send(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if ACTIVE.get():
            return await wrapped(*args, **kwargs)
        opts = options()
        exchange = _begin(client, opts, instance, args, kwargs)
        streamed = None
        if exchange is None:
            streamed = _begin_streamed(client, opts, instance, args, kwargs)
            if streamed is None:
                return await wrapped(*args, **kwargs)
        try:
            with tracking():
                response = await wrapped(*args, **_sent_kwargs(client, kwargs))
        except BaseException:
            exchange = exchange or _opened(streamed)
            if exchange is not None:
                exchange.close("send_failed")
            raise
        exchange = exchange or _opened(streamed)
        if exchange is None:  # the streamed body was not JSON-RPC after all
            if _wants_read(client, kwargs):
                await client.aread(response)
            return response
        if _attach(client, exchange, response, instance, kwargs):
            await client.aread(response)
        return response

    return send
