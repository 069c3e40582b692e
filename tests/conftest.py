"""Fixtures every test folder shares: exported telemetry, a hand-moved clock, chaos servers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from otel_support import FakeClock, Otel

from pairwatch.chaos import ChaosServer


@pytest.fixture
def otel() -> Otel:
    return Otel()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def chaos() -> Iterator[Callable[..., ChaosServer]]:
    """Factory: a ChaosServer in a thread (a proxy when given upstream=); stopped at teardown.

    Folders that want one server per module (tests/robustness) override this name.
    """
    started: list[ChaosServer] = []

    def make(*args: Any, **kwargs: Any) -> ChaosServer:
        srv = ChaosServer(*args, **kwargs).run_in_thread()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop_thread()
