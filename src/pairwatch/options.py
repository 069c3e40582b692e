"""What one instrumented client's channels share: its settings.

Kept apart from :mod:`pairwatch.channel` (which feeds the books) because every layer reads
settings: the one-liner and the instrumentor build them (with :mod:`pairwatch.config`),
integrations and the server middleware pass them on, channels turn them into ledger limits
and a span policy.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import metrics, trace

from pairwatch.otel.span_policy import SpanPolicy
from pairwatch.pairing.limits import Limits
from pairwatch.pairing.records import Batch

__all__ = ["Options"]


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

    ``propagate``: off by default, so the caller's request and the bytes on the wire stay
    exactly the caller's (a ``traceparent`` would tell a third-party provider the trace ids).
    On, HTTP integrations add the span current at each send as ``traceparent`` to a request
    that has none of the caller's, so a server running pairwatch's middleware joins the
    trace (the server-side crosscheck needs it).

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
    propagate: bool = False
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
