"""The parts of one HTTP exchange that every library shares: the request and its payload,
the exchange record and the tap it hands out, and what a response status says.

Split from the skeleton (:mod:`pairwatch.integrations._kit.exchange`, which says *when* each
step runs around a library's send method): this module says *what* an exchange is.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from opentelemetry import propagate, trace
from opentelemetry.context import Context

from pairwatch.channel import Channel, Options
from pairwatch.channel.parts import exchange_parts
from pairwatch.channel.sink import capture_for
from pairwatch.integrations._kit.decoders import Chosen
from pairwatch.integrations._kit.stream import MAX_BODY, Tap, reply_whole
from pairwatch.pairing import wire
from pairwatch.runtime import guard

__all__ = [
    "REDIRECTS",
    "Exchange",
    "Request",
    "Streamed",
    "answered_elsewhere",
    "decoded_payload",
    "host_of",
    "inject_context",
    "other_payload",
    "request_payload",
]


def host_of(url: object) -> str | None:
    """The host name of a URL object or string, or None; never raises."""
    return endpoint_of(url)[0]


def endpoint_of(url: object) -> Endpoint:
    """The host name and port of a URL object or string (the scheme's default port when the
    URL names none), or Nones; never raises."""
    try:
        if type(url) is str:  # no ``host`` to look for (looking costs an AttributeError)
            text = url
        else:
            host = getattr(url, "host", None)
            if isinstance(host, str):
                return (host or None), _port(getattr(url, "port", None), getattr(url, "scheme", ""))
            text = str(url)
        found: Endpoint = _HOSTS.get(text, _UNSEEN)
        if found is not _UNSEEN:
            return found
        if len(_HOSTS) >= 256:
            _HOSTS.clear()
        parts = urlsplit(text)
        found = _HOSTS[text] = (parts.hostname, _port(parts.port, parts.scheme))
        return found
    except Exception:
        return None, None


def _port(port: object, scheme: object) -> int | None:
    if isinstance(port, int) and not isinstance(port, bool):
        return port
    return _DEFAULT_PORTS.get(scheme) if isinstance(scheme, str) else None


Endpoint = tuple[str | None, int | None]
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_UNSEEN: Final[Any] = object()
_HOSTS: dict[str, Endpoint] = {}
"""URL text -> (host, port): a client posts to the same few URLs, and ``urlsplit`` costs
more than the rest of opening an exchange.  Bounded: past 256 URLs it starts over."""


def request_payload(body: object) -> wire.Payload | None:
    """Classify a request body when, and only when, it looks like JSON-RPC.

    A plain JSON-RPC body is recognised by the one typed decode that also classifies it;
    anything else goes to :func:`other_payload`.
    """
    plain = wire.parse_plain(body, wire.Kind.REQUEST)  # one decode for most traffic
    if plain is not None:
        return plain
    return other_payload(body)


def other_payload(body: object) -> wire.Payload | None:
    """:func:`request_payload` for a body the plain shape's decode has declined.

    It is sniffed first: a body without the word ``jsonrpc`` is rejected by one substring
    search, before any decoding, and parsed no further.
    """
    if not isinstance(body, (bytes, bytearray, memoryview, str)) or not wire.sniff(body):
        return None
    parsed = wire.parse(body)  # no hint: the plain shape was tried and did not fit
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


def inject_context(headers: Any, current: Context | None = None) -> None:
    """Add the current trace context to a request's headers (``Options(propagate=True)``),
    as OpenTelemetry's HTTP client instrumentations do, so the server's batch span joins
    this trace.

    Nothing is added without a current span, nor over a header the caller or another
    instrumentation set.  What pairwatch set on an earlier send of the same request object
    is its own: replaced by this send's context, so a request sent again under another span
    does not carry the first span's trace.
    """
    if current is not None and not current:
        return  # an empty context holds no span (what get_current_span would find out)
    if not trace.get_current_span(current).get_span_context().is_valid:
        return
    propagator = propagate.get_global_textmap()
    ours = _injected.get(id(headers))
    if ours is not None and ours[0]() is not headers:
        ours = None  # another object that took a collected one's id
    for field in propagator.fields:
        if field in headers and (ours is None or headers.get(field) != ours[1].get(field)):
            return  # the caller's own
    carrier: dict[str, str] = {}
    propagator.inject(carrier, context=current)
    for field in propagator.fields:
        if field not in carrier and ours is not None and field in ours[1]:
            del headers[field]  # ours from an earlier send, absent from this context
    for key, value in carrier.items():
        headers[key] = value
    slot = id(headers)
    try:
        ref = weakref.ref(headers, lambda _: _injected.pop(slot, None))
    except TypeError:  # not weakly referable: nothing remembered, an earlier value stays
        return
    if len(_injected) >= _MAX_INJECTED:
        _injected.clear()
    _injected[slot] = (ref, carrier)


_MAX_INJECTED: Final = 4096
_injected: dict[int, tuple[weakref.ref[Any], dict[str, str]]] = {}
"""Header objects pairwatch added trace context to, and what it added (held weakly: an entry
goes with its request).  Bounded: past the cap it starts over."""


REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})


def answered_elsewhere(status: object, location: object) -> bool:
    """Whether a response says the request is answered on another channel: 202 Accepted
    (the reply comes on a stream), or a redirect (the request is sent again)."""
    return status == 202 or (status in REDIRECTS and bool(location))


@dataclass(slots=True)  # not frozen: a frozen dataclass is built attribute by attribute
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
    headers: Any = None
    """The library's own mutable header mapping of this request, where trace context can be
    added (None where the library keeps none pairwatch may write to)."""
    host: str | None = None
    """The host of ``url``, when the integration has already looked it up."""
    port: int | None = None
    """Its port, with ``host``."""


class Exchange(Channel):
    """The bound channel of one tracked HTTP exchange, and the payload sent on it.

    Built from the parts its integration and address share (:mod:`pairwatch.channel.parts`): a
    client opens one per call.  Captured payloads are per exchange, so nothing is shared.
    """

    __slots__ = ("payload", "raw", "read_timeout")

    payload: wire.Payload
    raw: object
    read_timeout: float | None

    @classmethod
    def open(
        cls,
        payload: wire.Payload,
        options: Options,
        integration: str,
        host: str | None,
        raw: object = None,
        read_timeout: float | None = None,
        current: Context | None = None,
        port: int | None = None,
    ) -> Exchange:
        """Open one exchange and record what is being sent (``raw``, the body as sent, is
        read only when payload capture is on).

        ``read_timeout`` is the client's own (``math.inf`` when it waits forever); the batch
        waits that long instead of :attr:`Options.timeout`, so a long call the client still
        awaits is not counted missing.  None: the client's setting is unknown.  ``current``:
        the caller's OpenTelemetry context, when the integration has already read it.
        """
        parts = exchange_parts(options, integration, host or None, port if host else None)
        sink, capture = parts.sink, capture_for(options)
        if capture is not None:  # the exchange's own: so is the sink that holds it
            sink = sink.capturing(capture)
        exchange = cls.__new__(cls)  # built from the shared parts, not per exchange
        exchange._setup(options, parts.telemetry, parts.labels, parts.limits, True, capture, sink)
        exchange.payload = payload
        exchange.raw = raw
        exchange.read_timeout = read_timeout
        exchange.sent_parsed(payload, raw, read_timeout, current)
        return exchange

    def tap(
        self,
        content_type: str | None,
        encoding: str | None,
        *,
        decoder: Chosen | None = None,
        status: object = None,
        location: object = None,
        elsewhere: bool = False,
    ) -> Tap:
        """A tap for the response body; a batch sent may come back one element per event.

        ``decoder`` is built from the client library's own content decoders; without one,
        ``encoding`` gets the standard library's gzip and deflate.  ``elsewhere``, or a
        status and location that say so: the request is answered on another channel.
        """
        return Tap(
            self,
            content_type,
            encoding,
            batch_sent=self.payload.is_batch,
            decoder=decoder,
            elsewhere=elsewhere or answered_elsewhere(status, location),
            read_timeout=self.read_timeout,
        )

    def whole(self, body: bytes, content_type: str | None, elsewhere: bool) -> None:
        """A buffered response's whole body, read and decoded by the client that keeps it:
        a plain reply ends the exchange in one step (:func:`reply_whole`); any other body
        (an event stream, a redirect or 202, an empty or oversized one) goes through a tap,
        as if the client had read it in one chunk."""
        try:
            if elsewhere or not reply_whole(self, body, content_type, self.read_timeout):
                tap = self.tap(content_type, None, elsewhere=elsewhere)
                tap.chunk(body)
                tap.end()
        except Exception as exc:
            guard.report("tap_end", exc, self.telemetry.internal_error)
            self.close("closed")


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
