"""The current OpenTelemetry context, read in one C call, and whether it suppresses us.

Every tracked call reads the current context (the span parent, the context to propagate,
whether instrumentation is suppressed), and the API's ``get_current`` is two Python calls
deep before it reaches the ``ContextVar`` that holds it.  With the API's own runtime context
(the default), :data:`get_current` is that variable's ``get``: the same object, read
directly.  Any other runtime context gets the API's own function.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable

from opentelemetry import context as otel_context
from opentelemetry.context import Context

__all__ = ["check", "get_current", "suppressed"]

_SUPPRESS_KEY: str = getattr(
    otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", "suppress_instrumentation"
)
try:  # the contrib package's plain-string key too, where it defines one (checked alike)
    from opentelemetry.instrumentation.utils import (
        _SUPPRESS_INSTRUMENTATION_KEY_PLAIN as _PLAIN_KEY,
    )
except ImportError:  # without the instrumentation extra
    _PLAIN_KEY = "suppress_instrumentation"


def suppressed(current: Context) -> bool:
    """Whether ``current`` suppresses instrumentation (OpenTelemetry's own exporters run
    inside such a context), as contrib's ``is_instrumentation_enabled`` reads it."""
    return bool(current) and bool(current.get(_SUPPRESS_KEY) or current.get(_PLAIN_KEY))


def _variable() -> contextvars.ContextVar[Context] | None:
    """The API runtime context's variable, when the runtime is the API's own."""
    from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext

    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    if type(runtime) is not ContextVarsRuntimeContext:
        return None
    var = getattr(runtime, "_current_context", None)
    return var if isinstance(var, contextvars.ContextVar) else None


def check(name: str = "context") -> str | None:
    """None when the variable's ``get`` answers what the API's ``get_current`` answers,
    inside and outside an attached context; else what differs."""
    var = _variable()
    if var is None:
        return "the runtime context is not the API's own"
    if var.get() is not otel_context.get_current():
        return "its variable holds another context"
    token = otel_context.attach(otel_context.set_value("pairwatch.sdk.check", 1))
    try:
        if var.get() is not otel_context.get_current():
            return "an attached context reads differently"
    finally:
        otel_context.detach(token)
    return None


def _getter() -> Callable[[], Context]:
    from pairwatch.otel import sdk

    var = _variable() if sdk.on("context") else None
    return otel_context.get_current if var is None else var.get


get_current: Callable[[], Context] = _getter()
"""What ``opentelemetry.context.get_current()`` returns."""
