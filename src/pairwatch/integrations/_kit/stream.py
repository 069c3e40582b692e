"""The response side of every HTTP exchange: the body tap.

An HTTP integration shows every chunk the caller reads to a :class:`Tap` (the exchange
skeleton, :mod:`pairwatch.integrations._kit.exchange`, opened the channel it feeds).  The tap
never holds the caller's stream: it is handed copies of what the caller already got, so the
caller reads every byte unchanged and in time.  Event streams are parsed as they come
(:mod:`pairwatch.integrations._kit.sse`).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any, Final, NamedTuple

from pairwatch.channel import Channel
from pairwatch.integrations._kit import decoders as _decoders
from pairwatch.integrations._kit.body import MAX_BODY, UTF8, body_budget, charset_of, parse_body
from pairwatch.integrations._kit.sse import SseParser
from pairwatch.integrations._kit.watch import adopt, register, unwatch, watch_later
from pairwatch.pairing import wire
from pairwatch.runtime import guard

__all__ = ["MAX_BODY", "Tap", "plain_type", "reply_whole"]


class Seen(NamedTuple):
    """What a Content-Type says about the body it heads."""

    charset: str | None
    event_stream: bool
    as_bytes: bool  # parsed as the bytes it is: no charset, or a UTF-8 one


_CONTENT_TYPES: dict[str | None, Seen] = {}
"""A memo of :func:`seen`: a client reads the same few types.  Bounded: past 64 it starts
over.  Only a memo: every answer is the one :func:`seen` computes."""


def seen(content_type: str | None) -> Seen:
    """What ``content_type`` says about the body it heads."""
    try:
        found = _CONTENT_TYPES.get(content_type)
    except TypeError:  # not hashable: whatever a library passed, it is judged below
        found = None
    if found is not None:
        return found
    charset = charset_of(content_type)
    found = Seen(
        charset,
        bool(content_type) and "text/event-stream" in str(content_type).lower(),
        charset is None or charset in UTF8,
    )
    if content_type is None or type(content_type) is str:  # only these are kept
        if len(_CONTENT_TYPES) >= 64:
            _CONTENT_TYPES.clear()
        _CONTENT_TYPES[content_type] = found
    return found


class Tap:
    """Sees a copy of every chunk of one response body and keeps the channel's books.

    ``chunk`` receives bytes the caller already has, as decoded content; ``raw_chunk``
    receives bytes still carrying the ``Content-Encoding``, decoded here on a private
    ``decoder`` built from the client library's own decoders
    (:mod:`pairwatch.integrations._kit.decoders`; the standard library's gzip and deflate when
    none is given), never the caller's.  ``end`` marks the body complete, ``dropped`` a body
    cut short or abandoned.  JSON bodies are paired at their end, decoded with the charset
    the client reads them with; event streams per event.  Every method is shielded: a
    failure here is counted, never raised.

    ``elsewhere``: the response says the request is answered on another channel (202
    Accepted, or a redirect the caller follows with a new request).  Unless its body turns
    out to be JSON-RPC after all, the exchange is withdrawn: nothing is missing on it.
    ``read_timeout``: the client's own, restarted on every chunk; the books wait as long.
    """

    __slots__ = (
        "__weakref__",
        "_broken",
        "_buffer",
        "_channel",
        "_charset",
        "_content_type",
        "_decoder",
        "_done",
        "_elsewhere",
        "_flush",
        "_read_timeout",
        "_size",
        "_split",
        "_sse",
        "_watch",
    )

    def __init__(
        self,
        channel: Channel,
        content_type: str | None,
        encoding: str | None = None,
        *,
        batch_sent: bool = False,
        decoder: _decoders.Chosen | None = None,
        elsewhere: bool = False,
        read_timeout: float | None = None,
    ) -> None:
        self._channel = channel
        # A batch answered over SSE may come back one element per event (MCP's streamable
        # HTTP does this): each such event is one element of the batch reply, not a
        # single-object reply to a batch.
        self._split = batch_sent
        self._done = False
        self._broken = False  # the encoded body did not decode: the client cannot read it
        self._buffer: list[bytes] = []
        self._size = 0
        # No encoding: identity, whatever chose (or did not choose) the decoder.
        self._decoder = _decoders.stdlib(encoding) if decoder is None and encoding else decoder
        self._elsewhere = elsewhere
        self._flush = False
        self._read_timeout = _restarted(read_timeout)
        self._watch: weakref.ref[Any] | None = None
        self._content_type = content_type
        found = seen(content_type)
        self._charset = found.charset
        if found.event_stream:
            self._sse: SseParser | None = SseParser()
            channel.relabel("sse")
        else:
            self._sse = None

    @property
    def done(self) -> bool:
        return self._done

    def abandon_with(self, owner: object) -> None:
        """Close as ``stream_dropped`` if ``owner`` (the caller's response) is collected
        before its body ended, and let the sweeper apply the timeout meanwhile."""
        try:
            self._watch = watch = watch_later(owner, self)
            register(watch)
        except Exception as exc:
            self._fail("tap_watch", exc)

    def adopt_watch(self, watch: weakref.ref[Any]) -> None:
        """Take over a watch :func:`watch_later` set up for a stand-in of this tap (the
        :class:`~pairwatch.integrations._kit.tap_on_need.TapOnNeed` that built it)."""
        adopt(watch, self)
        self._watch = watch

    def held_channel(self) -> Channel | None:
        """The channel the sweeper expires while the caller holds this body open."""
        return self._channel

    def chunk(self, data: bytes | bytearray | memoryview) -> None:
        self._feed(data, None)

    def raw_chunk(self, data: bytes | bytearray | memoryview) -> None:
        """A chunk that still carries the response's Content-Encoding."""
        decoder = self._decoder
        if decoder is None or decoder is _decoders.UNSUPPORTED:
            self._feed(data, None)
        elif decoder is _decoders.UNBOUNDED:
            self._unchecked("encoding")  # no bounded decoder here: not decoded at all
        else:
            self._flush = True  # the decoder holds state: flush it at the end
            self._feed(data, decoder)  # type: ignore[arg-type]

    def last_raw_chunk(self, data: bytes | bytearray | memoryview) -> None:
        """:meth:`raw_chunk` then :meth:`end`; a last chunk that is the whole body and needs
        no decoding ends the exchange in one step (:func:`reply_whole`)."""
        decoder = self._decoder
        if self._done or self._size or self._sse is not None or self._elsewhere:
            pass
        elif decoder is None or decoder is _decoders.UNSUPPORTED:
            try:
                if reply_whole(self._channel, bytes(data), self._content_type, self._read_timeout):
                    self._stop()
                    return
            except Exception as exc:
                self._fail("tap_end", exc)
                return
        self.raw_chunk(data)
        self.end()

    def _feed(
        self, data: bytes | bytearray | memoryview, decoder: _decoders.Decoder | None
    ) -> None:
        # An encoding the client library does not decode reaches the caller undecoded;
        # pairwatch then reads the same undecoded bytes (decoder None).
        if self._done or self._broken or not data:
            return
        try:
            if self._read_timeout is not None:
                self._channel.postpone(self._read_timeout)
            if decoder is None:
                if self._charge(len(data)):
                    self._take(bytes(data))
            else:
                self._decode(bytes(data), decoder.decode)
        except Exception as exc:
            self._fail("tap_chunk", exc)

    def _decode(self, data: bytes, decode: Callable[[bytes, int], bytes]) -> None:
        """Decode a chunk a step at a time, each step's output charged before it is made:
        a small body that inflates without end costs one step, then the exchange is
        unchecked."""
        while not self._done:
            step = min(STEP, MAX_BODY - self._size) + 1  # a byte past the cap shows it passed
            if not _BODIES.take_all(step):
                self._unchecked("body_budget")
                return
            try:
                out = decode(data, step)
            except Exception:  # not in its Content-Encoding: a reply nobody can read
                self._broken = True
                self._release()
                return
            finally:
                _BODIES.release(step)
            data = b""
            if not out:
                return
            if self._charge(len(out)):
                self._take(out)

    def _charge(self, size: int) -> bool:
        """Charge ``size`` more held bytes to this body and the process budget, before they
        are held; past either, the exchange is unchecked."""
        if self._size + size > MAX_BODY:
            self._unchecked("body_cap")
            return False
        if not _BODIES.take_all(size):
            self._unchecked("body_budget")
            return False
        self._size += size
        return True

    def _take(self, data: bytes) -> None:
        """Hold ``data`` (already charged): buffered for a JSON body, parsed for a stream."""
        sse = self._sse
        if sse is None:
            self._buffer.append(data)
            return
        events = sse.feed(data)
        held = sse.held  # what the parser keeps now: the charge follows it down
        if held < self._size:
            _BODIES.release(self._size - held)
            self._size = held
        for event in events:
            payload, text = parse_body(event, None)  # SSE is UTF-8 by definition
            if self._split and not payload.is_batch and payload.unparseable is None:
                payload = wire.Payload(True, payload.messages)
            self._channel.received_parsed(payload, text)
        if sse.overflow:
            self._unchecked("body_cap")

    def end(self) -> None:
        """The body or stream ended normally: pair what is left and close the exchange."""
        if self._done:
            return
        try:
            if self._broken:
                self._channel.received_parsed(_UNDECODABLE)
                self._finish("stream_end" if self._sse is not None else "body_end")
                return
            if self._flush:
                try:
                    rest = self._decoder.flush()  # type: ignore[union-attr]
                except Exception:  # cut short inside the encoding
                    self._broken = True
                    self._release()
                    self.end()
                    return
                if rest and self._charge(len(rest)):
                    self._take(rest)
                if self._done:
                    return
            if self._sse is not None:
                self._finish("stream_end")
                return
            body = b"".join(self._buffer)
            self._release()
            self._pair(body)
        except Exception as exc:
            self._fail("tap_end", exc)

    def _pair(self, body: bytes) -> None:
        """Pair a complete body and close the exchange."""
        if not body and self._elsewhere:
            self._channel.withdraw()
        else:
            payload, text = parse_body(body, self._charset)
            if self._elsewhere and not wire.is_jsonrpc(text):
                self._channel.withdraw()
            else:
                self._channel.received_parsed(payload, text)
        self._finish("body_end")

    def dropped(self, reason: str = "stream_dropped") -> None:
        """The body was cut short, failed, or was closed before its end.

        Called from the tee's ``except`` clauses: raising here would replace the
        library's own exception, so it never does."""
        if self._done:
            return
        try:
            self._release()
            if self._elsewhere:
                self._channel.withdraw()  # answered elsewhere, whatever became of this body
            self._finish(reason)
        except Exception as exc:
            self._fail("tap_drop", exc)

    def __del__(self) -> None:
        # A tap dropped with its body half-buffered (nobody ended or dropped it) must not
        # keep its share of the process budget.
        if self._size:
            self._release()

    def _release(self) -> None:
        self._buffer = []
        size, self._size = self._size, 0
        _BODIES.release(size)

    def _stop(self) -> None:
        """Nothing more reaches the books, and the caller's response is watched no more."""
        self._done = True
        if self._watch is not None:
            unwatch(self._watch)
            self._watch = None

    def _finish(self, reason: str) -> None:
        self._stop()
        self._channel.close(reason)

    def _unchecked(self, reason: str) -> None:
        """Stop reading this body: its requests are counted unchecked, never missing."""
        self._release()
        self._stop()
        self._channel.unchecked(reason)

    def fail(self, kind: str, exc: BaseException) -> None:
        """Report ``exc`` and close the exchange: nothing more reaches the books."""
        self._fail(kind, exc)

    def _fail(self, kind: str, exc: BaseException) -> None:
        self._done = True
        guard.shielded("tap_release", self._release)
        guard.report(kind, exc, getattr(self._channel.telemetry, "internal_error", None))
        guard.shielded("tap_close", self._channel.close, "closed")


def plain_type(content_type: str | None) -> bool:
    """Whether a body of this Content-Type may be a plain reply (not an event stream)."""
    return not seen(content_type).event_stream


def reply_whole(
    channel: Channel, body: bytes, content_type: str | None, read_timeout: float | None
) -> bool:
    """End a bound exchange with a reply body received whole, when it is a plain reply: a
    body that is not an event stream, not empty, within the size limit and the budget.
    False for any other body, which a :class:`Tap` judges.

    The body is the client's (it holds these bytes), so the budget is consulted, not
    charged; the deadline moves by the client's ``read_timeout``, restarted with the last
    chunk (none when it waits forever).
    """
    found = plain_body(body, content_type)
    if found is None:
        return False
    payload, text = parse_body(body, found.charset)
    channel.replied_parsed(payload, text, _restarted(read_timeout), "body_end")
    return True


def _restarted(read_timeout: float | None) -> float | None:
    """How long the books wait after each chunk: the client's read timeout, which it restarts
    with every chunk; None when it waits forever (or its setting is unknown)."""
    return read_timeout if read_timeout is not None and math.isfinite(read_timeout) else None


def plain_body(body: bytes, content_type: str | None) -> Seen | None:
    """What the Content-Type of a whole body says, when the body is a plain reply (not an
    event stream, not empty, within the size limit and the budget); else None.  Its last
    member says whether the body is parsed as the bytes it is."""
    found = seen(content_type)
    size = len(body)
    if found.event_stream or not size or size > MAX_BODY or not _BODIES.fits(size):
        return None
    return found


_BODIES = body_budget()
"""The process's body budget, read here without a call per body (it is never replaced)."""

_UNDECODABLE: Final = wire.Payload(False, (), "undecodable")
"""A body that does not decode in its Content-Encoding: one unparseable reply."""

STEP: Final = 1 << 20
"""Bytes one decoding step may produce: the most a body costs beyond what it holds."""
