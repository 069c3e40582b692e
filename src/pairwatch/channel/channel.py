"""The channel API: the three calls every integration, and any hand-written client, makes.

A channel is what responses come back on.  Integrations translate their library's send and
receive paths into :meth:`Channel.sent`, :meth:`Channel.received` and :meth:`Channel.close`;
the channel parses, keeps the books (:mod:`pairwatch.pairing.ledger`) and reports closed batches to
:mod:`pairwatch.otel.telemetry`.  Every call is shielded: nothing pairwatch does can raise into
the client that called it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from opentelemetry import context as otel_context

from pairwatch.channel.parts import prepared
from pairwatch.channel.sink import Sink, capture_for, telemetry_for
from pairwatch.options import Options
from pairwatch.otel.capture import Capture
from pairwatch.otel.labels import Labels
from pairwatch.otel.sdk.context import get_current
from pairwatch.otel.span_policy import SpanAttributes
from pairwatch.otel.telemetry import Telemetry
from pairwatch.pairing import wire
from pairwatch.pairing.ledger import Ledger
from pairwatch.pairing.limits import Limits
from pairwatch.pairing.records import Batch
from pairwatch.runtime import guard, sweeper, switch

CANCELLED = "notifications/cancelled"
"""MCP's cancellation, which any channel recognises in what the caller sends."""

SUBSCRIPTIONS = frozenset({"subscriptions/listen"})
"""Requests that stay open until their caller ends them (MCP 2026-07-28): a cancellation of
one ends a subscription (``subscription_ended``), it does not abandon a call."""

WITHDRAWALS = frozenset({"cancelled", "subscription_ended"})
"""Why a caller stops waiting that are its own decisions: withdrawn, never missing."""


def ended_by(exc: BaseException, otherwise: str) -> str:
    """The close reason of a call or read that raised ``exc``: ``cancelled`` when it is the
    caller's task being cancelled (asyncio, anyio on asyncio, trio), else ``otherwise``."""
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    kind = type(exc)
    if kind.__name__ == "Cancelled" and kind.__module__.startswith("trio"):
        return "cancelled"
    return otherwise


__all__ = ["Channel", "Options", "open_channel"]  # Options: re-exported, its home is options


class Channel:
    """One channel's public face: feed it what was sent and received, then close it.

    ``bound=True`` is for request/response exchanges (one HTTP POST and its body): every
    reply belongs to the batch sent on it.  Otherwise responses pair across all of the
    channel's open batches, as on a websocket or a stdio session.

    ``span_attributes`` (optional) adds an integration's own attributes to each request's
    span at close, e.g. the MCP tool name; telemetry stays protocol-agnostic.
    """

    __slots__ = (
        "__weakref__", "_bound", "_capture", "_closed", "_labels", "_limits", "_sink",
        "ledger", "options", "telemetry",
    )  # fmt: skip

    def __init__(
        self,
        *,
        transport: str = "generic",
        integration: str = "manual",
        server_address: str | None = None,
        bound: bool = False,
        options: Options | None = None,
        span_attributes: SpanAttributes | None = None,
        side: str = "client",
        server_port: int | None = None,
    ) -> None:
        options = options or Options()
        telemetry = telemetry_for(options)
        labels = telemetry.labels(transport, integration, server_address, side, server_port)
        capture = capture_for(options)
        limits, policy = prepared(options)
        sink = Sink(telemetry, labels, options.on_batch_closed, span_attributes, capture, policy)
        self._setup(options, telemetry, labels, limits, bound, capture, sink)
        if not bound:
            _watch(self)

    def _setup(
        self,
        options: Options,
        telemetry: Telemetry,
        labels: Labels,
        limits: Limits,
        bound: bool,
        capture: Capture | None,
        sink: Sink,
    ) -> None:
        self.options = options
        self.telemetry = telemetry
        self._labels = labels
        self._capture = capture
        self._sink = sink
        self._bound = bound
        self._limits = limits
        self._closed = False
        self.ledger = Ledger(sink, clock=options.clock, limits=limits, bound=bound)

    def sent(self, payload: object) -> Batch | None:
        """Record a payload the client is writing: bytes, str, or decoded JSON."""
        if not switch.on:  # pairwatch.disable(): nothing is recorded
            return None
        try:
            parsed = wire.parse(payload, wire.Kind.REQUEST)
        except Exception as exc:
            guard.report("sent", exc, self.telemetry.internal_error)
            return None
        return self.sent_parsed(parsed, payload)

    def sent_parsed(
        self,
        payload: wire.Payload,
        raw: object = None,
        timeout: float | None = None,
        parent: otel_context.Context | None = None,
    ) -> Batch | None:
        """Like :meth:`sent` for integrations that already classified the payload; ``raw``
        (the payload as sent) is only read when payload capture is on; ``timeout`` replaces
        :attr:`Options.timeout` for this batch (an HTTP client's own read timeout); ``parent``
        is the batch span's parent instead of the current context (the server middleware's
        propagated ``traceparent``)."""
        if not switch.on:  # pairwatch.disable(): nothing is recorded
            return None
        try:
            ctx = None
            if self.telemetry.spans:
                ctx = get_current() if parent is None else parent
            if self._capture is not None and raw is not None:
                self._capture.sent(raw)
            batch = self.ledger.sent(payload, ctx, timeout)
            if batch is not None and batch.rare is not None and batch.notifications:
                self._cancellations(payload, raw)
            return batch
        except Exception as exc:
            guard.report("sent", exc, self.telemetry.internal_error)
            return None

    def _cancellations(self, payload: wire.Payload, raw: object) -> None:
        """An MCP ``notifications/cancelled`` the caller sent withdraws the request it names
        (DESIGN: withdrawn is not missing); one sent because the client's own deadline
        passed ("timed out" in its reason) is that request's timeout instead."""
        if raw is None or not any(
            m[0] is wire.Kind.NOTIFICATION and m[3] == CANCELLED for m in payload.messages
        ):
            return
        decoded, problem = wire.decode(raw) if isinstance(raw, (bytes, str)) else (raw, None)
        if problem is not None:
            return
        for element in decoded if isinstance(decoded, list) else (decoded,):
            if not isinstance(element, dict) or element.get("method") != CANCELLED:
                continue
            params = element.get("params")
            if not isinstance(params, dict) or "requestId" not in params:
                continue
            _state, key = wire.id_key(params["requestId"])
            if key is None:
                continue
            why = params.get("reason")
            timed_out = isinstance(why, str) and ("timed out" in why or "timeout" in why)
            self.ledger.cancel(key, timed_out, SUBSCRIPTIONS)

    def withdraw_batch(self, batch: Batch, reason: str = "cancelled") -> None:
        """The caller withdrew ``batch`` (its call or task was cancelled): close it; what it
        still awaits counts in ``batch.withdrawn_request`` with ``reason``, not as missing."""
        try:
            self.ledger.close_batch(batch, "withdrawn", reason)
        except Exception as exc:
            guard.report("close", exc, self.telemetry.internal_error)

    def _switched_off(self) -> None:
        """A reply read, or an end reached, while pairwatch is off: what the open batches
        still await is withdrawn (``switched_off``), not missing."""
        guard.shielded(
            "switched_off",
            self.ledger.excuse_open,
            "withdrawn",
            "switched_off",
            count=self.telemetry.internal_error,
        )

    def postpone(self, timeout: float) -> None:
        """The exchange is still receiving: its open batches wait ``timeout`` more from now."""
        count = self.telemetry.internal_error
        guard.shielded("postpone", self.ledger.postpone, timeout, count=count)

    def withdraw(self) -> None:
        """Forget every open batch uncounted: a 202 or a redirect says its replies come on
        another channel (an MCP session's stream, the redirected exchange), counted there."""
        guard.shielded("withdraw", self.ledger.withdraw, count=self.telemetry.internal_error)

    def received(self, payload: object) -> None:
        """Record a payload the client read; every response in it is paired or counted."""
        if not switch.on:
            self._switched_off()
            return
        try:
            parsed = wire.parse(payload, wire.Kind.RESULT)
        except Exception as exc:
            guard.report("received", exc, self.telemetry.internal_error)
            return
        self.received_parsed(parsed, payload)

    def received_parsed(self, payload: wire.Payload, raw: object = None) -> None:
        if not switch.on:
            self._switched_off()
            return
        try:
            if self._capture is not None and raw is not None:
                self._capture.received(raw)  # before pairing: pairing may close the batch
            self.ledger.received(payload, self._shows_jsonrpc(raw))
        except Exception as exc:
            guard.report("received", exc, self.telemetry.internal_error)

    def _shows_jsonrpc(self, raw: object) -> bool | None:
        """Whether a raw reply is JSON-RPC at all, judged by its structure: only a held
        ``[]`` asks (None without the raw reply: its classified elements decide)."""
        return wire.is_jsonrpc(raw) if raw is not None and self.ledger.held is not None else None

    def replied(self, payload: object, reason: str = "body_end") -> None:
        """A bound exchange's reply, received whole: pair it, then close with ``reason``."""
        if not switch.on:
            self.close(reason)  # withdrawn: see close
            return
        try:
            parsed = wire.parse(payload, wire.Kind.RESULT)
        except Exception as exc:
            guard.report("received", exc, self.telemetry.internal_error)
            self.close(reason)
            return
        self.replied_parsed(parsed, payload, None, reason)

    def replied_parsed(
        self, payload: wire.Payload, raw: object, read_timeout: float | None, reason: str
    ) -> None:
        """:meth:`replied` for a classified reply: the deadlines move by the client's
        ``read_timeout`` (restarted with the last chunk), the reply is paired, and what is
        still open closes with ``reason``, in one step of the books (:meth:`Ledger.replied`)."""
        if not switch.on:
            self.close(reason)
            return
        try:
            if self._capture is not None and raw is not None:
                self._capture.received(raw)
            self._closed = True
            self.ledger.replied(payload, self._shows_jsonrpc(raw), read_timeout, reason)
        except Exception as exc:
            guard.report("received", exc, self.telemetry.internal_error)
            self.close(reason)

    def repaired(self, actions: Mapping[str, int], *, is_batch: bool = True) -> None:
        """Count the changes repair mode made to a reply read on this channel."""
        try:
            if actions:
                self.telemetry.repair(self._labels, is_batch, actions)
        except Exception as exc:
            guard.report("repaired", exc, self.telemetry.internal_error)

    def close(self, reason: str = "closed") -> None:
        """Close every open batch; what is still pending counts as missing with ``reason``
        (withdrawn, ``switched_off``, while pairwatch is off)."""
        try:
            self._closed = True
            if not switch.on:
                self._switched_off()
            if reason in WITHDRAWALS:
                self.ledger.close("withdrawn", reason)
            else:
                self.ledger.close(reason)
        except Exception as exc:
            guard.report("close", exc, self.telemetry.internal_error)

    def unchecked(self, reason: str) -> None:
        """Close every open batch unchecked: pairwatch could not read the reply (``reason``:
        ``body_cap``, ``body_budget``...).  What is pending counts in
        ``batch.unchecked_request``, never as missing; the caller is not affected."""
        try:
            self._closed = True
            self.ledger.close("unchecked", reason)
        except Exception as exc:
            guard.report("close", exc, self.telemetry.internal_error)

    def close_batch(self, batch: Batch, reason: str) -> None:
        """Close one batch (as returned by :meth:`sent`) whose caller stopped waiting.

        For integrations whose client library gives up on one request without the stream
        ending: its own read timeout, or an error it synthesized.  What is still pending
        counts as missing with ``reason``, except when the caller withdrew it (``cancelled``,
        ``subscription_ended``: :meth:`withdraw_batch`); a batch already closed is left alone.
        """
        if reason in WITHDRAWALS:
            self.withdraw_batch(batch, reason)
            return
        try:
            self.ledger.close_batch(batch, reason)
        except Exception as exc:
            guard.report("close", exc, self.telemetry.internal_error)

    def after_fork(self) -> None:
        """In a forked child: drop the inherited books unrecorded (the parent counts those
        requests; the child would count each again as missing) and their lock with them."""
        self.ledger.forget()  # a batch of them handed back later counts nowhere
        self.ledger = Ledger(
            self._sink, clock=self.options.clock, limits=self._limits, bound=self._bound
        )

    def expire(self) -> None:
        """Close the batches whose timeout has passed (the sweeper also does this)."""
        try:
            if not switch.on:
                self._switched_off()
            self.ledger.expire()
        except Exception as exc:
            guard.report("expire", exc, self.telemetry.internal_error)

    def relabel(
        self,
        transport: str,
        *,
        integration: str | None = None,
        server_address: str | None = None,
        server_port: int | None = None,
    ) -> None:
        """Change the channel's labels for what it reports from now on (open batches too).

        Some integrations learn a label only after the first request was recorded: an HTTP
        exchange learns that its reply is an event stream from the response headers, an MCP
        session learns its transport from the first message it receives.  Labels not given
        are kept.
        """
        try:
            old = self._sink.labels
            labels = self.telemetry.labels(
                transport,
                integration if integration is not None else old.integration,
                server_address if server_address is not None else old.address,
                old.side,
                server_port if server_address is not None else old.port,
            )
            # A copy: an exchange's sink is shared with the other exchanges of its parts.
            self._labels, self._sink = labels, self._sink.relabeled(labels)
            self.ledger.sink = self._sink
        except Exception as exc:
            guard.report("relabel", exc, self.telemetry.internal_error)

    def watch(self) -> None:
        """Let the sweeper expire this channel's batches even though it is bound.

        Bound exchanges normally close at body end; a streamed body the caller holds open
        without reading still has to time out.
        """
        _watch(self)

    @property
    def open_batches(self) -> int:
        """Batches still open on this channel (the sweeper drops channels with none)."""
        return self.ledger.open_batches

    @property
    def closed(self) -> bool:
        return self._closed


def open_channel(
    *,
    transport: str = "generic",
    integration: str = "manual",
    server_address: str | None = None,
    bound: bool = False,
    options: Options | None = None,
    span_attributes: SpanAttributes | None = None,
    side: str = "client",
    server_port: int | None = None,
    **settings: object,
) -> Channel:
    """Open a channel by hand, for clients that no integration covers.

    ``settings`` are :class:`Options` fields (``timeout=5.0``, ``meter_provider=...``).
    """
    if settings:
        base = options or Options()
        options = Options(**{**base.__dict__, **settings})
    return Channel(
        transport=transport,
        integration=integration,
        server_address=server_address,
        bound=bound,
        options=options,
        span_attributes=span_attributes,
        side=side,
        server_port=server_port,
    )


def _watch(channel: Channel) -> None:
    try:
        sweeper.watch(channel)
    except Exception as exc:  # e.g. no thread can be started: batches still close on use
        guard.report("watch", exc, channel.telemetry.internal_error)
