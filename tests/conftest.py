from __future__ import annotations

import pytest
from otel_support import FakeClock, Otel


@pytest.fixture
def otel() -> Otel:
    return Otel()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
