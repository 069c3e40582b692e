"""The versions of each client library pairwatch's integrations are tested with.

An integration wraps private paths of its library (``Session.send``, ``_request``, a
provider's session manager), which a new major version may move; wrapping a version nobody
tested could count wrongly in silence.  So each integration checks, when it installs, that
the library is within its range: outside it, one clear log line, and the client is left
unwrapped.  The oldest end is also each extra's requirement in ``pyproject.toml`` (a test
keeps the two equal); CI runs the integration tests at both ends
(``scripts/test_library_range.sh``).  ``PAIRWATCH_ANY_VERSION=true`` wraps any version.
"""

from __future__ import annotations

import logging
import os
import re
from importlib.metadata import PackageNotFoundError, version
from typing import Final

__all__ = ["DISTRIBUTIONS", "RANGES", "check", "parse"]

RANGES: Final[dict[str, tuple[str, str]]] = {
    # distribution: (oldest supported, first version not supported)
    "httpx": ("0.27", "1"),
    "httpx2": ("2.13", "3"),
    "requests": ("2.31", "3"),
    "aiohttp": ("3.9", "4"),
    "web3": ("7.7", "9"),  # 7.7: AsyncHTTPProvider batches
    "websockets": ("13", "18"),
    "mcp": ("2.3", "3"),
    "pygls": ("2.1", "3"),
    "pylsp_jsonrpc": ("1.1", "2"),
    "multilspy": ("0.1.1", "0.2"),
}
"""Each library's range, by module name, oldest included."""

DISTRIBUTIONS: Final[dict[str, str]] = {"pylsp_jsonrpc": "python-lsp-jsonrpc"}
"""Where a module's distribution has another name."""

_log = logging.getLogger("pairwatch")
_said: set[str] = set()


def parse(text: str) -> tuple[int, ...]:
    """The release numbers of a version (``"0.28.1"`` -> (0, 28, 1); ``"2.0rc1"`` -> (2, 0))."""
    found = re.match(r"\d+(?:\.\d+)*", text.strip())
    return tuple(int(part) for part in found.group(0).split(".")) if found else ()


def check(module: str) -> bool:
    """True when ``module``'s installed version is in its range (or it has none); else
    logs once why its clients are left unwrapped and returns False."""
    bounds = RANGES.get(module)
    if bounds is None or os.environ.get("PAIRWATCH_ANY_VERSION", "").lower() == "true":
        return True
    try:
        installed = version(DISTRIBUTIONS.get(module, module))
    except PackageNotFoundError:
        return True  # a vendored or renamed copy: nothing to compare
    low, high = bounds
    if parse(low) <= parse(installed) < parse(high):
        return True
    if module not in _said:
        _said.add(module)
        _log.warning(
            "pairwatch: %s %s is outside the versions pairwatch supports (>=%s,<%s); its "
            "clients are not instrumented (PAIRWATCH_ANY_VERSION=true instruments them anyway)",
            module,
            installed,
            low,
            high,
        )
    return False
