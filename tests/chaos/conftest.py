"""Fixtures for the chaos server's own tests (real sockets, no mocks)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
# The worktree's package must win over any editable install of another checkout.
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from pairwatch.chaos import ChaosServer  # noqa: E402


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
