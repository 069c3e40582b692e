"""The SDK's own samplers' drop decisions, made without asking them.

A batch whose span the sampler drops needs nothing of tracing, and under a ratio sampler
that is 99 batches in 100; asking builds a ``SamplingResult`` to learn one comparison of the
trace id with a bound.  For the samplers the SDK ships (``TraceIdRatioBased``,
``ParentBased`` and its subclasses, the always-on and always-off ones) that comparison is
made here.  Only drops are decided: anything this does not drop goes to the sampler as
before.  Each rule is checked against the very sampler it stands for (parents of every kind,
trace ids on both sides of the bound) before it is used; any other sampler is always asked.
"""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.trace import SpanContext, TraceFlags

__all__ = ["Drops", "check", "drops_for"]

Drops = Callable[[SpanContext | None, int], bool]
"""``(valid parent span context or None, trace id)``: True only when the sampler drops."""

try:
    from opentelemetry.sdk.trace.sampling import (
        Decision,
        ParentBased,
        StaticSampler,
        TraceIdRatioBased,
    )

    _AVAILABLE = True
except Exception:  # pragma: no cover - depends on the installed SDK
    _AVAILABLE = False


def _never(parent: SpanContext | None, trace_id: int) -> bool:
    return False


def _always(parent: SpanContext | None, trace_id: int) -> bool:
    return True


def _rule(sampler: object, depth: int = 0) -> Drops | None:
    """The drop test of one of the SDK's samplers, or None for any other sampler."""
    cls = type(sampler)
    should_sample = getattr(cls, "should_sample", None)
    if depth > 2:  # the SDK nests one level; deeper is someone else's design
        return None
    if should_sample is StaticSampler.should_sample:
        decision = getattr(sampler, "_decision", None)
        if decision is Decision.DROP:
            return _always
        return _never if decision is Decision.RECORD_AND_SAMPLE else None
    if should_sample is TraceIdRatioBased.should_sample:
        limit = getattr(cls, "TRACE_ID_LIMIT", None)
        bound = getattr(sampler, "bound", None)
        if not isinstance(limit, int) or not isinstance(bound, int):
            return None

        def ratio(parent: SpanContext | None, trace_id: int) -> bool:
            return trace_id & limit >= bound

        return ratio
    if should_sample is ParentBased.should_sample:
        names = (
            "_root",
            "_remote_parent_sampled",
            "_remote_parent_not_sampled",
            "_local_parent_sampled",
            "_local_parent_not_sampled",
        )
        rules = [_rule(getattr(sampler, name, None), depth + 1) for name in names]
        root, remote_on, remote_off, local_on, local_off = rules
        if root is None:
            return None  # the common case, a root batch, would be asked anyway

        def parent_based(parent: SpanContext | None, trace_id: int) -> bool:
            if parent is None:
                return root(parent, trace_id)
            if parent.is_remote:
                chosen = remote_on if parent.trace_flags.sampled else remote_off
            else:
                chosen = local_on if parent.trace_flags.sampled else local_off
            return chosen is not None and chosen(parent, trace_id)

        return parent_based
    return None


def _agrees(sampler: object, rule: Drops) -> bool:
    """The rule drops exactly what the sampler drops, over parents of every kind and trace
    ids on both sides of a ratio's bound."""
    from opentelemetry import trace
    from opentelemetry.context import Context

    should_sample = sampler.should_sample  # type: ignore[attr-defined]
    parents: list[SpanContext | None] = [None]
    for remote in (False, True):
        for flags in (TraceFlags.DEFAULT, TraceFlags.SAMPLED):
            parents.append(SpanContext(0xABC, 0xDEF, remote, TraceFlags(flags)))
    bound = getattr(getattr(sampler, "_root", sampler), "bound", 1 << 63)
    ids = {1, 2, (1 << 64) - 1, 1 << 64, (1 << 128) - 1, 0x1234567890ABCDEF << 20}
    if isinstance(bound, int):
        ids |= {bound - 1, bound, bound + 1, bound + (1 << 64), bound - 1 + (1 << 100)}
    for parent in parents:
        # An empty context for a root, not None: None would read this thread's current span.
        context = (
            Context()
            if parent is None
            else trace.set_span_in_context(trace.NonRecordingSpan(parent))
        )
        for trace_id in ids:
            if trace_id <= 0 or trace_id >= 1 << 128:
                continue
            result = should_sample(context, trace_id, "probe", None, None, ())
            if rule(parent, trace_id) != (result.decision is Decision.DROP):
                return False
    return True


def check(name: str = "sampler_drops") -> str | None:
    """None when the rules agree with the SDK's own ratio and parent-based samplers."""
    if not _AVAILABLE:
        return "the SDK's samplers are not where expected"
    for sampler in (ParentBased(TraceIdRatioBased(0.01)), TraceIdRatioBased(0.5)):
        rule = _rule(sampler)
        if rule is None or not _agrees(sampler, rule):
            return f"the drops of {type(sampler).__name__} differ"
    return None


def drops_for(sampler: object) -> Drops | None:
    """A drop test for ``sampler`` when it is one the SDK ships and the test agrees with it
    (checked now, once); None when the sampler must be asked for every batch."""
    from pairwatch.otel import sdk

    if not _AVAILABLE or not sdk.on("sampler_drops"):
        return None
    try:
        rule = _rule(sampler)
        if rule is None or rule is _never:
            return None
        return rule if _agrees(sampler, rule) else None
    except Exception:  # pragma: no cover - depends on the installed SDK
        return None
