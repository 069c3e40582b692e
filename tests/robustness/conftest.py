"""Fixtures for the robustness suite: a real chaos server, a fresh rate limiter, providers
that fail on purpose.  The HTTP drivers are the integration suite's, so "what the caller
saw" means the same thing here as in the transparency tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for path in (HERE, HERE.parent / "integrations"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from http_drivers import serve_scripted  # noqa: E402
from robust_support import fresh_rate_limit  # noqa: E402

from pairwatch.chaos import ChaosServer  # noqa: E402


@pytest.fixture(scope="module")
def chaos() -> Iterator[ChaosServer]:
    """One chaos server per module; each test scripts its own faults."""
    srv = ChaosServer().run_in_thread()
    yield srv
    srv.stop_thread()


@pytest.fixture(scope="session")
def replying() -> Iterator[str]:
    """The scripted stdlib server of ``http_drivers`` (exact bytes per path)."""
    with serve_scripted() as url:
        yield url


@pytest.fixture
def fresh_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rate limiter with no history, so "logged once" is about this test alone."""
    fresh_rate_limit(monkeypatch)
