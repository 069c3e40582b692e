"""The current OpenTelemetry context, read in one C call where the runtime allows it.

Why: every tracked call reads the current context twice (is instrumentation suppressed?
what is the span parent and the context to propagate?), and the API's ``get_current`` is two
Python calls deep before it reaches the ``ContextVar`` that holds the context.  When the
runtime context is the API's own ``ContextVarsRuntimeContext`` (the default, and the only one
the API ships), :func:`get_current` is that variable's ``get``: the same object, read
directly.  Any other runtime context (``OTEL_PYTHON_CONTEXT`` names one), or an API that
keeps the variable elsewhere, gets the API's own function: the shortcut can only be faster,
never different.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable

from opentelemetry import context as otel_context
from opentelemetry.context import Context

__all__ = ["get_current", "reads_directly"]


def _getter() -> tuple[Callable[[], Context], bool]:
    try:
        from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext

        runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
        if type(runtime) is ContextVarsRuntimeContext:
            var = getattr(runtime, "_current_context", None)
            if isinstance(var, contextvars.ContextVar):
                return var.get, True
    except Exception:  # an API without the module: its own function is always right
        pass
    return otel_context.get_current, False


get_current, reads_directly = _getter()
"""``get_current()``: what ``opentelemetry.context.get_current()`` returns.
``reads_directly``: whether it is the variable's own ``get`` (for the tests)."""
