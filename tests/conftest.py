from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from otel_support import FakeClock, Otel

IN_CI = os.environ.get("CI", "").lower() == "true"


def require(available: bool, what: str, install: str) -> None:
    """Skip when a real component is absent, naming the install step; fail under CI=true."""
    if available:
        return
    message = f"{what} is not available: {install}"
    if IN_CI:
        pytest.fail(message + " (CI=true: absent components fail)")
    pytest.skip(message)


@pytest.fixture
def otel() -> Otel:
    return Otel()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
