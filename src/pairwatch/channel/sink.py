"""Where a channel's closed batches go: the shared telemetry of its providers, the user's
``on_batch_closed`` hook, and one evidence line per diagnosis kind per minute in the log.

Each step is shielded on its own, so a broken meter, tracer, span processor or hook costs
only its own output, never the other batches closed by the same call, and never the client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from opentelemetry import metrics, trace

from pairwatch.options import Options
from pairwatch.otel import default_provider
from pairwatch.otel.capture import Capture
from pairwatch.otel.labels import Labels
from pairwatch.otel.shared import CACHE
from pairwatch.otel.span_policy import SpanAttributes, SpanPolicy
from pairwatch.otel.telemetry import Telemetry
from pairwatch.pairing import diagnosis
from pairwatch.pairing.records import Batch, Tally
from pairwatch.runtime import guard

__all__ = ["Sink", "telemetry_for"]


def capture_for(options: Options) -> Capture | None:
    """A channel's own payload capture, when ``options`` ask for one."""
    if not options.capture_payloads:
        return None
    return Capture(
        options.max_payload_bytes, options.redact, options.max_pending_ids, options.max_child_spans
    )


def telemetry_for(options: Options) -> Telemetry:
    """One set of instruments per provider pair, shared by every channel that uses it (a
    method cap per channel would be no cap), and forgotten with its providers."""
    meter_provider = default_provider.resolve(options.meter_provider)
    return CACHE.get(
        meter_provider,
        options.tracer_provider,
        options.method_cap,
        options.spans,
        lambda: _build_telemetry(options, meter_provider),
    )


def _build_telemetry(options: Options, meter_provider: object) -> Telemetry:
    """Instruments from the user's providers; when a provider raises, fall back to no-op
    ones (the tracer alone first, so metrics survive a broken tracer provider) rather than
    fail the client's call that opened the channel."""
    attempts: tuple[tuple[object, object], ...] = (
        (meter_provider, options.tracer_provider),
        (meter_provider, trace.NoOpTracerProvider()),
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


class Sink:
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

    def relabeled(self, labels: Labels) -> Sink:
        """This sink with other labels (sinks are shared, so never relabelled in place)."""
        return Sink(
            self.telemetry, labels, self.on_closed, self.span_attributes, self.capture, self.policy
        )

    def capturing(self, capture: Capture) -> Sink:
        """This sink with one channel's own payload capture (sinks are shared)."""
        return Sink(
            self.telemetry, self.labels, self.on_closed, self.span_attributes, capture, self.policy
        )

    def batch_closed(self, batch: Batch) -> None:
        """The one way a closed batch reaches telemetry, the user's hook and the log."""
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
        if batch.rare is not None and batch.diagnosis != diagnosis.OK:  # rare: see settle
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
