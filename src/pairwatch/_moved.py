"""Import paths that moved in 0.2, still importable (with a ``DeprecationWarning``) until 0.3.

0.2 put every module but the public face into folders named for their job.  Code that
imported a module by its old path gets the module at its new one, the very same object, and
one warning naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Final

__all__ = ["MOVED", "install"]

MOVED: Final = {
    "pairwatch.guard": "pairwatch.runtime.guard",
    "pairwatch.switch": "pairwatch.runtime.switch",
    "pairwatch.sweeper": "pairwatch.runtime.sweeper",
    "pairwatch.forks": "pairwatch.runtime.forks",
    "pairwatch.sink": "pairwatch.channel.sink",
    "pairwatch.prepared": "pairwatch.channel.parts",
    "pairwatch.integrations.mcp_session": "pairwatch.integrations.mcp.session",
    "pairwatch.integrations.mcp_raw": "pairwatch.integrations.mcp.raw",
    "pairwatch.integrations.mcp_direct": "pairwatch.integrations.mcp.direct",
    "pairwatch.integrations.mcp_follow": "pairwatch.integrations.mcp.follow",
    "pairwatch.otel.current": "pairwatch.otel.sdk.context",
    "pairwatch.otel.sdk_fast": "pairwatch.otel.sdk.histograms",
    "pairwatch.otel.span_fast": "pairwatch.otel.sdk.spans",
    "pairwatch.otel.root_fast": "pairwatch.otel.sdk.spans",
    "pairwatch.otel.sampler_fast": "pairwatch.otel.sdk.sampling",
}
"""Old dotted path -> new dotted path."""


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a moved module's old path and hands out the module at its new one."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}; the old path goes in pairwatch 0.3",
            DeprecationWarning,
            stacklevel=_importer_level(),
        )
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The module at the new path is already executed."""


def _importer_level() -> int:
    """The ``stacklevel`` of the frame that imported.  ``warnings`` itself passes over the
    import system's bootstrap frames; this passes over the rest of importlib and itself."""
    level, frame = 1, sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if "importlib" in name and "_bootstrap" in name:
            pass  # not counted: warnings skips these
        elif name == __file__ or "importlib" in name:
            level += 1
        else:
            break
        frame = frame.f_back  # type: ignore[assignment]
    return level


def install() -> None:
    """Put the alias finder last on ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
