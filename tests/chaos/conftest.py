"""Fixtures for the chaos server's own tests (real sockets, no mocks)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pairwatch.chaos import ChaosServer


@pytest.fixture
def chaos() -> Iterator[Callable[..., ChaosServer]]:
    """Factory: start a ChaosServer in a thread; every one is stopped at teardown."""
    started: list[ChaosServer] = []

    def make(*args: Any, **kwargs: Any) -> ChaosServer:
        srv = ChaosServer(*args, **kwargs).run_in_thread()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop_thread()
