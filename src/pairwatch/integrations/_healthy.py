"""A buffered exchange that stays healthy, kept in one tuple until its reply closes it.

Why: nearly every buffered exchange is healthy (a well-formed request with distinct ids, a
JSON reply that answers every id, in order and in time).  For those, the general steps (a
quick batch and an exchange record opened, the reply checked for the usual shape, paired,
then handed to the sink) are objects and Python calls around two list comparisons, and
they were most of what pairwatch added to a one-request call.

So the skeleton (:mod:`pairwatch.integrations._exchange`) first tries :func:`begin` on a
buffered call (and on every aiohttp call, whose body stand-in,
:class:`~pairwatch.integrations._tap_on_need.TapOnNeed`, holds what it returns).  It opens
the batch as :func:`~pairwatch.integrations._request.open_exchange` and
:meth:`~pairwatch.pairing.quick.QuickBatch.open` would (the same checks, the same budget
taken, the same deadline) and keeps what they would keep in a :class:`Begun`.  Once the body
has been read whole, :func:`reply_body` pairs it as
:meth:`~pairwatch.integrations._request.Exchange.whole` would and closes it as the sink
would (:meth:`~pairwatch.sink.Sink.paired_whole`): the sampler is asked once, and only a
recorded batch span gets a ``Batch``.  At the first thing that is not that (a redirect, a
202, a body that is not the usual JSON reply or does not pair, a hook that reads every
``Batch``), :func:`exchange` builds the very
:class:`~pairwatch.integrations._request.Exchange` the general path holds at that point,
and the general path goes on from there, so nothing is counted differently
(``tests/integrations/test_healthy_send.py`` runs each case both ways).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

from pairwatch import guard, switch
from pairwatch.channel import Options
from pairwatch.exchange_channel import ExchangeChannel
from pairwatch.integrations._request import Exchange, Request, open_exchange
from pairwatch.integrations._stream import usual
from pairwatch.otel.current import get_current
from pairwatch.pairing import wire
from pairwatch.pairing.limits import process_budget
from pairwatch.pairing.quick import QuickBatch
from pairwatch.prepared import Parts, exchange_parts

if TYPE_CHECKING:
    from opentelemetry.context import Context

__all__ = ["ENABLED", "Begun", "begin", "exchange", "reply_body"]

ENABLED = True
"""Off only in the tests that run the same exchanges through the general path."""

_REQUEST = wire.Kind.REQUEST
_RESULT = wire.Kind.RESULT
_new = tuple.__new__  # a NamedTuple's own __new__ is one more Python call per exchange
_PENDING = process_budget()  # never replaced (a fork resets it in place): no call per use


class Begun(NamedTuple):
    """What a healthy exchange's quick batch holds before its reply, and where it came from."""

    parts: Parts
    payload: wire.Payload
    plain: wire.Plain
    sent_at: float
    deadline: float
    context: Context | None
    read_timeout: float | None
    raw: object


def begin(
    integration: str,
    options: Options,
    payload: wire.Payload,
    request: Request,
    host: str | None,
    current: Context | None,
) -> Begun | Exchange:
    """Open a buffered exchange as :func:`open_exchange` would: a :class:`Begun` for a batch
    the quick books may keep, else the general path's :class:`Exchange`."""
    body, read_timeout = request.body, request.read_timeout
    plain = payload.plain
    if options.capture_payloads or not switch.on or plain is None:
        return open_exchange(payload, options, integration, host, body, read_timeout, current)
    parts = exchange_parts(options, integration, host)
    try:  # QuickBatch.open, keeping its fields in a Begun
        now = options.clock()
        deadline = QuickBatch.admit(payload, now, read_timeout, parts[3], _PENDING)
    except Exception as exc:  # as open_exchange: reported, and nothing is recorded
        guard.report("sent", exc, parts[1].internal_error)
        return Exchange(ExchangeChannel.holding(parts, None), payload, read_timeout, body)
    if deadline is None:  # the ledger keeps this batch from the start, as open_exchange
        channel = ExchangeChannel.holding(parts, None)
        channel.sent_parsed(payload, body, read_timeout, current)
        return Exchange(channel, payload, read_timeout, body)
    ctx = (get_current() if current is None else current) if parts[1].spans else None
    return _new(Begun, (parts, payload, plain, now, deadline, ctx, read_timeout, body))


def _quick(begun: Begun) -> QuickBatch:
    """The quick batch :meth:`QuickBatch.open` would have made (its budget already taken)."""
    return QuickBatch(
        begun.payload, begun.plain, begun.sent_at, begun.context, begun.read_timeout,
        begun.deadline, _PENDING,
    )  # fmt: skip


def exchange(begun: Begun) -> Exchange:
    """The exchange the general path holds for this batch, its reply not yet seen."""
    found = Exchange(None, begun.payload, begun.read_timeout, begun.raw)
    found._parts, found._quick = begun.parts, _quick(begun)
    return found


def reply_body(begun: Begun, body: bytes, content_type: str | None) -> Exchange | None:
    """A whole body answered here: a reply that pairs whole closes the batch (None); for any
    other body, the exchange to show it to the general path's way (``Exchange.whole``)."""
    if not switch.on:
        return exchange(begun)
    held: Exchange | None = None
    try:
        seen = usual(body, content_type)  # a body parsed as the bytes it is: seen[2]
        reply = wire.parse_healthy(body, _RESULT) if seen is not None and seen[2] else None
        if reply is None:
            return exchange(begun)
        parts = begun.parts
        now = parts[0].clock()
        # As Exchange.whole, then QuickBatch.postpone: a finite read timeout moves the
        # deadline to now + that timeout, never earlier.
        push = begun.read_timeout
        if push is not None and not math.isfinite(push):
            push = None  # waits forever: nothing to postpone by
        deadline = begun.deadline
        if push is not None and now + push > deadline:
            deadline = now + push
        payload = begun.payload
        sink = parts[5]
        try:
            closes_here = (
                QuickBatch.answers(payload, deadline, reply, now)
                and sink.on_closed is None
                and sink.capture is None
            )
        except Exception:  # the general step below meets the same failure and reports it
            closes_here = False
        if not closes_here:
            # The general path's own step, at this clock reading: the quick batch pairs or
            # declines it, and a Batch is built for whatever reads one.
            held = exchange(begun)
            quick = held._quick
            assert quick is not None
            if push is not None:
                quick.postpone(now, push)
            held.replied_at(reply, body, now, "body_end")
            return None
    except Exception as exc:  # as Exchange.whole: reported, then closed
        held = held or exchange(begun)
        guard.report("tap_end", exc, held.internal_error())
        guard.shielded("tap_close", held.close, "closed")
        return None
    try:  # as Sink.paired_whole: a recorded batch span needs the Batch, nothing else does
        # Sink.decide's own first check, made here: with spans off it is not called.
        decided = sink.decide(begun.context, payload.is_batch) if parts[1].spans else None
        if decided is not None:
            quick = _quick(begun)
            if push is not None:
                quick.postpone(now, push)
            quick.reply, quick.received_at = reply, now
            sink.paired_decided(quick, "body_end", now, decided)
            return None
        plain = begun.plain
        n = len(plain.keys)
        _PENDING.release(n)
        latency = now - begun.sent_at
        sink.healthy_closed(payload.is_batch, n, plain.methods or [], latency, "body_end")
    except Exception as exc:  # as Exchange.replied_at
        guard.report("close", exc, parts[1].internal_error)
    return None
