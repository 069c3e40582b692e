"""Helpers shared by the robustness tests: failing OpenTelemetry parts and log reading.

Every failing part raises :class:`Boom`, so a test can tell pairwatch's own failures from
the library's exceptions the caller is meant to see.
"""

from __future__ import annotations

import collections
import logging
from typing import Any

import pytest
from opentelemetry.metrics import MeterProvider as ApiMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

import pairwatch
from pairwatch.runtime import guard


class Boom(RuntimeError):
    """Raised by every deliberately broken part."""


def settle() -> None:
    """Let deferred telemetry land, when pairwatch defers it (a ``flush`` may exist)."""
    flush = getattr(pairwatch, "flush", None)
    if callable(flush):
        flush()


def fresh_rate_limit(monkeypatch: pytest.MonkeyPatch) -> guard.RateLimitedLog:
    limiter = guard.RateLimitedLog()
    monkeypatch.setattr(guard, "log_limited", limiter)
    return limiter


def internal_errors_logged(caplog: pytest.LogCaptureFixture) -> collections.Counter[str]:
    """Log records of internal errors, by kind (the first argument of the message)."""
    kinds: collections.Counter[str] = collections.Counter()
    for record in caplog.records:
        if record.name == "pairwatch" and record.msg.startswith("pairwatch: internal error"):
            kinds[str(record.args[0])] += 1  # type: ignore[index]
    return kinds


class _Raising:
    """An instrument whose every recording call raises."""

    def add(self, *args: Any, **kwargs: Any) -> None:
        raise Boom("counter")

    def record(self, *args: Any, **kwargs: Any) -> None:
        raise Boom("histogram")


class _Meter:
    """Delegates to a working SDK meter, except the instrument kinds listed as broken."""

    def __init__(self, inner: Any, broken: set[str]) -> None:
        self.inner = inner
        self.broken = broken

    def __getattr__(self, name: str) -> Any:
        if name in self.broken:
            return lambda *a, **k: _Raising()
        return getattr(self.inner, name)


class BrokenMeterProvider(ApiMeterProvider):
    """``broken`` names meter factory methods (``create_counter``, ``create_histogram``)
    whose instruments raise; ``"get_meter"`` makes the provider itself raise."""

    def __init__(self, broken: set[str], inner: MeterProvider | None = None) -> None:
        self.inner = inner or MeterProvider()
        self.broken = broken

    def get_meter(self, name: str, version: str | None = None, *args: Any, **kw: Any) -> Any:
        if "get_meter" in self.broken:
            raise Boom("get_meter")
        return _Meter(self.inner.get_meter(name, version, *args, **kw), self.broken)


class BrokenTracerProvider(TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        raise Boom("get_tracer")


class RaisingProcessor(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: Any) -> None:
        raise Boom("span processor")


class RaisingExporter(SpanExporter):
    def export(self, spans: Any) -> Any:
        raise Boom("exporter")

    def shutdown(self) -> None:
        pass


def tracer_with(processor: SpanProcessor) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider


def raising_exporter_provider() -> TracerProvider:
    return tracer_with(SimpleSpanProcessor(RaisingExporter()))


logging.getLogger("pairwatch").setLevel(logging.INFO)


class _Tally:
    """An instrument that sums what it is given, by name and attribute set."""

    def __init__(self, name: str, book: dict[tuple[str, frozenset[Any]], float]) -> None:
        self.name = name
        self.book = book

    def add(self, amount: float, attributes: Any = None, *args: Any, **kwargs: Any) -> None:
        key = (self.name, frozenset((attributes or {}).items()))
        self.book[key] = self.book.get(key, 0) + amount

    def record(self, amount: float, attributes: Any = None, *args: Any, **kwargs: Any) -> None:
        key = (self.name + ":count", frozenset((attributes or {}).items()))
        self.book[key] = self.book.get(key, 0) + 1


class CountingMeterProvider(ApiMeterProvider):
    """A meter that only sums, at a fraction of the SDK's cost per call.

    For loops of 10^5..10^6 batches, where the SDK's ~10 us per record would dominate;
    exactness is what these tests check, not the SDK."""

    def __init__(self) -> None:
        self.book: dict[tuple[str, frozenset[Any]], float] = {}

    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        book = self.book

        class Meter:
            def __getattr__(self, factory: str) -> Any:
                return lambda name, *a, **k: _Tally(name, book)

        return Meter()

    def value(self, name: str, **attrs: str) -> float:
        """Sum of ``name`` over attribute sets including ``attrs`` (dots written as __)."""
        want = {k.replace("__", "."): v for k, v in attrs.items()}
        return sum(
            v
            for (n, a), v in self.book.items()
            if n == name and all(dict(a).get(k) == x for k, x in want.items())
        )

    def label_values(self, name: str, label: str) -> set[str]:
        return {dict(a)[label] for (n, a) in self.book if n == name and label in dict(a)}
