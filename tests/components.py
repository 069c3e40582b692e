"""Real components the tests need: skip when absent (naming the install step), fail in CI."""

from __future__ import annotations

import importlib
import os
from typing import Any

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def require(available: bool, what: str, install: str) -> None:
    """Skip when a real component is absent, naming the install step; fail under CI=true."""
    if available:
        return
    message = f"{what} is not available: {install}"
    if IN_CI:
        pytest.fail(message + " (CI=true: absent components fail)")
    pytest.skip(message, allow_module_level=True)  # also from a module's top level


def need(module: str, install: str) -> Any:
    """Import an optional module for a test: skip when absent, fail under CI=true."""
    try:
        return importlib.import_module(module)
    except ImportError:
        require(False, f"the Python module {module}", install)
        raise  # unreachable: require() skipped or failed
