"""The channel of one HTTP exchange: opened from parts looked up once, ended by its reply.

Why a subclass: an HTTP integration opens a bound channel per exchange and, for nearly every
exchange, closes it with one reply body received whole.  Both ends are on the path of every
call the client makes, so both are specialised here while :class:`~pairwatch.channel.Channel`
keeps the general meaning.  Opening takes the telemetry, labels, limits and sink that
:mod:`pairwatch.prepared` keeps per (options, integration, address); the whole reply is
postponed, paired and closed in one step, under one lock and at one clock reading, when the
exchange's quick batch (:mod:`pairwatch.pairing.quick`) pairs it.  Anything else takes the
general path, with the same results.
"""

from __future__ import annotations

from pairwatch import guard, switch
from pairwatch.channel import Channel
from pairwatch.options import Options
from pairwatch.pairing import wire
from pairwatch.pairing.quick import QuickBatch
from pairwatch.prepared import Parts, exchange_parts

__all__ = ["ExchangeChannel"]


class ExchangeChannel(Channel):
    """A bound, quick channel for one HTTP exchange."""

    __slots__ = ()

    @classmethod
    def exchange(
        cls, options: Options, integration: str, server_address: str | None
    ) -> ExchangeChannel:
        """The channel ``Channel(transport="http", integration=integration,
        server_address=server_address, bound=True, options=options, quick=True)`` would be,
        with its parts looked up once per (options, integration, address) instead of once
        per exchange."""
        if options.capture_payloads:  # captured exchanges keep a ledger: nothing to share
            return cls(
                transport="http", integration=integration, server_address=server_address,
                bound=True, options=options, quick=True,
            )  # fmt: skip
        return cls.holding(exchange_parts(options, integration, server_address), None)

    @classmethod
    def holding(
        cls, parts: Parts, quick: QuickBatch | None, closed: bool = False
    ) -> ExchangeChannel:
        """The channel built from ``parts`` with ``quick`` as its first batch, as
        :meth:`~pairwatch.channel.Channel.sent_parsed` would have left it: for an exchange
        whose channel is built only once something needs it
        (:class:`~pairwatch.integrations._request.Exchange`).  ``closed``: its reply
        paired whole and closed it already."""
        options, telemetry, labels, limits, policy, sink = parts
        channel = cls.__new__(cls)
        channel._setup(options, telemetry, labels, limits, policy, True, True, None, None, sink)
        channel._quick = quick
        channel._closed = closed
        return channel

    def replied_whole(
        self, payload: wire.Payload, raw: object, read_timeout: float | None, reason: str
    ) -> None:
        """:meth:`Channel.replied_whole` in one step, under one lock and at one clock reading,
        when the quick batch pairs the reply; the general path otherwise."""
        if self._quick is None or self._quick_lock is None or not switch.on:
            super().replied_whole(payload, raw, read_timeout, reason)
            return
        quick = paired = None
        now = 0.0
        try:
            with self._quick_lock:
                quick = self._quick
                now = self.options.clock()
                if quick is not None:
                    if read_timeout is not None:
                        quick.postpone(now, read_timeout)
                    if quick.pair(payload, now):
                        paired, self._quick, self._closed = quick, None, True
            if paired is not None:
                try:
                    self._sink.paired_whole(paired, reason, now)
                except Exception as exc:
                    guard.report("close", exc, self.telemetry.internal_error)
                return
            if quick is None:  # taken meanwhile (a sweep replayed it): the general path
                super().replied_whole(payload, raw, read_timeout, reason)
                return
        except Exception as exc:  # as received_parsed: reported, then closed
            guard.report("received", exc, self.telemetry.internal_error)
            self.close(reason)
            return
        self.declined(payload, raw, now, reason)

    def declined(self, payload: wire.Payload, raw: object, now: float, reason: str) -> None:
        """A whole reply the quick batch did not take (partial, reordered, late...): the
        ledger judges it at the very clock reading the quick batch was asked at, then the
        exchange closes with ``reason``."""
        try:
            self._to_ledger(payload, raw, now)
        except Exception as exc:  # as received_parsed: reported, then closed
            guard.report("received", exc, self.telemetry.internal_error)
        self.close(reason)
