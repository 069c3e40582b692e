"""One span per batch with one child per request id, built at close from recorded times.

Spans are made after the fact, with the start and end times the books recorded, so nothing
here runs while a request is in flight.  They nest under whatever span was current when the
batch was sent (the channel keeps that context on the batch).

The batch span asks the sampler; children follow its decision.  Built through the public
API, or, where the SDK's shortcut is on (:mod:`pairwatch.otel.sdk.spans`), decided and
handed to the processors finished: the same spans either way.  A :class:`SpanPolicy` keeps
them within what an exporter can take: at most ``max_children`` per batch (abnormal ids
first; the rest counted on the batch span), or only abnormal ids.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanKind, Status, StatusCode
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
from pairwatch.otel.sdk import spans as shortcut
from pairwatch.otel.span_policy import DEFAULT_POLICY, Details, SpanAttributes, SpanPolicy
from pairwatch.pairing.diagnosis import evidence
from pairwatch.pairing.records import Batch, Call

PAIR_LATENCY = "pairwatch.pair_latency"
UNSET = shortcut.UNSET

Children = tuple[list[str], list[dict[str, AttributeValue]], list[int], list[Status], bool]
"""A batch's child spans as columns: names, attributes, end times (ns), statuses, and
whether every attribute value is pairwatch's own (a str, int, float or bool)."""


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
        # its provider) is swapped for the real tracer once there is one.
        self._proxy = type(tracer) is trace.ProxyTracer
        self.on_error = on_error
        # The metric label's limiter: span names and ``rpc.method`` follow the same cap and
        # overflow value, so a hostile server cannot make one span name per request either.
        self.methods = methods if methods is not None else Limiter()
        # Book clocks are monotonic; spans want wall time.
        self._epoch_offset_ns = time.time_ns() - time.monotonic_ns()
        self._shortcuts: tuple[shortcut.ChildFactory | None, shortcut.RootSpans | None] | None = (
            None
        )

    def _ns(self, monotonic: float) -> int:
        return round(monotonic * 1e9) + self._epoch_offset_ns

    def _recording(self) -> bool:
        """False while nothing can be recorded: the API's no-op tracer, or its proxy before
        the application set a provider."""
        if self._proxy:
            real = shortcut.behind_proxy(self.tracer)
            if real is None:
                return False
            self.tracer, self._proxy, self._shortcuts = real, False, None
        return type(self.tracer) is not trace.NoOpTracer

    def _shortcut(self) -> tuple[shortcut.ChildFactory | None, shortcut.RootSpans | None]:
        """The SDK shortcuts for this tracer, found once; none while its processors read
        spans as they start (asked per batch: processors can be added at any time)."""
        found = self._shortcuts
        if found is None:
            children = shortcut.children_for(self.tracer)
            roots = None if children is None else shortcut.roots_for(self.tracer, children)
            found = self._shortcuts = (children, roots)
        if found[0] is not None and not shortcut.usable(self.tracer):
            return None, None
        return found

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
        if not self._recording():
            return None
        children, roots = self._shortcut()
        kind = SpanKind.SERVER if server else SpanKind.CLIENT
        parent = batch.context if isinstance(batch.context, Context) else None
        name = "jsonrpc batch" if batch.is_batch else "jsonrpc request"
        root: trace.Span | None = None
        decided: shortcut.Decided | None = None
        if roots is not None:
            decided = roots.decide(parent, name, kind)
            if decided is None:
                return None
            root_context = decided.context
        else:
            root = self.tracer.start_span(
                name, context=parent, kind=kind, start_time=self._ns(batch.sent_at)
            )
            if not root.is_recording():
                root.end()
                return None
            root_context = root.get_span_context()
        n = len(batch.keys)
        indexes: Sequence[int] = (
            range(n) if policy.takes_all(n) else [c.index for c in policy.choose(batch.calls)]
        )
        attributes: dict[str, AttributeValue] = {
            RPC_SYSTEM_NAME: "jsonrpc",
            SIDE: "server" if server else "client",
            "jsonrpc.batch.size": batch.size,
            "jsonrpc.batch.requests": n,
            DIAGNOSIS: batch.diagnosis,
            CLOSE_REASON: batch.close_reason,
            "pairwatch.missing": batch.missing,
            "pairwatch.unknown_id": batch.unknown,
            "pairwatch.null_id": batch.null,
            "pairwatch.out_of_order": batch.out_of_order,
        }
        if len(indexes) != n:
            attributes["pairwatch.child_spans.omitted"] = n - len(indexes)
        if root is not None:
            root.set_attributes(attributes)
        ctx = trace.set_span_in_context(
            root if root is not None else NonRecordingSpan(root_context)
        )
        start_ns = self._ns(batch.sent_at)
        names, child_attributes, ends, statuses, cleaned = self._children(
            batch, indexes, span_attributes
        )
        if children is not None and root_context.trace_flags.sampled:
            children.end_all(
                root_context, kind, names, child_attributes, start_ns, ends, statuses, cleaned
            )
        else:
            for child in zip(names, child_attributes, ends, statuses, strict=True):
                self._start_child(ctx, kind, start_ns, *child)
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

    def _children(
        self, batch: Batch, indexes: Sequence[int], span_attributes: SpanAttributes | None
    ) -> Children:
        """The child span of each request in ``indexes``: the one place their names,
        attributes, ends and statuses are made."""
        keys, methods, received = batch.keys, batch.methods, batch.received
        errors = batch.error_codes or {}
        invalid = batch.invalid_at or ()
        duplicate = batch.duplicate_at or ()
        captured = batch.captured
        sent_at = batch.sent_at
        limit = self.methods
        named: dict[str | None, str | None] = {}  # limited once per method, in send order
        ns: dict[float, int] = {}  # one body answers many ids: each time converted once
        missing_status: Status | None = None
        excused = bool(batch.excused)  # withdrawn or unchecked: neither answered nor missing
        names: list[str] = []
        attributes: list[dict[str, AttributeValue]] = []
        ends: list[int] = []
        statuses: list[Status] = []
        cleaned = True
        for index in indexes:
            method = methods[index]
            if method in named:
                label = named[method]
            else:
                label = named[method] = None if method is None else limit(method)
            attrs: dict[str, AttributeValue] = {RPC_SYSTEM_NAME: "jsonrpc"}
            if label is not None:
                attrs[RPC_METHOD] = label
            key = keys[index]
            if key is not None:
                attrs[JSONRPC_REQUEST_ID] = str(key)
            code = errors.get(index) if errors else None
            if code is not None:
                attrs[RPC_RESPONSE_STATUS_CODE] = str(code)
            replied = received[index]
            status = UNSET
            why = batch.excused_for(index) if replied is None and excused else None
            if why is not None:
                attrs[OUTCOME] = why[0]  # neither answered nor missing: no error status
                ended = batch.closed_at
            elif replied is None:
                attrs[OUTCOME] = "missing"
                if missing_status is None:
                    missing_status = Status(
                        StatusCode.ERROR, f"no response before {batch.close_reason}"
                    )
                status = missing_status
                ended = batch.closed_at
            else:
                attrs[OUTCOME] = "duplicate" if index in duplicate else "paired"
                attrs[PAIR_LATENCY] = replied - sent_at
                ended = replied
            if index in invalid:
                attrs["pairwatch.invalid_response"] = True
            if span_attributes is not None:
                try:
                    extra = span_attributes(Call(batch, index))
                except Exception:  # an integration's hook must not cost the span or metrics
                    self.on_error("span_attributes")
                    extra = None
                if extra:
                    attrs.update(extra)
                    cleaned = False
                    if isinstance(extra, Details):
                        if extra.name is not None:
                            label = extra.name
                        if extra.error is not None and status is UNSET:
                            status = Status(StatusCode.ERROR, extra.error)
            if captured is not None and index in captured:
                request, response = captured[index]
                if request is not None:
                    attrs[REQUEST_PAYLOAD] = request
                if response is not None:
                    attrs[RESPONSE_PAYLOAD] = response
            end_ns = ns.get(ended)
            if end_ns is None:
                end_ns = ns[ended] = self._ns(ended)
            names.append(label or "jsonrpc")
            attributes.append(attrs)
            ends.append(end_ns)
            statuses.append(status)
        return names, attributes, ends, statuses, cleaned

    def _start_child(
        self,
        ctx: Context,
        kind: SpanKind,
        start_ns: int,
        name: str,
        attrs: dict[str, AttributeValue],
        end_ns: int,
        status: Status,
    ) -> None:
        """One child through the public API (the sampler decides it, as for any span)."""
        span = self.tracer.start_span(name, context=ctx, kind=kind, start_time=start_ns)
        if status is not UNSET:
            span.set_status(status)
        span.set_attributes(attrs)
        span.end(end_time=end_ns)
