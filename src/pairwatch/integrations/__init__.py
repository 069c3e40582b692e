"""One module per client library; each knows its library's send and receive paths only.

An integration turns those paths into :class:`pairwatch.channel.Channel` calls and nothing
else.  Integrations never import one another; :mod:`pairwatch.api` finds the right one for a
client through :data:`REGISTRY`, importing a library only when that library is installed.

The kit every integration is built from, so that none writes its own:

* :mod:`._kit.patch`: the one patcher (install, exact restore, call-time lookup of the
  original, pass-through under ``suppress_instrumentation`` and for mocks);
* :mod:`._kit.exchange`: the skeleton of one HTTP exchange; an HTTP client library
  subclasses ``HttpClient`` (:mod:`._kit.client`) with where the request body is and how to
  tap the response; its parts (request, payload, the exchange, what a 202 or a redirect
  means) in :mod:`._kit.request`;
* :mod:`._kit.decoders`: the library's own content decoders for pairwatch's copy of a body;
  :mod:`._kit.body`: the charset a body is read with, and the process budget of buffered
  bytes;
* :mod:`._kit.calls`: hooks around a call on a stream (before, after, on a closing
  exception, finally) written once for plain and coroutine methods, and ``argument()``;
* :mod:`._kit.stream`: the response-body tap; :mod:`._kit.sse`: the event-stream parser;
  :mod:`._kit.ws`: the websocket tap;
* :func:`pairwatch.runtime.guard.shielded`: the one way glue calls into pairwatch.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pairwatch.channel import Options
from pairwatch.integrations import supported

MISSING: Any = object()
"""The one "no value here" sentinel of the integrations (``None`` can be a real value)."""


def hold(obj: object) -> Callable[[], Any]:
    """A reference to an instrumented client that does not keep it alive: a weak reference
    when the type allows one, else (``__slots__`` without ``__weakref__``) a strong one."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


class Handle:
    """What an installed integration returns so that it can be undone."""

    def uninstall(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class Integration:
    """A client library pairwatch knows: how to recognise its objects and instrument them."""

    name: str
    detect: Callable[[object], bool]
    install: Callable[[object, Options], Handle]


REGISTRY: list[Integration] = []


def register(integration: Integration) -> None:
    """Add an integration; later registrations are tried first so users can override."""
    REGISTRY.insert(0, integration)


@dataclass(frozen=True)
class Known:
    """A library pairwatch ships an integration for, recognised without importing it.

    Detection looks only at the top-level module names of the client's class hierarchy, so
    ``instrument(obj)`` never imports web3 or websockets unless ``obj`` comes from them;
    ``module`` (under :mod:`pairwatch.integrations`) is imported on first install.
    """

    name: str
    roots: frozenset[str]
    module: str

    def load(self) -> Any:
        return importlib.import_module(f"pairwatch.integrations.{self.module}")

    def detect(self, client: object) -> bool:
        try:
            mro = type(client).__mro__
        except Exception:
            return False
        return any(k.__module__.split(".", 1)[0] in self.roots for k in mro)

    def install(self, client: object, options: Options) -> Handle:
        if not all(supported.check(root) for root in self.roots_of(client)):
            return Unwrapped()
        handle: Handle = self.load().install(client, options)
        return handle

    def roots_of(self, client: object) -> set[str]:
        """The libraries among ``roots`` the client's classes come from."""
        try:
            mro = type(client).__mro__
        except Exception:
            return set()
        return {k.__module__.split(".", 1)[0] for k in mro} & self.roots


class Unwrapped(Handle):
    """A client left as it is (its library's version is outside the supported range)."""

    def uninstall(self) -> None:
        pass


KNOWN: tuple[Known, ...] = (
    Known("httpx", frozenset({"httpx", "httpx2"}), "httpx_client"),
    Known("requests", frozenset({"requests"}), "requests_client"),
    Known("aiohttp", frozenset({"aiohttp"}), "aiohttp_client"),
    Known("web3", frozenset({"web3"}), "web3_provider"),
    Known("websockets", frozenset({"websockets"}), "websockets_client"),
    Known("mcp", frozenset({"mcp"}), "mcp.session"),
    Known("pygls", frozenset({"pygls"}), "lsp.pygls_client"),
    Known("pylsp-jsonrpc", frozenset({"pylsp_jsonrpc"}), "lsp.pylsp_client"),
    Known("multilspy", frozenset({"multilspy"}), "lsp.multilspy_client"),
)
"""Built-in integrations, in detection order; the global instrumentor walks the same list."""

for _known in reversed(KNOWN):
    register(Integration(_known.name, _known.detect, _known.install))
