"""pairwatch reads the current OpenTelemetry context as the API does, in one C call.

``pairwatch.otel.sdk.context.get_current`` is the runtime context's ``ContextVar.get`` when the
runtime is the API's own ``ContextVarsRuntimeContext``, and the API's ``get_current``
otherwise.  Both must return the very context the API returns; the shortcut must engage on
every SDK version pyproject allows (CI runs this on the oldest and the newest), and must
fall back, not break, under another runtime context.
"""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context.context import Context, _RuntimeContext
from opentelemetry.sdk.trace import TracerProvider

from pairwatch.otel import sdk
from pairwatch.otel.sdk import context as current


def test_the_shortcut_engages_on_the_default_runtime():
    assert sdk.status()["context"] == (True, "on")
    assert current.get_current is not otel_context.get_current


def test_it_returns_the_apis_context_everywhere():
    tracer = TracerProvider().get_tracer("t")
    assert current.get_current() is otel_context.get_current()
    token = otel_context.attach(otel_context.set_value("k", "v"))
    try:
        assert current.get_current() is otel_context.get_current()
        assert current.get_current().get("k") == "v"
        with tracer.start_as_current_span("outer") as span:
            inside = current.get_current()
            assert inside is otel_context.get_current()
            assert trace.get_current_span(inside) is span
    finally:
        otel_context.detach(token)
    assert current.get_current() is otel_context.get_current()

    async def in_task() -> bool:
        otel_context.attach(otel_context.set_value("task", 1))
        return current.get_current() is otel_context.get_current()

    assert asyncio.run(in_task())
    assert current.get_current().get("task") is None  # the task's context stayed its own


class _OtherRuntime(_RuntimeContext):
    """A runtime context that is not the API's contextvars one (as OTEL_PYTHON_CONTEXT may
    select): it keeps one context for the whole process."""

    def __init__(self) -> None:
        self.context = Context({"other": True})

    def attach(self, context: Context) -> object:
        self.context = context
        return None

    def get_current(self) -> Context:
        return self.context

    def detach(self, token: object) -> None:
        pass


def test_another_runtime_context_gets_the_apis_function(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(otel_context, "_RUNTIME_CONTEXT", _OtherRuntime())
    assert current.check() == "the runtime context is not the API's own"
    getter = current._getter()
    assert getter is otel_context.get_current
    assert getter().get("other") is True
