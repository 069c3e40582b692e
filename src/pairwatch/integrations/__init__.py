"""One module per client library; each knows its library's send and receive paths only.

An integration turns those paths into :class:`pairwatch.channel.Channel` calls and nothing
else.  Integrations never import one another; :mod:`pairwatch.api` finds the right one for a
client through :data:`REGISTRY`, importing a library only when that library is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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


def _is_mcp(obj: object) -> bool:
    """By the type's module alone, so that mcp is never imported to look at other clients."""
    return type(obj).__module__.partition(".")[0] == "mcp"


def _install_mcp(obj: object, options: Options) -> Handle:
    from pairwatch.integrations import mcp_session  # imports mcp: only for mcp's objects

    return mcp_session.install(obj, options)


register(Integration("mcp", _is_mcp, _install_mcp))
