"""Fixtures for the HTTP integration tests: real servers on 127.0.0.1, one driver per library."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from http_drivers import DRIVERS, Seen, serve_scripted

from pairwatch.chaos import ChaosServer


@pytest.fixture(params=sorted(DRIVERS))
def driver(request: pytest.FixtureRequest) -> tuple[str, Callable[..., Seen]]:
    return request.param, DRIVERS[request.param]


@pytest.fixture(scope="module")
def chaos_server() -> Iterator[ChaosServer]:
    """One chaos server per module; each test sets its own fault script."""
    srv = ChaosServer().run_in_thread()
    yield srv
    srv.stop_thread()


@pytest.fixture(scope="session")
def scripted() -> Iterator[str]:
    """The scripted stdlib server of ``http_drivers`` (exact bytes per path)."""
    with serve_scripted() as url:
        yield url
