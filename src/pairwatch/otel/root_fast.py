"""The batch span, decided by the tracer's sampler and handed over finished.

Why: the batch span is made after the fact, like its children, yet it went through
``start_span``, ``set_attributes``, ``set_status`` and ``end``: about 21 µs per sampled
batch (a live ``_Span`` with its lock, ten attributes cleaned one by one, the processors'
dispatch), several times what one finished child costs.  A batch whose trace the sampler
drops still paid for a span context, a span id and a non-recording span: about 4 µs, of
which the sampler's own decision is half.

What stays the same: the sampler is asked exactly as ``start_span`` asks it (the parent
context, the trace id, the span name and kind, no attributes, no links), and the decision
makes the span: dropped, nothing (a dropped span is never exported, and its children
follow it); recorded, a ``ReadableSpan`` with the span context ``start_span`` builds (its
flags, the random-trace-id flag where the SDK sets one, the sampler's trace state), the
sampler's attributes under pairwatch's, and the status and times the books recorded.  A
sampled span goes where its children go (:class:`~pairwatch.otel.span_fast.ChildFactory`);
a recorded but unsampled one to every processor's ``on_end``, which decides, as after
``end()``.  One difference nobody sees: a dropped span's id is never drawn.

Used under the children's conditions (:func:`~pairwatch.otel.span_fast.usable`) and only
when a probe, run once, finds that this module builds the span context ``start_span``
builds on the installed SDK; otherwise the batch span takes the ordinary path.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanContext, SpanKind, Status, TraceFlags
from opentelemetry.util.types import AttributeValue

from pairwatch.otel import sampler_fast, span_fast
from pairwatch.otel.current import get_current

__all__ = ["Decided", "RootSpans", "available"]

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_DEFAULT = TraceFlags(TraceFlags.DEFAULT)
_RANDOM_FLAG: int | None = getattr(TraceFlags, "RANDOM_TRACE_ID", None)


def _sets_random_flag() -> bool:
    """Whether the installed SDK's ``start_span`` marks random trace ids in the flags."""
    try:
        from opentelemetry.sdk.trace import Tracer

        names = Tracer.start_span.__code__.co_names
    except Exception:  # pragma: no cover - depends on the installed SDK
        return False
    return _RANDOM_FLAG is not None and "RANDOM_TRACE_ID" in names


_RANDOM = _sets_random_flag()


def _span_key() -> str | None:
    """The key under which the API keeps a context's span, when a context without it is
    what ``get_current_span`` reads as no span; None: that function is asked every time."""
    try:
        from opentelemetry.trace import propagation

        key = getattr(propagation, "_SPAN_KEY", None)
        probe = trace.set_span_in_context(trace.INVALID_SPAN, Context())
        if (
            isinstance(key, str)
            and list(probe) == [key]
            and trace.get_current_span(Context()) is trace.INVALID_SPAN
            and not trace.INVALID_SPAN.get_span_context().is_valid
        ):
            return key
    except Exception:  # pragma: no cover - depends on the installed API
        pass
    return None


_SPAN_KEY = _span_key()


class Decided:
    """A batch span the sampler chose to record: its context, parent and sampler attributes."""

    __slots__ = ("attributes", "context", "parent")

    def __init__(
        self,
        context: SpanContext,
        parent: SpanContext | None,
        attributes: Mapping[str, AttributeValue] | None,
    ) -> None:
        self.context = context
        self.parent = parent
        self.attributes = attributes


class RootSpans:
    """Batch spans of one SDK tracer: decided with its sampler, delivered finished."""

    __slots__ = ("_children", "_drops", "_tracer")

    def __init__(self, tracer: Any, children: span_fast.ChildFactory) -> None:
        self._tracer = tracer
        self._children = children
        # The SDK's samplers' drops, without the call (a tracer's sampler never changes).
        self._drops = sampler_fast.drops_for(getattr(tracer, "sampler", None))

    def decide(self, parent: Context | None, name: str, kind: SpanKind) -> Decided | None:
        """Ask the sampler as ``start_span`` would; None when the span is not recorded."""
        tracer = self._tracer
        found: SpanContext | None
        # The API's get_current_span, written out for a context that holds no span (a root
        # batch: four Python calls to learn there is no parent).
        if (
            _SPAN_KEY is not None
            and (get_current() if parent is None else parent).get(_SPAN_KEY) is None
        ):
            found = None
        else:
            found = trace.get_current_span(parent).get_span_context()
        ids = tracer.id_generator
        parent_span: SpanContext | None
        if found is None or not found.is_valid:
            parent_span = None
            trace_id = ids.generate_trace_id()
        else:
            parent_span = found
            trace_id = found.trace_id
        drops = self._drops
        if drops is not None and drops(parent_span, trace_id):
            return None  # what the sampler would decide (sampler_fast)
        result = tracer.sampler.should_sample(parent, trace_id, name, kind, None, ())
        decision = result.decision
        if not decision.is_recording():
            return None
        flags = _SAMPLED if decision.is_sampled() else _DEFAULT
        if _RANDOM:
            if parent_span is None:
                random_id = ids.is_trace_id_random()
            else:
                random_id = parent_span.trace_flags.random_trace_id
            if random_id:
                flags = TraceFlags(flags | _RANDOM_FLAG)  # type: ignore[operator]
        context = SpanContext(
            trace_id,
            ids.generate_span_id(),
            is_remote=False,
            trace_flags=flags,
            trace_state=result.trace_state,
        )
        return Decided(context, parent_span, result.attributes or None)

    def end(
        self,
        decided: Decided,
        name: str,
        kind: SpanKind,
        attributes: dict[str, AttributeValue],
        status: Status | None,
        start_ns: int,
        end_ns: int,
    ) -> None:
        """The finished batch span, to its processors (after its children, as ``end()``)."""
        cleaned = decided.attributes is None
        if not cleaned:  # the sampler's attributes first, pairwatch's over them
            attributes = {**decided.attributes, **attributes}  # type: ignore[dict-item]
        span = self._children.span(
            decided.parent,
            decided.context,
            name,
            attributes,
            start_ns,
            end_ns,
            status,
            cleaned,
            kind,
        )
        if decided.context.trace_flags.sampled:
            self._children.deliver((span,))
        else:  # recorded, not sampled: each processor's on_end decides, as after end()
            self._tracer.span_processor.on_end(span)


@functools.cache
def available() -> bool:
    """Whether :class:`RootSpans` builds the span context ``start_span`` builds here.

    Checked once, on a private provider with fixed ids and a sampler that records: a root
    span, a span under a valid parent, with and without the random-trace-id flag.
    """
    try:
        return _probe()
    except Exception:  # pragma: no cover - depends on the installed SDK
        return False


def _probe() -> bool:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
    from opentelemetry.trace import NonRecordingSpan, TraceState

    class Fixed(IdGenerator):
        random = False

        def generate_span_id(self) -> int:
            return 0x5EED

        def generate_trace_id(self) -> int:
            return 0x7ACE

        def is_trace_id_random(self) -> bool:
            return self.random

    class Records(Sampler):
        def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, None, TraceState([("k", "v")]))

        def get_description(self) -> str:
            return "records"

    ids = Fixed()
    provider = TracerProvider(
        sampler=Records(), resource=Resource({}), id_generator=ids, shutdown_on_exit=False
    )
    tracer = provider.get_tracer("pairwatch.probe")
    roots = RootSpans(tracer, span_fast.ChildFactory(tracer))
    for random_flag in (0, _RANDOM_FLAG or 0):
        above = SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED | random_flag))
        for parent in (Context(), trace.set_span_in_context(NonRecordingSpan(above))):
            for random_ids in (False, True):
                ids.random = random_ids
                made = tracer.start_span("probe", context=parent, kind=SpanKind.CLIENT)
                decided = roots.decide(parent, "probe", SpanKind.CLIENT)
                expected = getattr(made, "parent", None)
                if (
                    decided is None
                    or tuple(decided.context) != tuple(made.get_span_context())
                    or decided.parent != expected
                ):
                    return False
    return True
