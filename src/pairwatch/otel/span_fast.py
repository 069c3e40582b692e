"""Hand finished child spans straight to the SDK's span processors, when that changes nothing.

Why: a child span is made after the fact, with times the ledger recorded, so there is
nothing to *start*: ``tracer.start_span(...).end()`` still pays for a sampler call, a
context lookup, an attribute set built and cleaned one value at a time, ``on_start`` and
``on_end`` dispatch and, in recent SDKs, span self-metrics.  Built as the SDK's own
``ReadableSpan`` (what ``on_end`` receives anyway) and handed to the processors' ``on_end``,
the same span costs a small fraction: per child of a 100-id batch into a BatchSpanProcessor,
about 13k instructions (callgrind, the garbage collection of queued spans included) against
about 170k through ``start_span``.

When it is the same span: the tracer is the SDK's, every span processor does nothing in
``on_start`` (and ``_on_ending``), which is true of the SDK's batch and simple processors,
and the SDK's span self-metrics are off.  Then the processors and exporters see exactly what
``start_span``/``end`` would have handed them: name, kind, ids, parent, times, attributes,
status, resource and scope.  Children take their batch span's sampling decision (flags and
trace state), as a parent-based sampler would decide.  Anything else (another SDK, a
processor that reads spans as they start, a tracer that is off) takes the ordinary path.

A batch's children are made together (:meth:`ChildFactory.end_all`), which lets the
per-span work shrink to what differs between spans:

* span ids: the SDK's default generator draws ``random.getrandbits(64)`` per id; the same
  generator's ids for a whole batch come from one draw of ``64 * n`` bits, cut into 64-bit
  words in the order successive draws would have produced them (and still never 0).  Any
  other id generator is asked once per span, as the SDK would;
* contexts and spans: built with the SDK's own classes, without the keyword parsing and
  validity checks whose answer is known (a non-zero 64-bit id under a valid, sampled trace);
  each shortcut is checked against the ordinary constructor at import and skipped if the
  installed SDK builds something else;
* delivery: the tracer's synchronous multi-processor is unrolled into its processors (read
  again whenever processors are added), and the SDK's batch processor's ``on_end``, which
  only checks the sampled flag every child has, goes straight to its queue's ``emit``; when
  it is the only processor, the batch goes into its queue in one ``extendleft`` whenever
  ``emit`` would only have appended each span (:func:`_enqueue`).
"""

from __future__ import annotations

import os
import random
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanContext, SpanKind, Status, TraceFlags, TraceState
from opentelemetry.util.types import AttributeValue

__all__ = ["UNSET", "ChildFactory", "usable"]

try:  # the SDK is a dependency, but check what this module relies on
    from opentelemetry.attributes import BoundedAttributes
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, SynchronousMultiSpanProcessor
    from opentelemetry.sdk.trace import Tracer as _SdkTracer
    from opentelemetry.sdk.trace import id_generator as _id_generator
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    _NOOP_HOOKS: frozenset[Any] = frozenset(
        getattr(cls, name, None)
        for cls in (SpanProcessor, BatchSpanProcessor, SimpleSpanProcessor)
        for name in ("on_start", "_on_ending")
    ) - {None}
    _AVAILABLE = True
except Exception:  # pragma: no cover - depends on the installed SDK
    _AVAILABLE = False

UNSET = Status()
"""The status of a span whose status was never set (what ``start_span`` gives it)."""
_new_tuple = tuple.__new__
_new_object = object.__new__


def _checked(probe: Callable[[], bool]) -> bool:
    try:
        return bool(probe())
    except Exception:  # pragma: no cover - depends on the installed SDK
        return False


def _contexts_as_tuples() -> bool:
    """A ``SpanContext`` is the tuple its constructor builds (1.30 to 1.45: six fields)."""
    flags, state = TraceFlags(TraceFlags.SAMPLED), TraceState([("k", "v")])
    made = SpanContext(7, 9, False, flags, state)
    fast = _new_tuple(SpanContext, (7, 9, False, flags, state, True))
    return type(made) is SpanContext and tuple(made) == tuple(fast) and fast.is_valid


def _positional_spans() -> bool:
    """``ReadableSpan.__init__``'s parameters, passed by position to a bare instance, land
    where ``ReadableSpan(...)`` with keywords puts them."""
    v: list[Any] = [object() for _ in range(13)]
    by_name = ReadableSpan(
        v[0], v[1], v[2], v[3], v[4], events=v[5], links=v[6], kind=v[7],
        instrumentation_info=v[8], status=v[9], start_time=v[10], end_time=v[11],
        instrumentation_scope=v[12],
    )  # fmt: skip
    by_position = _new_object(ReadableSpan)
    _init_span(by_position, *v)
    return (
        ReadableSpan.__new__ is object.__new__
        and vars(by_name) == vars(by_position)
        and by_position.instrumentation_scope is v[12]
    )


def _random_ids(generator: object) -> bool:
    """The generator is the SDK's default one, drawing ``random.getrandbits(64)`` per id."""
    cls = _id_generator.RandomIdGenerator
    if type(generator) is not cls:
        return False
    code = cls.generate_span_id.__code__
    return set(code.co_names) <= {"random", "getrandbits", "trace", "INVALID_SPAN_ID"}


def _emits_when_sampled() -> bool:
    """``BatchSpanProcessor.on_end`` (1.34+) checks the sampled flag, then ``emit``s."""
    names = set(BatchSpanProcessor.on_end.__code__.co_names)
    return names <= {"context", "trace_flags", "sampled", "_batch_processor", "emit"}


if _AVAILABLE:
    _init_span = ReadableSpan.__init__
    _TUPLE_CONTEXTS = _checked(_contexts_as_tuples)
    _POSITIONAL = _checked(_positional_spans)
    _BATCH_EMIT = _checked(_emits_when_sampled)
else:  # pragma: no cover
    _TUPLE_CONTEXTS = _POSITIONAL = _BATCH_EMIT = False


def _on_end(processor: Any) -> Callable[[Any], object]:
    """What to call with one finished, sampled span for ``processor``."""
    if _BATCH_EMIT and type(processor) is BatchSpanProcessor:
        emit = getattr(getattr(processor, "_batch_processor", None), "emit", None)
        if emit is not None:
            return emit  # type: ignore[no-any-return]
    return processor.on_end  # type: ignore[no-any-return]


# Every name the SDK's BatchProcessor.emit reads, 1.34 to 1.45: check the shutdown flag,
# the pid (reset after a fork), whether the queue is full (warn, count a drop), appendleft,
# wake the worker once the queue holds an export batch.  An emit that reads anything else
# does something :func:`_enqueue` does not, and is called per span.
_EMIT_NAMES = frozenset(
    {
        "_shutdown", "_logger", "info", "_exporting", "_metrics", "drop_items", "_pid", "os",
        "getpid", "_bsp_reset_once", "do_once", "_at_fork_reinit", "len", "_queue",
        "_max_queue_size", "warning", "appendleft", "_max_export_batch_size",
        "_worker_awaken", "is_set", "set",
    }
)  # fmt: skip


def _appends_only(emit: Any) -> bool:
    """``emit`` is a known BatchProcessor's: its spans can be appended in one go."""
    queue = getattr(emit, "__self__", None)
    code = getattr(getattr(type(queue), "emit", None), "__code__", None)
    if code is None or not set(code.co_names) <= _EMIT_NAMES:
        return False
    return (
        isinstance(getattr(queue, "_queue", None), deque)
        and isinstance(getattr(queue, "_shutdown", None), bool)
        and isinstance(getattr(queue, "_pid", None), int)
        and isinstance(getattr(queue, "_max_export_batch_size", None), int)
        and isinstance(getattr(queue, "_worker_awaken", None), threading.Event)
    )


def _enqueue(emit: Any, spans: Sequence[Any]) -> None:
    """``emit`` each span, as one ``extendleft`` when that is all ``emit`` would do.

    That is when the processor is not shut down, runs in the process that made it, and its
    queue has room for every span: then emit only appends (``extendleft`` appends in the
    same order) and wakes the worker once the queue holds an export batch.  Otherwise each
    span goes through ``emit``, which warns, counts drops and resets after a fork.
    """
    queue = emit.__self__
    pending = queue._queue
    room = pending.maxlen
    if (
        queue._shutdown
        or queue._pid != os.getpid()
        or (room is not None and len(pending) + len(spans) > room)
    ):
        deque(map(emit, spans), 0)
        return
    pending.extendleft(spans)
    if len(pending) >= queue._max_export_batch_size:
        awaken = queue._worker_awaken
        if not awaken.is_set():
            awaken.set()


class ChildFactory:
    """Finished child spans of one SDK tracer, delivered to its processors' ``on_end``."""

    __slots__ = (
        "_bulk_ids", "_ids", "_info", "_limits", "_plain_max", "_processor", "_resource",
        "_scope", "_seen", "_targets", "_whole",
    )  # fmt: skip

    def __init__(self, tracer: Any) -> None:
        self._processor = tracer.span_processor
        self._ids = tracer.id_generator
        self._bulk_ids = _TUPLE_CONTEXTS and _random_ids(self._ids)
        self._resource = tracer.resource
        self._scope = tracer._instrumentation_scope
        self._info = tracer.instrumentation_info
        self._limits = limits = tracer._span_limits
        # A plain dict is what BoundedAttributes would hold when no limit can cut anything;
        # with a value length limit set, or more attributes than allowed, the SDK's own
        # class applies the limits.
        most = limits.max_span_attributes
        self._plain_max = -1 if limits.max_span_attribute_length is not None else (
            most if most is not None else 1 << 62
        )  # fmt: skip
        self._seen: object = None
        self._targets: tuple[Callable[[Any], object], ...] = ()
        self._whole: Callable[[Any], object] | None = None  # a queue that takes them at once

    def deliver(self, spans: Sequence[Any]) -> None:
        """``on_end`` of every span, in order, for each processor in turn per span."""
        processor = self._processor
        if type(processor) is SynchronousMultiSpanProcessor:
            current = processor._span_processors  # a new tuple whenever one is added
            if current is not self._seen:
                self._targets = tuple(_on_end(p) for p in current)
                one = self._targets[0] if len(self._targets) == 1 else None
                self._whole = one if one is not None and _appends_only(one) else None
                self._seen = current
            if self._whole is not None:
                _enqueue(self._whole, spans)
                return
            targets = self._targets
        else:
            targets = (processor.on_end,)
        if len(targets) == 1:
            deque(map(targets[0], spans), 0)
        else:
            for span in spans:
                for on_end in targets:
                    on_end(span)

    def _contexts(self, parent: SpanContext, n: int) -> Iterable[SpanContext]:
        """``n`` new span contexts under ``parent`` (valid and sampled)."""
        trace_id, flags, state = parent.trace_id, parent.trace_flags, parent.trace_state
        if not self._bulk_ids:
            new = self._ids.generate_span_id
            return [SpanContext(trace_id, new(), False, flags, state) for _ in range(n)]
        # The words successive getrandbits(64) calls would return, low bits first.
        ids = struct.unpack(f"<{n}Q", random.getrandbits(64 * n).to_bytes(8 * n, "little"))
        if 0 in ids:  # the invalid id: draw again, as the generator would
            ids = tuple(i or self._ids.generate_span_id() for i in ids)
        fields = zip(
            repeat(trace_id), ids, repeat(False), repeat(flags), repeat(state), repeat(True)
        )
        return map(_new_tuple, repeat(SpanContext), fields)

    def _attributes(
        self, attributes: dict[str, AttributeValue], cleaned: bool
    ) -> Mapping[str, AttributeValue]:
        if cleaned and len(attributes) <= self._plain_max:
            return attributes
        limits = self._limits
        return BoundedAttributes(
            limits.max_span_attributes,
            attributes,
            immutable=True,
            max_value_len=limits.max_span_attribute_length,
        )

    def end_all(
        self,
        parent: SpanContext,
        kind: SpanKind,
        names: Sequence[str],
        attributes: Sequence[dict[str, AttributeValue]],
        start_ns: int,
        ends: Sequence[int],
        statuses: Sequence[Status] | None = None,
        widest: int | None = None,
    ) -> None:
        """Finished spans under ``parent`` (which is sampled and recording), in order: one
        per name, with its attributes (pairwatch's own values: str, int, float, bool), end
        and status (:data:`UNSET` or all unset when ``None``), all started at ``start_ns``.
        ``widest``: at least as many as any span's attributes, when the caller knows.
        """
        n = len(names)
        if len(attributes) != n or len(ends) != n or (statuses is not None and len(statuses) != n):
            raise ValueError("one name, attribute set, end and status per span")
        if n == 0:
            return
        if (widest if widest is not None else max(map(len, attributes))) > self._plain_max:
            attributes = [self._attributes(a, True) for a in attributes]  # type: ignore[misc]
        contexts = self._contexts(parent, n)
        status_of: Iterable[Status] = repeat(UNSET) if statuses is None else statuses
        if _POSITIONAL:  # ReadableSpan's 13 parameters by position (checked at import)
            # What ReadableSpan(...) does (object.__new__, then __init__), without the
            # type call's detour per span.
            spans = list(map(_new_object, repeat(ReadableSpan, n)))
            fill = map(
                _init_span, spans, names, contexts, repeat(parent), repeat(self._resource),
                attributes, repeat(()), repeat(()), repeat(kind), repeat(self._info),
                status_of, repeat(start_ns), ends, repeat(self._scope),
            )  # fmt: skip
            deque(fill, 0)
        else:  # pragma: no cover - an SDK whose ReadableSpan takes other positions
            spans = [
                self.span(parent, context, name, attrs, start_ns, end, status, True, kind)
                for name, context, attrs, end, status in zip(
                    names, contexts, attributes, ends, status_of, strict=False
                )
            ]
        self.deliver(spans)

    def span(
        self,
        parent: SpanContext | None,
        context: SpanContext,
        name: str,
        attributes: dict[str, AttributeValue],
        start_ns: int,
        end_ns: int,
        status: Status | None,
        cleaned: bool,
        kind: SpanKind,
    ) -> Any:
        return ReadableSpan(
            name,
            context,
            parent,
            self._resource,
            self._attributes(attributes, cleaned),
            kind=kind,
            instrumentation_info=self._info,
            status=status if status is not None else UNSET,
            start_time=start_ns,
            end_time=end_ns,
            instrumentation_scope=self._scope,
        )

    def end(
        self,
        parent: SpanContext,
        name: str,
        attributes: dict[str, AttributeValue],
        start_ns: int,
        end_ns: int,
        status: Status | None,
        cleaned: bool,
        kind: SpanKind = SpanKind.CLIENT,
    ) -> None:
        """One finished span under ``parent`` (which is sampled and recording).

        ``cleaned``: every value is a str, int, float or bool (pairwatch's own); values
        from an integration's hook go through the SDK's attribute cleaning instead.
        """
        (context,) = self._contexts(parent, 1)
        span = self.span(parent, context, name, attributes, start_ns, end_ns, status, cleaned, kind)
        self.deliver((span,))


def usable(tracer: trace.Tracer) -> bool:
    """Whether handing spans to ``on_end`` is exactly what ``start_span`` would do.

    Asked per batch (a few attribute reads), because processors can be added at any time.
    """
    if not _AVAILABLE or type(tracer) is not _SdkTracer:
        return False
    t: Any = tracer
    enabled = getattr(t, "_is_enabled", None)
    if enabled is not None and not enabled():
        return False
    metrics = getattr(t, "_tracer_metrics", None)
    if metrics is not None and type(metrics).__name__ != "NoOpTracerMetrics":
        return False  # the SDK counts started and live spans: let it see each one
    processors = getattr(t.span_processor, "_span_processors", None)
    if processors is None:
        return False
    global _last_checked
    checked = _last_checked  # one read: another thread may be replacing it
    if checked[0] is processors:  # adding a processor makes a new tuple
        return checked[1]
    usable = True
    for p in processors:
        for hook in ("on_start", "_on_ending"):
            fn = getattr(type(p), hook, None)
            if fn is not None and fn not in _NOOP_HOOKS:
                usable = False
    if type(processors) is tuple:  # never changed in place
        _last_checked = (processors, usable)
    return usable


# The last processors tuple checked and its answer, one object so that a reader never pairs
# a tuple with another tuple's answer; holding the tuple keeps its identity from reuse.
_last_checked: tuple[object, bool] = (None, False)
