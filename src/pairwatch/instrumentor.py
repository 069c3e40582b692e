"""``PairwatchInstrumentor``: every client of every installed library it knows, process-wide.

An OpenTelemetry ``BaseInstrumentor``, registered under the ``opentelemetry_instrumentor``
entry point, so ``opentelemetry-instrument python app.py`` turns it on with the other
instrumentations.  It wraps the client classes' send methods (``httpx.Client.send``,
``requests.Session.send``, ``aiohttp.ClientSession._request``...) through the integrations'
one patcher (:class:`pairwatch.integrations._kit.patch.Patches`), for each library that is
installed; a library that is absent is skipped, never imported.  ``uninstrument()`` puts the
original methods back.  Calls inside OpenTelemetry's ``suppress_instrumentation`` context,
and calls to a method a test replaced with a mock, pass straight through.

``opentelemetry-instrumentation`` is an optional extra: without it, importing this module
raises a ``ModuleNotFoundError`` that names ``pairwatch[instrumentation]``.

``instrumentation_dependencies()`` is empty on purpose: the libraries are alternatives, and
BaseInstrumentor refuses to instrument when any listed dependency is missing.

Clients instrumented one by one with ``pairwatch.instrument(client)`` keep their own
settings: their exchanges are tracked once, by their own wrapper.  web3's HTTP providers are
covered through requests and aiohttp.  With ``mcp`` installed, every MCP ``ClientSession`` is
instrumented as it is made (its transports' own HTTP requests are then never counted by the
HTTP wrappers: the session pairs their replies wherever they arrive); with ``pygls``, every
``JsonRPCClient`` (``LanguageClient``) likewise.  A web3
``WebSocketProvider`` and ``websockets`` connections are per-instance only
(``pairwatch.instrument(obj)``): their integrations have no class-level targets.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Collection
from typing import Any

from pairwatch import config
from pairwatch.api import OPTION_NAMES, build_options
from pairwatch.channel import Options
from pairwatch.integrations import KNOWN, supported
from pairwatch.integrations._kit.patch import Patches

try:
    from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
        BaseInstrumentor,
    )
except ModuleNotFoundError as exc:  # the optional extra is absent: say which one to install
    if not (exc.name or "").startswith("opentelemetry"):
        raise
    raise ModuleNotFoundError(
        "pairwatch.instrumentor.PairwatchInstrumentor needs OpenTelemetry's instrumentation "
        'package: pip install "pairwatch[instrumentation]" (pairwatch.instrument(client) '
        "works without it)",
        name=exc.name,
    ) from exc

__all__ = ["PairwatchInstrumentor"]


def _installed(root: str) -> bool:
    """Whether a library is importable; a bare directory of that name on ``sys.path`` (a
    namespace package, such as a ``tests/mcp`` folder) is not the library."""
    try:
        spec = importlib.util.find_spec(root)
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None


class PairwatchInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Instruments every httpx/httpx2, requests and aiohttp client of the process.

    Keyword arguments of ``instrument()`` are :class:`pairwatch.Options` fields
    (``meter_provider``, ``tracer_provider``, ``timeout``, ``spans``...); others that
    OpenTelemetry's auto-instrumentation passes along are ignored.  Fields not given come
    from the ``PAIRWATCH_*`` environment (:mod:`pairwatch.config`), as for
    ``pairwatch.instrument``.  When ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` names
    pairwatch, ``instrument()`` wraps nothing, whoever calls it.
    """

    _lock = threading.Lock()

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        settings = {k: v for k, v in kwargs.items() if k in OPTION_NAMES}
        self._options = build_options(settings)
        self._wrapped: list[tuple[type, str]] = []
        self._patches = Patches()
        if config.instrumentation_disabled():
            return
        with self._lock:
            for known in KNOWN:
                present = [root for root in known.roots if _installed(root)]
                if not present or not all(supported.check(root) for root in present):
                    continue
                module = known.load()
                targets = getattr(module, "targets", None)
                if targets is None:
                    continue  # instance-only integrations (web3 websockets, websockets)
                for cls, method, wrapper in targets(self._current_options):
                    self._patches.wrap(cls, method, wrapper)
                    self._wrapped.append((cls, method))

    def _current_options(self) -> Options:
        return self._options

    def _uninstrument(self, **kwargs: Any) -> None:
        with self._lock:
            patches = getattr(self, "_patches", None)
            if patches is not None:
                patches.uninstall()
            self._wrapped = []

    @property
    def wrapped(self) -> list[tuple[type, str]]:
        """The (class, method) pairs currently wrapped, for tests and diagnostics."""
        return list(getattr(self, "_wrapped", []))
