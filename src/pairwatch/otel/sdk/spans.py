"""Finished spans handed straight to the SDK's span processors, when that changes nothing.

A batch's spans are made after the fact, with times the books recorded, so there is nothing
to *start*: ``tracer.start_span(...).end()`` still pays for a sampler call per child, a
context look-up, attributes cleaned one value at a time, ``on_start`` and ``on_end``
dispatch.  Built as the SDK's own ``ReadableSpan`` (what ``on_end`` receives anyway) and
handed to the processors' ``on_end``, the same span costs a small fraction.

It is the same span when the tracer is the SDK's, every span processor does nothing in
``on_start`` (true of the SDK's batch and simple processors) and the SDK's span
self-metrics are off; :func:`usable` asks that per batch.  Then the processors see exactly
what ``start_span``/``end`` would have handed them.  Children take their batch span's
sampling decision.  The batch span itself is decided by the sampler exactly as
``start_span`` asks it (:class:`RootSpans`).

A batch's children are made together: span ids from one draw of ``64 * n`` random bits, cut
into the words successive draws would have given; contexts and spans built with the SDK's
own classes without re-checking what is known; the SDK's batch processor's queue filled in
one step when that is all its ``emit`` would do.  Each of those is checked by
:func:`check`, doing the same job both ways on a scratch provider and comparing the
exported spans, and left out if anything differs.
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
from opentelemetry.context import Context
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState
from opentelemetry.util.types import AttributeValue

from pairwatch.otel.sdk import sampling
from pairwatch.otel.sdk.context import get_current

__all__ = [
    "UNSET", "ChildFactory", "Decided", "RootSpans", "behind_proxy", "check", "children_for",
    "roots_for", "usable",
]  # fmt: skip

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
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_DEFAULT = TraceFlags(TraceFlags.DEFAULT)
_RANDOM_FLAG: int | None = getattr(TraceFlags, "RANDOM_TRACE_ID", None)


class _Found:
    """What :func:`check` found this SDK to do (each False until checked and agreed)."""

    contexts_as_tuples = False  # a SpanContext is the tuple its constructor builds
    positional_spans = False  # ReadableSpan's parameters land where keywords put them
    bulk_ids = False  # the default id generator's ids, drawn for a whole batch at once
    batch_emit = False  # BatchSpanProcessor.on_end of a sampled span is its queue's emit
    queue_appends = False  # that emit only appends (and wakes its worker)
    random_flag = False  # start_span marks random trace ids in the flags


if _AVAILABLE:
    _init_span = ReadableSpan.__init__


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


def _on_end(processor: Any) -> Callable[[Any], object]:
    """What to call with one finished, sampled span for ``processor``."""
    if _Found.batch_emit and type(processor) is BatchSpanProcessor:
        emit = getattr(getattr(processor, "_batch_processor", None), "emit", None)
        if emit is not None:
            return emit  # type: ignore[no-any-return]
    return processor.on_end  # type: ignore[no-any-return]


def _appends_only(emit: Any) -> bool:
    """``emit`` belongs to a queue shaped as the one :func:`check` found appending only."""
    queue = getattr(emit, "__self__", None)
    return (
        _Found.queue_appends
        and type(queue).__name__ == "BatchProcessor"
        and isinstance(getattr(queue, "_queue", None), deque)
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
        self._bulk_ids = (
            _Found.bulk_ids
            and _Found.contexts_as_tuples
            and type(self._ids) is _id_generator.RandomIdGenerator
        )
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
        cleaned: bool = True,
    ) -> None:
        """Finished spans under ``parent`` (which is sampled and recording), in order: one
        per name, with its attributes, end and status (:data:`UNSET` or all unset when
        ``None``), all started at ``start_ns``.  ``cleaned``: every attribute value is
        pairwatch's own (a str, int, float or bool); otherwise the SDK cleans them.
        """
        n = len(names)
        if len(attributes) != n or len(ends) != n or (statuses is not None and len(statuses) != n):
            raise ValueError("one name, attribute set, end and status per span")
        if n == 0:
            return
        if not cleaned or max(map(len, attributes)) > self._plain_max:
            attributes = [self._attributes(a, cleaned) for a in attributes]  # type: ignore[misc]
        contexts = self._contexts(parent, n)
        status_of: Iterable[Status] = repeat(UNSET) if statuses is None else statuses
        if _Found.positional_spans:  # ReadableSpan's 13 parameters by position (checked)
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


def behind_proxy(tracer: trace.Tracer) -> trace.Tracer | None:
    """The tracer an API proxy tracer stands for, once the application has set a provider;
    None until then.  A proxy of another kind is its own tracer."""
    real = getattr(tracer, "_tracer", tracer)  # the API proxy's own attribute
    return None if type(real) is trace.NoOpTracer else real


def children_for(tracer: trace.Tracer) -> ChildFactory | None:
    """The child-span factory of ``tracer``, when the shortcut is on and the tracer is the
    SDK's (its processors are still asked per batch: :func:`usable`)."""
    from pairwatch.otel import sdk

    if not _AVAILABLE or type(tracer) is not _SdkTracer or not sdk.on("child_spans"):
        return None
    return ChildFactory(tracer)


def roots_for(tracer: trace.Tracer, children: ChildFactory) -> RootSpans | None:
    """The batch spans of ``tracer``, built finished, when that shortcut is on too."""
    from pairwatch.otel import sdk

    return RootSpans(tracer, children) if sdk.on("batch_spans") else None


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

    def __init__(self, tracer: Any, children: ChildFactory) -> None:
        self._tracer = tracer
        self._children = children
        # The SDK's samplers' drops, without the call (a tracer's sampler never changes).
        self._drops = sampling.drops_for(getattr(tracer, "sampler", None))

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
            return None  # what the sampler would decide (sampling)
        result = tracer.sampler.should_sample(parent, trace_id, name, kind, None, ())
        decision = result.decision
        if not decision.is_recording():
            return None
        flags = _SAMPLED if decision.is_sampled() else _DEFAULT
        if _Found.random_flag:
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


# ------------------------------------------------------------------------------- checks
def check(name: str) -> str | None:
    """None when the shortcut ``name`` (``child_spans`` or ``batch_spans``) exports, on a
    scratch provider, exactly the spans the public API exports; else what differs."""
    if not _AVAILABLE:
        return "the SDK's span classes are not where expected"
    if name == "child_spans":
        return _check_children()
    from pairwatch.otel import sdk

    if not sdk.on("child_spans"):
        return "it hands its span over as the children are handed over, which is off"
    return _check_roots()


def _check_children() -> str | None:
    _Found.contexts_as_tuples = _checked(_contexts_as_tuples)
    _Found.positional_spans = _checked(_positional_spans)
    _Found.bulk_ids = _checked(_bulk_ids_agree)
    difference = _children_differ(batch=False)
    if difference is not None:
        return difference
    # The SDK's batch processor: its queue filled at once, else its emit per span, else
    # its on_end, whichever of these still exports what on_end exports.
    _Found.batch_emit = _Found.queue_appends = True
    if _children_differ(batch=True) is not None:
        _Found.queue_appends = False
        if _children_differ(batch=True) is not None:
            _Found.batch_emit = False
            return _children_differ(batch=True)
    return None


def _bulk_ids_agree() -> bool:
    """The default generator's span ids for a batch, drawn at once, are the ids it gives
    one by one (the random state is put back as it was)."""
    state = random.getstate()
    try:
        random.seed(11)
        generator = _id_generator.RandomIdGenerator()
        one = [generator.generate_span_id() for _ in range(7)]
        random.seed(11)
        bulk = struct.unpack("<7Q", random.getrandbits(64 * 7).to_bytes(8 * 7, "little"))
    finally:
        random.setstate(state)
    return list(bulk) == one


_PARENT = (0x1234_5678_9ABC_DEF0_0FED_CBA9_8765_4321, 0x0BAD_CAFE_0000_0001)


def _scratch(batch: bool, ids: Any = None, sampler: Any = None) -> tuple[Any, Any, Any]:
    """A private tracer provider, its tracer and the exporter its one processor feeds."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    settings: dict[str, Any] = {"resource": Resource({"service.name": "pairwatch-check"})}
    if ids is not None:
        settings["id_generator"] = ids
    if sampler is not None:
        settings["sampler"] = sampler
    provider = TracerProvider(shutdown_on_exit=False, **settings)
    exporter = InMemorySpanExporter()
    processor = (
        BatchSpanProcessor(exporter, schedule_delay_millis=60_000)
        if batch
        else SimpleSpanProcessor(exporter)
    )
    provider.add_span_processor(processor)
    return provider, provider.get_tracer("pairwatch.check", "1"), exporter


def _exported(provider: Any, exporter: Any) -> list[tuple[Any, ...]]:
    provider.force_flush()
    return [
        (
            s.name, tuple(s.context), s.parent, s.kind, dict(s.attributes or {}),
            s.status.status_code, s.status.description, s.start_time, s.end_time,
            tuple(s.events), tuple(s.links), s.resource, s.instrumentation_scope,
        )
        for s in exporter.get_finished_spans()
    ]  # fmt: skip


def _children_differ(batch: bool) -> str | None:
    """Three children of one parent, made with ``start_span`` and by a :class:`ChildFactory`
    from the same random state: None when the exported spans are the same."""
    names = ["eth_call", "eth_call", "net_version"]
    attributes: list[dict[str, AttributeValue]] = [
        {"rpc.method": "eth_call", "jsonrpc.request.id": "1", "pairwatch.pair_latency": 0.5},
        {"rpc.method": "eth_call", "jsonrpc.request.id": "2", "pairwatch.outcome": "missing"},
        {"rpc.method": "net_version", "jsonrpc.request.id": "x", "pairwatch.invalid": True},
    ]
    statuses = [UNSET, Status(StatusCode.ERROR, "no response before body_end"), UNSET]
    ends = [2_000_000_500, 2_000_000_900, 2_000_000_700]
    parent = SpanContext(*_PARENT, False, _SAMPLED, TraceState([("k", "v")]))
    found: list[list[tuple[Any, ...]]] = []
    state = random.getstate()
    try:
        for shortcut in (False, True):
            provider, tracer, exporter = _scratch(batch)
            random.seed(5)
            if shortcut:
                ChildFactory(tracer).end_all(
                    parent, SpanKind.CLIENT, names, [dict(a) for a in attributes],
                    2_000_000_000, ends, statuses,
                )  # fmt: skip
            else:
                context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
                for name, attrs, end, status in zip(names, attributes, ends, statuses, strict=True):
                    span = tracer.start_span(
                        name, context=context, kind=SpanKind.CLIENT, start_time=2_000_000_000
                    )
                    span.set_attributes(attrs)
                    if status is not UNSET:
                        span.set_status(status)
                    span.end(end_time=end)
            found.append(_exported(provider, exporter))
            provider.shutdown()
    finally:
        random.setstate(state)
    if found[0] != found[1]:
        where = "the batch processor's" if batch else "the simple processor's"
        return f"children handed to {where} on_end differ from start_span's"
    return None


def _check_roots() -> str | None:
    """The batch span decided and built here is the span ``start_span`` makes: its context
    (root, or under a parent; with or without random trace ids) and what is exported."""
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

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
            return SamplingResult(
                Decision.RECORD_AND_SAMPLE, {"sampler": "yes"}, TraceState([("k", "v")])
            )

        def get_description(self) -> str:
            return "records"

    ids = Fixed()
    provider, tracer, exporter = _scratch(False, ids=ids, sampler=Records())
    try:
        ids.random = True  # learn whether start_span marks a random trace id in the flags
        made = tracer.start_span("check", context=Context())
        _Found.random_flag = bool(
            _RANDOM_FLAG and made.get_span_context().trace_flags & _RANDOM_FLAG
        )
        made.end()
        roots = RootSpans(tracer, ChildFactory(tracer))
        for random_flag in (0, _RANDOM_FLAG or 0):
            above = SpanContext(0xABC, 0xDEF, False, TraceFlags(TraceFlags.SAMPLED | random_flag))
            for parent in (Context(), trace.set_span_in_context(trace.NonRecordingSpan(above))):
                for random_ids in (False, True):
                    ids.random = random_ids
                    made = tracer.start_span("check", context=parent, kind=SpanKind.CLIENT)
                    decided = roots.decide(parent, "check", SpanKind.CLIENT)
                    made.end()
                    if (
                        decided is None
                        or tuple(decided.context) != tuple(made.get_span_context())
                        or decided.parent != getattr(made, "parent", None)
                    ):
                        return "its span context differs from start_span's"
        exporter.clear()
        attributes: dict[str, AttributeValue] = {"pairwatch.diagnosis": "ok", "n": 3}
        status = Status(StatusCode.ERROR, "responses_missing: 1 of 3")
        made = tracer.start_span(
            "jsonrpc batch", context=Context(), kind=SpanKind.CLIENT, start_time=10
        )
        made.set_attributes(attributes)
        made.set_status(status)
        made.end(end_time=20)
        decided = roots.decide(Context(), "jsonrpc batch", SpanKind.CLIENT)
        if decided is None:
            return "it dropped a span the sampler records"
        roots.end(decided, "jsonrpc batch", SpanKind.CLIENT, dict(attributes), status, 10, 20)
        one, two = _exported(provider, exporter)
        if one != two:
            return "the exported batch span differs from start_span's"
    finally:
        provider.shutdown()
    return None
