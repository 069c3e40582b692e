"""One span per batch with one child per request id, built at close from recorded times.

Spans are made after the fact, with the start and end times the ledger recorded, so nothing
here runs while a request is in flight.  They nest under whatever span was current when the
batch was sent (the channel keeps that context on the batch).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from pairwatch.otel.labels import Limiter
from pairwatch.otel.names import (
    CLOSE_REASON,
    DIAGNOSIS,
    JSONRPC_REQUEST_ID,
    OUTCOME,
    REQUEST_PAYLOAD,
    RESPONSE_PAYLOAD,
    RPC_METHOD,
    RPC_RESPONSE_STATUS_CODE,
    RPC_SYSTEM_NAME,
    SIDE,
)
from pairwatch.pairing.diagnosis import evidence
from pairwatch.pairing.records import Batch, Call

SpanAttributes = Callable[[Call], Mapping[str, AttributeValue] | None]
"""A channel's optional hook: extra attributes for one request's span, computed at close.

Integrations know things the wire does not (an MCP tool name, a protocol's own method
attribute); the hook lets them add those without telemetry knowing any protocol."""


class SpanWriter:
    """Writes a closed batch's spans through one tracer."""

    def __init__(
        self,
        tracer: trace.Tracer,
        on_error: Callable[[str], None],
        methods: Callable[[str | None], str] | None = None,
    ) -> None:
        self.tracer = tracer
        self.on_error = on_error
        # The metric label's limiter: span names and ``rpc.method`` follow the same cap and
        # overflow value, so a hostile server cannot make one span name per request either.
        self.methods = methods if methods is not None else Limiter()
        # Ledger clocks are monotonic; spans want wall time.
        self._epoch_offset_ns = time.time_ns() - time.monotonic_ns()

    def _ns(self, monotonic: float) -> int:
        return round(monotonic * 1e9) + self._epoch_offset_ns

    def write(
        self, batch: Batch, span_attributes: SpanAttributes | None = None, *, server: bool = False
    ) -> None:
        """One span for the batch and one child per request id, with recorded times.

        ``server`` marks the books of the server middleware: SERVER spans, so a trace that
        holds both views of one batch shows which end measured what."""
        parent = batch.context if isinstance(batch.context, Context) else None
        kind = SpanKind.SERVER if server else SpanKind.CLIENT
        root = self.tracer.start_span(
            "jsonrpc batch" if batch.is_batch else "jsonrpc request",
            context=parent,
            kind=kind,
            start_time=self._ns(batch.sent_at),
        )
        if not root.is_recording():
            root.end()
            return
        root.set_attributes(
            {
                RPC_SYSTEM_NAME: "jsonrpc",
                SIDE: "server" if server else "client",
                "jsonrpc.batch.size": batch.size,
                "jsonrpc.batch.requests": len(batch.keys),
                DIAGNOSIS: batch.diagnosis,
                CLOSE_REASON: batch.close_reason,
                "pairwatch.missing": batch.missing,
                "pairwatch.unknown_id": batch.unknown,
                "pairwatch.null_id": batch.null,
                "pairwatch.out_of_order": batch.out_of_order,
            }
        )
        ctx = trace.set_span_in_context(root)
        end = batch.sent_at
        for call in batch.calls:
            end = max(end, self._child(ctx, batch, call, span_attributes, kind))
        if batch.diagnosis != "ok":
            root.set_status(Status(StatusCode.ERROR, f"{batch.diagnosis}: {evidence(batch)}"))
        root.end(end_time=self._ns(end))

    def _child(
        self,
        ctx: Context,
        batch: Batch,
        call: Call,
        span_attributes: SpanAttributes | None,
        kind: SpanKind = SpanKind.CLIENT,
    ) -> float:
        method = self.methods(call.method) if call.method is not None else None
        span = self.tracer.start_span(
            method or "jsonrpc",
            context=ctx,
            kind=kind,
            start_time=self._ns(call.sent_at),
        )
        attrs: dict[str, AttributeValue] = {RPC_SYSTEM_NAME: "jsonrpc"}
        if method is not None:
            attrs[RPC_METHOD] = method
        if call.key is not None:
            attrs[JSONRPC_REQUEST_ID] = str(call.key)
        if call.error_code is not None:
            attrs[RPC_RESPONSE_STATUS_CODE] = str(call.error_code)
        if call.outcome == "missing":
            attrs[OUTCOME] = "missing"
            span.set_status(Status(StatusCode.ERROR, f"no response before {batch.close_reason}"))
            ended = batch.closed_at
        else:
            attrs[OUTCOME] = "duplicate" if call.duplicate else "paired"
            ended = call.received_at if call.received_at is not None else call.sent_at
            attrs["pairwatch.pair_latency"] = ended - call.sent_at
        if call.invalid:
            attrs["pairwatch.invalid_response"] = True
        if span_attributes is not None:
            try:
                extra = span_attributes(call)
            except Exception:  # an integration's hook must not cost the span or the metrics
                self.on_error("span_attributes")
                extra = None
            if extra:
                attrs.update(extra)
        if batch.captured is not None and call.index in batch.captured:
            request, response = batch.captured[call.index]
            if request is not None:
                attrs[REQUEST_PAYLOAD] = request
            if response is not None:
                attrs[RESPONSE_PAYLOAD] = response
        span.set_attributes(attrs)
        span.end(end_time=self._ns(ended))
        return ended
