"""One module per client library; each knows its library's send and receive paths only.

An integration turns those paths into :class:`pairwatch.channel.Channel` calls and nothing
else.  Integrations never import one another; :mod:`pairwatch.api` finds the right one for a
client through :data:`REGISTRY`, importing a library only when that library is installed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pairwatch.channel import Options


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
    """A library pairwatch ships an integration for, found without importing it.

    ``roots`` are the top-level module names of the library's classes; ``module`` is the
    integration module under :mod:`pairwatch.integrations`, imported on first use only.
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
        handle: Handle = self.load().install(client, options)
        return handle


KNOWN: tuple[Known, ...] = (
    Known("httpx", frozenset({"httpx", "httpx2"}), "httpx_client"),
    Known("requests", frozenset({"requests"}), "requests_client"),
    Known("aiohttp", frozenset({"aiohttp"}), "aiohttp_client"),
)
"""Built-in integrations, in detection order; the global instrumentor walks the same list."""

for _known in reversed(KNOWN):
    register(Integration(_known.name, _known.detect, _known.install))
