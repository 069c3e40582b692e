"""Which request ids of a batch get a child span, and the hook that adds attributes to one.

Kept apart from the writer (:mod:`pairwatch.otel.spans`) because the channel options hold a
policy and a hook long before any span is written, and need nothing else of tracing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from opentelemetry.util.types import AttributeValue

from pairwatch.pairing.records import Call

__all__ = ["DEFAULT_POLICY", "Details", "SpanAttributes", "SpanPolicy"]


class SpanPolicy:
    """Which request ids of a batch get a child span.

    ``max_children`` caps the children of one batch: a 10,000-element batch would otherwise
    overflow the SDK's default batch processor queue (2,048 spans) and lose spans of other
    batches too.  Abnormal ids (missing, duplicate, error reply, invalid reply, slower than
    ``slow_after`` seconds) are kept first; what is left out is counted on the batch span as
    ``pairwatch.child_spans.omitted``.  ``abnormal_only`` makes children only for abnormal
    ids: the batch span still carries every count.
    """

    __slots__ = ("abnormal_only", "max_children", "slow_after")

    def __init__(
        self, max_children: int = 1024, abnormal_only: bool = False, slow_after: float = 1.0
    ) -> None:
        self.max_children = max(0, max_children)
        self.abnormal_only = abnormal_only
        self.slow_after = slow_after

    def abnormal(self, call: Call) -> bool:
        if call.outcome == "missing" or call.duplicate or call.invalid:
            return True
        if call.error_code is not None:
            return True
        latency = call.latency
        return latency is not None and latency >= self.slow_after

    def takes_all(self, n: int) -> bool:
        """Every one of ``n`` ids gets a child (no need to look at any of them)."""
        return not self.abnormal_only and n <= self.max_children

    def choose(self, calls: list[Call]) -> list[Call]:
        """The calls that get a span, in request order."""
        if not self.abnormal_only and len(calls) <= self.max_children:
            return calls
        abnormal = [c for c in calls if self.abnormal(c)]
        if self.abnormal_only or len(abnormal) >= self.max_children:
            return abnormal[: self.max_children]
        room = self.max_children - len(abnormal)
        chosen = {c.index for c in abnormal}
        for c in calls:
            if room == 0:
                break
            if c.index not in chosen:
                chosen.add(c.index)
                room -= 1
        return [c for c in calls if c.index in chosen]


DEFAULT_POLICY = SpanPolicy()

SpanAttributes = Callable[[Call], Mapping[str, AttributeValue] | None]
"""A channel's optional hook: extra attributes for one request's span, computed at close.

Integrations know things the wire does not (an MCP tool name, a protocol's own method
attribute); the hook lets them add those without telemetry knowing any protocol."""


class Details(dict[str, AttributeValue]):
    """What a hook may return instead of plain attributes: the span's name and failure too.

    A protocol's conventions may name a request's span by more than its method (MCP's
    ``tools/call add``) and call a reply a failure that JSON-RPC calls a result (a tool's
    ``isError``); the integration knows both, the writer only applies them.
    """

    __slots__ = ("error", "name")

    def __init__(
        self,
        attributes: Mapping[str, AttributeValue],
        name: str | None = None,
        error: str | None = None,
    ) -> None:
        super().__init__(attributes)
        self.name = name  # replaces the method as the span's name
        self.error = error  # the span's ERROR status description; None leaves it as it is
