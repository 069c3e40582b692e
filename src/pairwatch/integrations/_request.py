"""The parts of one HTTP exchange that every library shares: the request and its payload,
the exchange record and the tap it hands out, and what a response status says.

Split from the skeleton (:mod:`pairwatch.integrations._exchange`, which re-exports these
names) so that each module has one job: this one says *what* an exchange is; the skeleton
says *when* each step runs around a library's send method.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from opentelemetry import propagate, trace
from opentelemetry.context import Context

from pairwatch import guard, switch
from pairwatch.channel import Channel, Options
from pairwatch.exchange_channel import ExchangeChannel
from pairwatch.integrations._decoders import Chosen
from pairwatch.integrations._stream import MAX_BODY, Tap, usual_reply
from pairwatch.otel.current import get_current
from pairwatch.pairing import wire
from pairwatch.pairing.limits import process_budget
from pairwatch.pairing.quick import QuickBatch
from pairwatch.prepared import Parts, exchange_parts

__all__ = [
    "REDIRECTS",
    "Exchange",
    "Request",
    "Streamed",
    "answered_elsewhere",
    "decoded_payload",
    "host_of",
    "inject_context",
    "open_exchange",
    "request_payload",
    "unusual_payload",
]


def host_of(url: object) -> str | None:
    """The host name of a URL object or string, or None; never raises."""
    try:
        if type(url) is str:  # no ``host`` to look for (looking costs an AttributeError)
            text = url
        else:
            host = getattr(url, "host", None)
            if isinstance(host, str):
                return host or None
            text = str(url)
        found: str | None = _HOSTS.get(text, _UNSEEN)
        if found is not _UNSEEN:
            return found
        if len(_HOSTS) >= 256:
            _HOSTS.clear()
        found = _HOSTS[text] = urlsplit(text).hostname
        return found
    except Exception:
        return None


_UNSEEN: Final[Any] = object()
_HOSTS: dict[str, str | None] = {}
"""URL text -> host: a client posts to the same few URLs, and ``urlsplit`` costs more than
the rest of opening an exchange.  Bounded: past 256 URLs it starts over."""


def request_payload(body: object) -> wire.Payload | None:
    """Classify a request body when, and only when, it looks like JSON-RPC.

    A healthy JSON-RPC body is recognised by the one typed decode that also classifies it;
    anything else goes to :func:`unusual_payload`.
    """
    healthy = wire.parse_healthy(body, wire.Kind.REQUEST)  # one decode for most traffic
    if healthy is not None:
        return healthy
    return unusual_payload(body)


def unusual_payload(body: object) -> wire.Payload | None:
    """:func:`request_payload` for a body the healthy shape's decode has declined.

    It is sniffed first: one character and one substring, so a body that is not JSON-RPC
    costs well under a microsecond more and is parsed no further.
    """
    if not isinstance(body, (bytes, bytearray, memoryview, str)) or not wire.sniff(body):
        return None
    parsed = wire.parse(body)  # no hint: the healthy shape was tried and did not fit
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


def open_exchange(
    payload: wire.Payload,
    options: Options,
    integration: str,
    host: str | None,
    raw: object = None,
    read_timeout: float | None = None,
    current: Context | None = None,
) -> Exchange:
    """Open one HTTP exchange and record what is being sent (``raw``, the body as sent, is
    read only when payload capture is on).

    ``read_timeout`` is the client's own (``math.inf`` when it waits forever); the batch
    waits that long instead of :attr:`Options.timeout`, so a long call the client still
    awaits is not counted missing.  None: the client's setting is unknown.  ``current``:
    the caller's OpenTelemetry context, when the integration has already read it.

    A healthy exchange is decided by its quick batch alone (:mod:`pairwatch.pairing.quick`):
    the batch is opened here, as :meth:`~pairwatch.channel.Channel.sent_parsed` would open
    it, and the bound channel that would hold it waits in :attr:`Exchange.channel` until
    anything but a reply that pairs whole happens.  Captured payloads, a switched-off
    pairwatch and a batch the ledger must keep from the start get their channel at once.
    """
    if options.capture_payloads or not switch.on:
        channel = ExchangeChannel.exchange(options, integration, host or None)
        channel.sent_parsed(payload, raw, read_timeout, current)
        return Exchange(channel, payload, read_timeout, raw)
    parts = exchange_parts(options, integration, host or None)
    try:
        ctx = None
        if parts[1].spans:
            ctx = get_current() if current is None else current
        now = options.clock()
        quick = QuickBatch.open(payload, now, ctx, read_timeout, parts[3], process_budget())
    except Exception as exc:  # as sent_parsed: reported, and nothing is recorded
        guard.report("sent", exc, parts[1].internal_error)
        return Exchange(ExchangeChannel.holding(parts, None), payload, read_timeout, raw)
    if quick is None:  # the ledger keeps this batch from the start
        channel = ExchangeChannel.holding(parts, None)
        channel.sent_parsed(payload, raw, read_timeout, current)
        return Exchange(channel, payload, read_timeout, raw)
    exchange = Exchange(None, payload, read_timeout, raw)
    exchange._parts, exchange._quick = parts, quick
    return exchange


def inject_context(headers: Any, current: Context | None = None) -> None:
    """Add the current trace context to a request's headers, as OpenTelemetry's HTTP client
    instrumentations do, so the server's batch span joins this trace.

    Nothing is added without a current span (an untraced request goes out unchanged), nor
    over a header the caller or another instrumentation already set.
    """
    if current is not None and not current:
        return  # an empty context holds no span (what get_current_span would find out)
    if not trace.get_current_span(current).get_span_context().is_valid:
        return
    propagator = propagate.get_global_textmap()
    if any(field in headers for field in propagator.fields):
        return
    propagator.inject(headers)


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


class Exchange:
    """One tracked HTTP exchange: the payload sent on it and its bound channel.

    Why the channel may be missing: almost every exchange is healthy, and its quick batch
    alone decides it.  An exchange from :func:`open_exchange` holds that batch and the
    parts its channel is built from; :attr:`channel` builds the channel, holding the batch
    as :meth:`~pairwatch.channel.Channel.sent_parsed` leaves it, the first time anything
    but a reply that pairs whole (:meth:`replied_whole`) happens.  One caller drives an
    exchange, and nothing else can reach a channel not yet built, so no lock is needed.
    """

    __slots__ = ("_channel", "_parts", "_quick", "payload", "raw", "read_timeout")

    def __init__(
        self,
        channel: Channel | None,
        payload: wire.Payload,
        read_timeout: float | None = None,
        raw: object = None,
    ) -> None:
        self._channel = channel
        self.payload = payload
        self.read_timeout = read_timeout
        self.raw = raw
        self._parts: Parts | None = None
        self._quick: QuickBatch | None = None

    @property
    def channel(self) -> Channel:
        channel = self._channel
        if channel is None:
            assert self._parts is not None
            quick, self._quick = self._quick, None
            # No quick batch left: its reply paired whole and closed the exchange.
            channel = self._channel = ExchangeChannel.holding(self._parts, quick, quick is None)
        return channel

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

    def whole(self, body: bytes, content_type: str | None, elsewhere: bool) -> None:
        """A buffered response's whole body, read and decoded by the client that keeps it:
        the usual reply (:func:`~pairwatch.integrations._stream.usual_reply`) goes to the
        books straight away, anything else to a tap shown :meth:`Tap.whole`."""
        try:
            usual = usual_reply(body, content_type, elsewhere)
            if usual is None:
                tap = Tap(
                    self.channel, content_type, batch_sent=self.payload.is_batch,
                    elsewhere=elsewhere, read_timeout=self.read_timeout,
                )  # fmt: skip
                tap.whole(body)
                return
            read_timeout = self.read_timeout
            if read_timeout is not None and not math.isfinite(read_timeout):
                read_timeout = None  # waits forever: nothing to postpone by
            self.replied_whole(usual[0], usual[1], read_timeout, "body_end")
        except Exception as exc:
            guard.report("tap_end", exc, self.internal_error())
            guard.shielded("tap_close", self._close, "closed")

    def replied_whole(
        self, payload: wire.Payload, raw: object, read_timeout: float | None, reason: str
    ) -> None:
        """:meth:`ExchangeChannel.replied_whole` for an exchange whose channel is not built:
        a reply that pairs whole closes it through the shared sink; anything else builds the
        channel, which judges the reply at the same clock reading."""
        quick = self._quick
        parts = self._parts
        if quick is None or parts is None or not switch.on:
            self.channel.replied_whole(payload, raw, read_timeout, reason)
            return
        try:
            now = parts[0].clock()
            if read_timeout is not None:
                quick.postpone(now, read_timeout)
        except Exception as exc:  # as ExchangeChannel.replied_whole: reported, then closed
            guard.report("received", exc, parts[1].internal_error)
            self.close(reason)
            return
        self.replied_at(payload, raw, now, reason)

    def replied_at(self, payload: wire.Payload, raw: object, now: float, reason: str) -> None:
        """:meth:`replied_whole` at a clock reading already taken, the quick batch already
        postponed by the client's read timeout."""
        quick, parts = self._quick, self._parts
        assert quick is not None
        assert parts is not None
        try:
            paired = quick.pair(payload, now)
        except Exception as exc:  # as ExchangeChannel.replied_whole: reported, then closed
            guard.report("received", exc, parts[1].internal_error)
            self.close(reason)
            return
        if not paired:
            channel = self.channel
            assert isinstance(channel, ExchangeChannel)
            channel.declined(payload, raw, now, reason)
            return
        self._quick = None
        try:
            parts[5].paired_whole(quick, reason, now)
        except Exception as exc:
            guard.report("close", exc, parts[1].internal_error)

    def close(self, reason: str) -> None:
        guard.shielded("close_" + reason, self._close, reason)

    def _close(self, reason: str) -> None:
        # The channel is built inside the shield: building it may be what fails.
        self.channel.close(reason)

    def internal_error(self) -> guard.ErrorCounter | None:
        """The exchange's internal-error counter, read without building its channel: a
        failure being reported may be that the channel cannot be built."""
        parts = self._parts
        if parts is not None:
            return parts[1].internal_error
        return getattr(getattr(self._channel, "telemetry", None), "internal_error", None)


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
