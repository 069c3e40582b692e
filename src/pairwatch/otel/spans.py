"""One span per batch with one child per request id, built at close from recorded times.

Spans are made after the fact, with the start and end times the ledger recorded, so nothing
here runs while a request is in flight.  They nest under whatever span was current when the
batch was sent (the channel keeps that context on the batch).

The batch span asks the sampler; children follow its decision.  With the SDK's own tracer
and processors, children are handed over finished (:mod:`pairwatch.otel.span_fast`).  A
:class:`SpanPolicy` keeps them within what an exporter can take: at most ``max_children``
per batch (abnormal ids first; the rest counted on the batch span), or only abnormal ids.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import cast

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from pairwatch.otel import root_fast, span_fast
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
from pairwatch.otel.span_policy import DEFAULT_POLICY, SpanAttributes, SpanPolicy
from pairwatch.pairing.diagnosis import evidence
from pairwatch.pairing.records import Batch, Call

PAIR_LATENCY = "pairwatch.pair_latency"


class SpanWriter:
    """Writes a closed batch's spans through one tracer."""

    def __init__(
        self,
        tracer: trace.Tracer,
        on_error: Callable[[str], None],
        methods: Callable[[str | None], str] | None = None,
    ) -> None:
        self.tracer = tracer
        # A tracer from the API's proxy provider (instrumented before the application set
        # its provider) is swapped for the real tracer once there is one: behind the proxy,
        # the SDK's tracer is out of sight and every span would take the slow path.
        self._proxy = type(tracer) is trace.ProxyTracer
        self.on_error = on_error
        # The metric label's limiter: span names and ``rpc.method`` follow the same cap and
        # overflow value, so a hostile server cannot make one span name per request either.
        self.methods = methods if methods is not None else Limiter()
        # Ledger clocks are monotonic; spans want wall time.
        self._epoch_offset_ns = time.time_ns() - time.monotonic_ns()
        self._children: span_fast.ChildFactory | None = None
        self._root_spans: root_fast.RootSpans | None = None

    def _ns(self, monotonic: float) -> int:
        return round(monotonic * 1e9) + self._epoch_offset_ns

    def _resolve(self) -> None:
        """Follow the proxy to the provider set since (what the proxy itself would do)."""
        real = getattr(self.tracer, "_tracer", None)  # the API's proxy property
        if real is None:
            self._proxy = False  # another API's proxy: keep it
        elif type(real) is not trace.NoOpTracer:  # a provider is set: for good
            self.tracer, self._proxy = real, False
            self._children = self._root_spans = None

    def _dropped(self) -> bool:
        """The batch span cannot be recorded: the tracer is the API's no-op one."""
        if self._proxy:
            self._resolve()
            if self._proxy:  # still no provider: the proxy hands out non-recording spans
                return True
        return type(self.tracer) is trace.NoOpTracer

    def write(
        self,
        batch: Batch,
        span_attributes: SpanAttributes | None = None,
        policy: SpanPolicy = DEFAULT_POLICY,
        *,
        server: bool = False,
    ) -> Context | None:
        """One span for the batch and a child per chosen request id, with recorded times.

        Returns the batch span's context when it is sampled, so that the batch's latencies
        can be recorded in it (exemplars link a histogram bucket to this trace).  ``server``
        marks the books of the server middleware: SERVER spans, so a trace that holds both
        views of one batch shows which end measured what.
        """
        if self._dropped():
            return None
        kind = SpanKind.SERVER if server else SpanKind.CLIENT
        parent = batch.context if isinstance(batch.context, Context) else None
        name = "jsonrpc batch" if batch.is_batch else "jsonrpc request"
        start_ns = self._ns(batch.sent_at)
        roots = self._roots()
        root: trace.Span | None = None
        decided: root_fast.Decided | None = None
        if roots is not None:  # decided by the sampler, built finished (root_fast)
            decided = roots.decide(parent, name, kind)
            if decided is None:
                return None
            root_context = decided.context
        else:
            root = self.tracer.start_span(name, context=parent, kind=kind, start_time=start_ns)
            if not root.is_recording():
                root.end()
                return None
            root_context = root.get_span_context()
        n = len(batch.keys)
        everyone = policy.takes_all(n)
        chosen = [] if everyone else policy.choose(batch.calls)
        attributes: dict[str, AttributeValue] = {
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
        if not everyone and len(chosen) != n:
            attributes["pairwatch.child_spans.omitted"] = n - len(chosen)
        if root is not None:
            root.set_attributes(attributes)
        children: span_fast.ChildFactory | None = None
        if root_context.trace_flags.sampled and (
            roots is not None or span_fast.usable(self.tracer)
        ):
            children = self._factory()
        ctx = trace.set_span_in_context(
            root if root is not None else NonRecordingSpan(root_context)
        )
        if everyone and children is not None and span_attributes is None and not batch.captured:
            self._plain_children(root_context, children, batch, kind)
        else:
            for call in batch.calls if everyone else chosen:
                self._child(ctx, root_context, children, batch, call, span_attributes, kind)
        end = batch.sent_at
        if batch.missing and batch.closed_at is not None:
            end = max(end, batch.closed_at)
        received = [r for r in batch.received if r is not None]
        if received:
            end = max(end, max(received))
        status = None
        if batch.diagnosis != "ok":
            status = Status(StatusCode.ERROR, f"{batch.diagnosis}: {evidence(batch)}")
        if decided is not None and roots is not None:
            roots.end(decided, name, kind, attributes, status, start_ns, self._ns(end))
        elif root is not None:
            if status is not None:
                root.set_status(status)
            root.end(end_time=self._ns(end))
        return ctx if root_context.trace_flags.sampled else None

    def _factory(self) -> span_fast.ChildFactory:
        children = self._children
        if children is None:
            children = self._children = span_fast.ChildFactory(self.tracer)
        return children

    def _roots(self) -> root_fast.RootSpans | None:
        """The finished-span path for batch spans, when it gives what start_span gives."""
        if not span_fast.usable(self.tracer) or not root_fast.available():
            return None
        roots = self._root_spans
        if roots is None:
            roots = self._root_spans = root_fast.RootSpans(self.tracer, self._factory())
        return roots

    def _plain_children(
        self,
        parent: trace.SpanContext,
        children: span_fast.ChildFactory,
        batch: Batch,
        kind: SpanKind = SpanKind.CLIENT,
    ) -> None:
        """:meth:`_child` for every id, read from the batch's columns without a view object
        per request: the same names, attributes, status and times, for the common case (no
        integration hook, no captured payloads).  The children are handed over together."""
        # Span names and rpc.method go through the limiter in send order, once per method.
        named: dict[str | None, str | None] = dict.fromkeys(batch.methods)
        limit, kept = self.methods, True
        for method in named:
            if method is not None:
                limited = named[method] = limit(method)
                kept = kept and limited is method
        methods = batch.methods if kept else list(map(named.__getitem__, batch.methods))
        keys, received = batch.keys, batch.received
        errors = batch.error_codes or {}
        invalid = batch.invalid_at or ()
        duplicate = batch.duplicate_at or ()
        sent_at = batch.sent_at
        start_ns = self._ns(sent_at)
        attributes: list[dict[str, AttributeValue]] = []
        ends: list[int] = []
        add, end = attributes.append, ends.append
        if not (errors or invalid or duplicate) and None not in named and None not in keys:
            # Every id has a method and an id, and nothing is abnormal: answered ids have the
            # same five attributes but the id, so one set per method and reply time is
            # copied.  An unanswered id (None) leaves this loop for the general one below.
            answered = cast("Sequence[float]", received)
            spans_named = cast("list[str]", methods)
            template: dict[str, AttributeValue] = {}
            last: str | None = None  # the method and reply time of the template
            at, ns = sent_at, start_ns
            texts = map(str, keys)
            for method, text, received_at in zip(spans_named, texts, answered, strict=True):
                if method is not last or received_at != at:
                    if received_at is None:
                        break
                    last, at, ns = method, received_at, self._ns(received_at)
                    template = {
                        RPC_SYSTEM_NAME: "jsonrpc",
                        RPC_METHOD: method,
                        JSONRPC_REQUEST_ID: "",
                        OUTCOME: "paired",
                        PAIR_LATENCY: at - sent_at,
                    }
                attrs = template.copy()
                attrs[JSONRPC_REQUEST_ID] = text
                add(attrs)
                end(ns)
            else:
                if "" in named:  # an empty method names its span "jsonrpc", as below
                    spans_named = [m or "jsonrpc" for m in spans_named]
                children.end_all(parent, kind, spans_named, attributes, start_ns, ends, widest=5)
                return
            attributes.clear()
            ends.clear()
        statuses: list[Status] = []
        missing_status: Status | None = None
        last_at, last_ns = sent_at, start_ns
        for index, (key, label, replied) in enumerate(zip(keys, methods, received, strict=True)):
            attrs = {RPC_SYSTEM_NAME: "jsonrpc"}
            if label is not None:
                attrs[RPC_METHOD] = label
            if key is not None:
                attrs[JSONRPC_REQUEST_ID] = str(key)
            code = errors.get(index) if errors else None
            if code is not None:
                attrs[RPC_RESPONSE_STATUS_CODE] = str(code)
            status = span_fast.UNSET
            if replied is None:
                attrs[OUTCOME] = "missing"
                if missing_status is None:
                    missing_status = Status(
                        StatusCode.ERROR, f"no response before {batch.close_reason}"
                    )
                status = missing_status
                ended = batch.closed_at
            else:
                attrs[OUTCOME] = "duplicate" if index in duplicate else "paired"
                ended = replied
                attrs[PAIR_LATENCY] = ended - sent_at
            if index in invalid:
                attrs["pairwatch.invalid_response"] = True
            if ended != last_at:  # one body answers many ids: convert its time once
                last_at, last_ns = ended, self._ns(ended)
            add(attrs)
            end(last_ns)
            statuses.append(status)
        names = [m or "jsonrpc" for m in methods]
        children.end_all(parent, kind, names, attributes, start_ns, ends, statuses, widest=7)

    def _child(
        self,
        ctx: Context,
        root_context: trace.SpanContext,
        children: span_fast.ChildFactory | None,
        batch: Batch,
        call: Call,
        span_attributes: SpanAttributes | None,
        kind: SpanKind = SpanKind.CLIENT,
    ) -> None:
        method = self.methods(call.method) if call.method is not None else None
        attrs: dict[str, AttributeValue] = {RPC_SYSTEM_NAME: "jsonrpc"}
        if method is not None:
            attrs[RPC_METHOD] = method
        if call.key is not None:
            attrs[JSONRPC_REQUEST_ID] = str(call.key)
        if call.error_code is not None:
            attrs[RPC_RESPONSE_STATUS_CODE] = str(call.error_code)
        status: Status | None = None
        if call.outcome == "missing":
            attrs[OUTCOME] = "missing"
            status = Status(StatusCode.ERROR, f"no response before {batch.close_reason}")
            ended = batch.closed_at if batch.closed_at is not None else call.sent_at
        else:
            attrs[OUTCOME] = "duplicate" if call.duplicate else "paired"
            ended = call.received_at if call.received_at is not None else call.sent_at
            attrs[PAIR_LATENCY] = ended - call.sent_at
        if call.invalid:
            attrs["pairwatch.invalid_response"] = True
        cleaned = True
        if span_attributes is not None:
            try:
                extra = span_attributes(call)
            except Exception:  # an integration's hook must not cost the span or the metrics
                self.on_error("span_attributes")
                extra = None
            if extra:
                attrs.update(extra)
                cleaned = False
        if batch.captured is not None and call.index in batch.captured:
            request, response = batch.captured[call.index]
            if request is not None:
                attrs[REQUEST_PAYLOAD] = request
            if response is not None:
                attrs[RESPONSE_PAYLOAD] = response
        name = method or "jsonrpc"
        if children is not None:
            children.end(
                root_context,
                name,
                attrs,
                self._ns(call.sent_at),
                self._ns(ended),
                status,
                cleaned,
                kind,
            )
            return
        span = self.tracer.start_span(
            name, context=ctx, kind=kind, start_time=self._ns(call.sent_at)
        )
        if status is not None:
            span.set_status(status)
        span.set_attributes(attrs)
        span.end(end_time=self._ns(ended))
