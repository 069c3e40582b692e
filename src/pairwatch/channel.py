"""The channel API: the three calls every integration, and any hand-written client, makes.

A channel is what responses come back on.  Integrations translate their library's send and
receive paths into :meth:`Channel.sent`, :meth:`Channel.received` and :meth:`Channel.close`;
the channel parses, keeps the books (:mod:`pairwatch.pairing.ledger`) and reports closed batches to
:mod:`pairwatch.otel.telemetry`.  Every call is shielded: nothing pairwatch does can raise into
the client that called it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace

from pairwatch import guard, sweeper, switch
from pairwatch.otel.capture import Capture
from pairwatch.otel.labels import Labels
from pairwatch.otel.names import INTEGRATION, SERVER_ADDRESS
from pairwatch.otel.shared import TelemetryCache
from pairwatch.otel.spans import SpanAttributes, SpanPolicy
from pairwatch.otel.telemetry import Telemetry
from pairwatch.pairing import diagnosis, wire
from pairwatch.pairing.ledger import Ledger, Limits
from pairwatch.pairing.records import Batch, Tally

__all__ = ["Channel", "Options", "open_channel"]


@dataclass(frozen=True)
class Options:
    """Settings shared by the channels of one instrumented client.

    ``timeout`` closes a batch whose responses have not all arrived; what is still pending
    then counts as missing.  The caps bound memory per channel; eviction counts as missing
    with close reason ``evicted``; on top of them, the ids of every open batch of the process
    share one budget (:func:`pairwatch.pairing.limits.process_budget`, 1,048,576 ids by
    default), evicted the same way.  ``late_ids`` and ``late_age`` bound the memory of ids
    that closed as missing by timeout, which lets a reply to one read as ``late_response``.

    ``on_batch_closed`` is called with every closed :class:`~pairwatch.pairing.records.Batch`, after
    its metrics are recorded, for callers that need per-batch detail the metrics cannot carry
    (which ids went missing, where in a capture the batch was sent): the offline audit uses
    it.  It runs on whatever thread closed the batch and is shielded like everything else:
    an exception in it is counted in ``pairwatch.internal_errors`` and never reaches the
    client.  Treat the batch as read-only.

    Payloads never leave the process unless ``capture_payloads`` is set: then each request
    and response, passed through ``redact`` (decoded message in, what may be recorded out)
    and cut to ``max_payload_bytes``, goes on its per-id span.

    ``method_timeouts`` gives named methods their own timeout (``{"eth_getLogs": 120}``); a
    batch waits as long as its slowest method allows.  An HTTP exchange does not use
    ``timeout``: it waits as long as its client's own read timeout, restarted on every chunk
    received (forever when the client has none, until the body ends or the response is
    dropped), so a long call the client still awaits is never counted missing.

    ``propagate``: HTTP integrations add the current span's ``traceparent`` to a request
    that has none, so a server running pairwatch's middleware joins the trace.

    Child spans stay within what an exporter can take: at most ``max_child_spans`` per batch
    (abnormal ids first, the rest counted on the batch span), or with ``child_spans=
    "abnormal"`` only for ids that went missing, were duplicated, got an error or an invalid
    reply, or took ``slow_span_seconds`` or longer.
    """

    timeout: float = 30.0
    max_open_batches: int = 1024
    max_pending_ids: int = 65536
    spans: bool = True
    method_cap: int = 32
    meter_provider: metrics.MeterProvider | None = None
    tracer_provider: trace.TracerProvider | None = None
    clock: Callable[[], float] = field(default=time.monotonic)
    repair: bool = False
    on_batch_closed: Callable[[Batch], None] | None = None
    capture_payloads: bool = False
    max_payload_bytes: int = 1024
    redact: Callable[[Any], Any] | None = None
    late_ids: int = 1024
    late_age: float = 300.0
    method_timeouts: Mapping[str, float] | None = None
    propagate: bool = True
    max_child_spans: int = 1024
    child_spans: str = "all"  # or "abnormal"
    slow_span_seconds: float = 1.0

    def span_policy(self) -> SpanPolicy:
        return SpanPolicy(
            self.max_child_spans, self.child_spans == "abnormal", self.slow_span_seconds
        )

    def limits(self) -> Limits:
        return Limits(
            self.timeout,
            self.max_open_batches,
            self.max_pending_ids,
            self.late_ids,
            self.late_age,
            self.method_timeouts,
        )


_telemetry: Final = TelemetryCache()


def telemetry_cache() -> TelemetryCache:
    """The process's one cache (for :mod:`pairwatch.forks`, which renews its locks)."""
    return _telemetry


def telemetry_for(options: Options) -> Telemetry:
    """One set of instruments per provider pair, shared by every channel that uses it (a
    method cap per channel would be no cap), and forgotten with its providers."""
    return _telemetry.get(
        options.meter_provider,
        options.tracer_provider,
        options.method_cap,
        options.spans,
        lambda: _build_telemetry(options),
    )


def _build_telemetry(options: Options) -> Telemetry:
    """Instruments from the user's providers; when a provider raises, fall back to no-op
    ones (the tracer alone first, so metrics survive a broken tracer provider) rather than
    fail the client's call that opened the channel."""
    attempts: tuple[tuple[object, object], ...] = (
        (options.meter_provider, options.tracer_provider),
        (options.meter_provider, trace.NoOpTracerProvider()),
        (metrics.NoOpMeterProvider(), trace.NoOpTracerProvider()),
    )
    failure: Exception | None = None
    for meter_provider, tracer_provider in attempts:
        try:
            found = Telemetry(
                meter_provider,  # type: ignore[arg-type]
                tracer_provider,  # type: ignore[arg-type]
                method_cap=options.method_cap,
                spans=options.spans,
            )
        except Exception as exc:
            failure = failure or exc
            continue
        if failure is not None:
            guard.report("telemetry_init", failure, found.internal_error)
        return found
    raise RuntimeError("no-op OpenTelemetry providers failed")  # pragma: no cover


class _Sink:
    """Adapts ledger events to telemetry, and logs each diagnosis kind once per minute."""

    __slots__ = ("capture", "labels", "on_closed", "policy", "span_attributes", "telemetry")

    def __init__(
        self,
        telemetry: Telemetry,
        labels: Labels,
        on_closed: Callable[[Batch], None] | None = None,
        span_attributes: SpanAttributes | None = None,
        capture: Capture | None = None,
        policy: SpanPolicy | None = None,
    ) -> None:
        self.policy = policy or SpanPolicy()
        self.telemetry = telemetry
        self.labels = labels
        self.on_closed = on_closed
        self.span_attributes = span_attributes
        self.capture = capture

    def batch_closed(self, batch: Batch) -> None:
        try:
            if self.capture is not None:
                self.capture.attach(batch)
            self.telemetry.batch_closed(self.labels, batch, self.span_attributes, self.policy)
        except Exception as exc:  # a broken meter, tracer or span processor
            # Caught per batch, so the other batches closed by the same call still report.
            guard.report("telemetry", exc, self.telemetry.internal_error)
        if self.on_closed is not None:
            # Shielded on its own so that a failing callback cannot skip the telemetry of
            # the other batches closed by the same event.
            try:
                self.on_closed(batch)
            except Exception as exc:
                guard.report("on_batch_closed", exc, self.telemetry.internal_error)
        if batch.diagnosis != diagnosis.OK:
            # The words state the evidence with numbers, never a guessed cause; the message
            # is built only when the rate limit lets the line through.
            guard.log_limited(
                logging.WARNING,
                "diagnosis:" + batch.diagnosis,
                "pairwatch: batch of %d requests closed (%s) as %s: %s",
                len(batch.keys),
                batch.close_reason,
                batch.diagnosis,
                _Words(diagnosis.evidence, batch),
            )

    def stray(self, batch: Batch | None, tally: Tally) -> None:
        try:
            self.telemetry.stray(self.labels, batch, tally)
        except Exception as exc:
            guard.report("telemetry", exc, self.telemetry.internal_error)
        if tally.late:
            # A late reply no open batch absorbed (alone on a stream, or after its exchange
            # closed): its batch was diagnosed when it timed out, so the words go here.
            guard.log_limited(
                logging.WARNING,
                "diagnosis:" + diagnosis.LATE_RESPONSE,
                "pairwatch: %s: %s",
                diagnosis.LATE_RESPONSE,
                _Words(diagnosis.tally_evidence, tally),
            )


class _Words:
    """Evidence words computed only if the log line is formatted, then kept as text.

    A handler that keeps records (a test's log capture, a memory handler) keeps their
    arguments: once formatted, this drops the batch so no closed books stay alive.
    """

    __slots__ = ("args", "say", "text")

    def __init__(self, say: Callable[..., str], *args: object) -> None:
        self.say: Callable[..., str] | None = say
        self.args: tuple[object, ...] = args
        self.text = ""

    def __str__(self) -> str:
        if self.say is not None:
            self.text = self.say(*self.args)
            self.say, self.args = None, ()
        return self.text


class Channel:
    """One channel's public face: feed it what was sent and received, then close it.

    ``bound=True`` is for request/response exchanges (one HTTP POST and its body): every
    reply belongs to the batch sent on it.  Otherwise responses pair across all of the
    channel's open batches, as on a websocket or a stdio session.

    ``span_attributes`` (optional) adds an integration's own attributes to each request's
    span at close, e.g. the MCP tool name; telemetry stays protocol-agnostic.
    """

    __slots__ = (
        "__weakref__", "_bound", "_capture", "_closed", "_labels", "_parse", "_sink", "ledger",
        "options", "telemetry",
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
    ) -> None:
        self.options = options = options or Options()
        self.telemetry = telemetry_for(options)
        self._labels = labels = self.telemetry.labels(transport, integration, server_address, side)
        self._capture = (
            Capture(options.max_payload_bytes, options.redact, options.max_pending_ids)
            if options.capture_payloads
            else None
        )
        self._sink = _Sink(
            self.telemetry,
            labels,
            options.on_batch_closed,
            span_attributes,
            self._capture,
            options.span_policy(),
        )
        self._bound = bound
        self.ledger = Ledger(self._sink, clock=options.clock, limits=options.limits(), bound=bound)
        self._parse = wire.parse
        self._closed = False
        if not bound:
            _watch(self)

    def sent(self, payload: object) -> Batch | None:
        """Record a payload the client is writing: bytes, str, or decoded JSON."""
        if not switch.on:  # pairwatch.disable(): nothing is recorded
            return None
        try:
            parsed = self._parse(payload, wire.Kind.REQUEST)
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
                ctx = otel_context.get_current() if parent is None else parent
            if self._capture is not None and raw is not None:
                self._capture.sent(raw)
            return self.ledger.sent(payload, ctx, timeout)
        except Exception as exc:
            guard.report("sent", exc, self.telemetry.internal_error)
            return None

    def postpone(self, timeout: float) -> None:
        """The exchange is still receiving: its open batches wait ``timeout`` more from now."""
        guard.shielded(
            "postpone", self.ledger.postpone, timeout, count=self.telemetry.internal_error
        )

    def withdraw(self) -> None:
        """Forget every open batch uncounted: a 202 or a redirect says its replies come on
        another channel (an MCP session's stream, the redirected exchange), counted there."""
        guard.shielded("withdraw", self.ledger.withdraw, count=self.telemetry.internal_error)

    def received(self, payload: object) -> None:
        """Record a payload the client read; every response in it is paired or counted."""
        if not switch.on:
            return
        try:
            parsed = self._parse(payload, wire.Kind.RESULT)
        except Exception as exc:
            guard.report("received", exc, self.telemetry.internal_error)
            return
        self.received_parsed(parsed, payload)

    def received_parsed(self, payload: wire.Payload, raw: object = None) -> None:
        if not switch.on:
            return
        try:
            if self._capture is not None and raw is not None:
                self._capture.received(raw)  # before pairing: pairing may close the batch
            # Only a held [] asks whether the reply is JSON-RPC at all (by structure).
            shows = wire.is_jsonrpc(raw) if raw is not None and self.ledger.holding else None
            self.ledger.received(payload, shows)
        except Exception as exc:
            guard.report("received", exc, self.telemetry.internal_error)

    def repaired(self, actions: Mapping[str, int], *, is_batch: bool = True) -> None:
        """Count the changes repair mode made to a reply read on this channel."""
        try:
            if actions:
                self.telemetry.repair(self._labels, is_batch, actions)
        except Exception as exc:
            guard.report("repaired", exc, self.telemetry.internal_error)

    def close(self, reason: str = "closed") -> None:
        """Close every open batch; what is still pending counts as missing with ``reason``."""
        try:
            self._closed = True
            self.ledger.close(reason)
        except Exception as exc:
            guard.report("close", exc, self.telemetry.internal_error)

    def close_batch(self, batch: Batch, reason: str) -> None:
        """Close one batch (as returned by :meth:`sent`) whose caller stopped waiting.

        For integrations whose client library gives up on one request without the stream
        ending: its own read timeout, or an error it synthesized.  What is still pending
        counts as missing with ``reason``; a batch already closed is left alone.
        """
        try:
            self.ledger.close_batch(batch, reason)
        except Exception as exc:
            guard.report("close", exc, self.telemetry.internal_error)

    def after_fork(self) -> None:
        """In a forked child: drop the inherited books unrecorded (the parent counts those
        requests; the child would count each again as missing) and their lock with them."""
        self.ledger = Ledger(
            self._sink, clock=self.options.clock, limits=self.options.limits(), bound=self._bound
        )

    def expire(self) -> None:
        """Close the batches whose timeout has passed (the sweeper also does this)."""
        try:
            self.ledger.expire()
        except Exception as exc:
            guard.report("expire", exc, self.telemetry.internal_error)

    def relabel(
        self, transport: str, *, integration: str | None = None, server_address: str | None = None
    ) -> None:
        """Change the channel's labels for what it reports from now on (open batches too).

        Some integrations learn a label only after the first request was recorded: an HTTP
        exchange learns that its reply is an event stream from the response headers, an MCP
        session learns its transport from the first message it receives.  Labels not given
        are kept.
        """
        try:
            old = self._sink.labels
            self._labels = self._sink.labels = self.telemetry.labels(
                transport,
                integration if integration is not None else old.base.get(INTEGRATION, "manual"),
                server_address if server_address is not None else old.base.get(SERVER_ADDRESS),
                old.side,
            )
        except Exception as exc:
            guard.report("relabel", exc, self.telemetry.internal_error)

    def watch(self) -> None:
        """Let the sweeper expire this channel's batches even though it is bound.

        Bound exchanges normally close at body end; a streamed body the caller holds open
        without reading still has to time out.
        """
        _watch(self)

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
    )


_sweeper = sweeper.SWEEPER  # its home was this module; tests still look here


def _watch(channel: Channel) -> None:
    try:
        sweeper.watch(channel)
    except Exception as exc:  # e.g. no thread can be started: batches still close on use
        guard.report("watch", exc, channel.telemetry.internal_error)
