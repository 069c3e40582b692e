"""Installing and removing wrappers, on one instance or on a class, shared by integrations.

One exchange must be counted once, whatever wraps it: an instance wrapper over a class-wide
one (``instrument(client)`` with the global instrumentor on), or a library that calls its
own wrapped method again (requests' redirects call ``Session.send`` per hop).  So the
outermost tracked call marks the context (:data:`ACTIVE`) and nested calls pass through: the
caller's call is the exchange, its final response the reply.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import wrapt

from pairwatch.integrations import Handle

Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]

_MISSING: Any = object()


ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("pairwatch_http", default=False)
"""Set while a tracked exchange's wrapped call runs (per thread, per asyncio task)."""


@contextmanager
def tracking() -> Iterator[None]:
    """Mark the current context as inside a tracked exchange for the wrapped call."""
    token = ACTIVE.set(True)
    try:
        yield
    finally:
        ACTIVE.reset(token)


class InstanceWrapper(wrapt.FunctionWrapper):  # type: ignore[type-arg]
    """A wrapt wrapper placed in one object's ``__dict__`` by ``instrument(client)``."""


class PatchHandle(Handle):
    """Remembers what each wrapped attribute was, so ``uninstall`` restores it exactly."""

    def __init__(self, obj: object) -> None:
        self.obj = obj
        self._saved: list[tuple[str, object]] = []
        self.on_uninstall: list[Callable[[], None]] = []

    def wrap(self, name: str, wrapper: Wrapper) -> None:
        original = getattr(self.obj, name)
        own = vars(self.obj).get(name, _MISSING)
        # object.__setattr__: some clients warn on unknown attributes (aiohttp in debug mode).
        object.__setattr__(self.obj, name, InstanceWrapper(original, wrapper))
        self._saved.append((name, own))

    def uninstall(self) -> None:
        for name, own in reversed(self._saved):
            if own is _MISSING:
                object.__delattr__(self.obj, name)
            else:
                object.__setattr__(self.obj, name, own)
        self._saved.clear()
        for hook in self.on_uninstall:
            hook()
        self.on_uninstall.clear()


def host_of(url: object) -> str | None:
    """The host name of a URL object or string, or None; never raises."""
    try:
        host = getattr(url, "host", None)
        if isinstance(host, str):
            return host or None
        from urllib.parse import urlsplit

        return urlsplit(str(url)).hostname
    except Exception:
        return None
