"""The channel API: the three calls every integration, and any hand-written client, makes.

A channel is what responses come back on.  Integrations translate their library's send and
receive paths into :meth:`Channel.sent`, :meth:`Channel.received` and :meth:`Channel.close`;
the channel parses, keeps the books (:mod:`pairwatch.ledger`) and reports closed batches to
:mod:`pairwatch.telemetry`.  Every call is shielded: nothing pairwatch does can raise into
the client that called it.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace

from pairwatch import diagnosis, guard, wire
from pairwatch.ledger import Ledger, Limits
from pairwatch.records import Batch, Tally
from pairwatch.telemetry import INTEGRATION, SERVER_ADDRESS, Labels, Telemetry

__all__ = ["Channel", "Options", "open_channel"]


@dataclass(frozen=True)
class Options:
    """Settings shared by the channels of one instrumented client.

    ``timeout`` closes a batch whose responses have not all arrived; what is still pending
    then counts as missing.  The caps bound memory per channel; eviction counts as missing
    with close reason ``evicted``.
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

    def limits(self) -> Limits:
        return Limits(self.timeout, self.max_open_batches, self.max_pending_ids)


_telemetry: dict[tuple[object, object, int, bool], Telemetry] = {}
_telemetry_lock = threading.Lock()


def telemetry_for(options: Options) -> Telemetry:
    """One set of instruments per provider pair, shared by every channel that uses it."""
    key = (
        id(options.meter_provider),
        id(options.tracer_provider),
        options.method_cap,
        options.spans,
    )
    found = _telemetry.get(key)
    if found is None:
        with _telemetry_lock:
            found = _telemetry.get(key)
            if found is None:
                found = Telemetry(
                    options.meter_provider,
                    options.tracer_provider,
                    method_cap=options.method_cap,
                    spans=options.spans,
                )
                _telemetry[key] = found
    return found


class _Sink:
    """Adapts ledger events to telemetry, and logs each diagnosis kind once per minute."""

    __slots__ = ("labels", "telemetry")

    def __init__(self, telemetry: Telemetry, labels: Labels) -> None:
        self.telemetry = telemetry
        self.labels = labels

    def batch_closed(self, batch: Batch) -> None:
        self.telemetry.batch_closed(self.labels, batch)
        if batch.diagnosis != diagnosis.OK:
            guard.log_limited(
                logging.WARNING,
                "diagnosis:" + batch.diagnosis,
                "pairwatch: batch of %d requests closed (%s): %d missing, %d unknown-id, "
                "%d null-id: %s",
                len(batch.keys),
                batch.close_reason,
                batch.missing,
                batch.unknown,
                batch.null,
                diagnosis.EXPLANATION[batch.diagnosis],
            )

    def stray(self, batch: Batch | None, tally: Tally) -> None:
        self.telemetry.stray(self.labels, batch, tally)


class Channel:
    """One channel's public face: feed it what was sent and received, then close it.

    ``bound=True`` is for request/response exchanges (one HTTP POST and its body): every
    reply belongs to the batch sent on it.  Otherwise responses pair across all of the
    channel's open batches, as on a websocket or a stdio session.
    """

    __slots__ = ("__weakref__", "_closed", "_parse", "ledger", "options", "telemetry")

    def __init__(
        self,
        *,
        transport: str = "generic",
        integration: str = "manual",
        server_address: str | None = None,
        bound: bool = False,
        options: Options | None = None,
    ) -> None:
        self.options = options = options or Options()
        self.telemetry = telemetry_for(options)
        labels = self.telemetry.labels(transport, integration, server_address)
        self.ledger = Ledger(
            _Sink(self.telemetry, labels), clock=options.clock, limits=options.limits(), bound=bound
        )
        self._parse = wire.parse
        self._closed = False
        if not bound:
            _sweeper.watch(self)

    def sent(self, payload: object) -> Batch | None:
        """Record a payload the client is writing: bytes, str, or decoded JSON."""
        try:
            ctx = otel_context.get_current() if self.telemetry.spans else None
            return self.ledger.sent(self._parse(payload), ctx)
        except Exception as exc:
            guard.report("sent", exc, self.telemetry.internal_error)
            return None

    def sent_parsed(self, payload: wire.Payload) -> Batch | None:
        """Like :meth:`sent` for integrations that already classified the payload."""
        try:
            ctx = otel_context.get_current() if self.telemetry.spans else None
            return self.ledger.sent(payload, ctx)
        except Exception as exc:
            guard.report("sent", exc, self.telemetry.internal_error)
            return None

    def received(self, payload: object) -> None:
        """Record a payload the client read; every response in it is paired or counted."""
        try:
            self.ledger.received(self._parse(payload))
        except Exception as exc:
            guard.report("received", exc, self.telemetry.internal_error)

    def received_parsed(self, payload: wire.Payload) -> None:
        try:
            self.ledger.received(payload)
        except Exception as exc:
            guard.report("received", exc, self.telemetry.internal_error)

    def close(self, reason: str = "closed") -> None:
        """Close every open batch; what is still pending counts as missing with ``reason``."""
        try:
            self._closed = True
            self.ledger.close(reason)
        except Exception as exc:
            guard.report("close", exc, self.telemetry.internal_error)

    def expire(self) -> None:
        """Close the batches whose timeout has passed (the sweeper also does this)."""
        try:
            self.ledger.expire()
        except Exception as exc:
            guard.report("expire", exc, self.telemetry.internal_error)

    def relabel(self, transport: str) -> None:
        """Change the transport label of what this channel reports from now on.

        An HTTP exchange learns whether its reply is an event stream only from the response
        headers, after the request was recorded; batches still open report the new label.
        """
        try:
            sink = self.ledger.sink
            if isinstance(sink, _Sink):
                old = sink.labels
                integration = old.base.get(INTEGRATION, "manual")
                sink.labels = self.telemetry.labels(
                    transport, integration, old.base.get(SERVER_ADDRESS)
                )
        except Exception as exc:
            guard.report("relabel", exc, self.telemetry.internal_error)

    def watch(self) -> None:
        """Let the sweeper expire this channel's batches even though it is bound.

        Bound exchanges normally close at body end; a streamed body the caller holds open
        without reading still has to time out.
        """
        _sweeper.watch(self)

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
    )


class _Sweeper:
    """Closes timed-out batches of idle stream channels, so a hung call still counts.

    A daemon thread wakes once a second and asks each live channel to expire; channels are
    held weakly so the sweeper never keeps a client alive.
    """

    interval = 1.0

    def __init__(self) -> None:
        self._channels: weakref.WeakSet[Channel] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, channel: Channel) -> None:
        with self._lock:
            self._channels.add(channel)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="pairwatch-sweeper", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            with self._lock:
                channels = list(self._channels)
            for channel in channels:
                if channel.ledger.open_batches:
                    channel.expire()


_sweeper = _Sweeper()
