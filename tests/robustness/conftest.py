"""Fixtures for the robustness suite: a real chaos server, a fresh rate limiter, providers
that fail on purpose.  The HTTP drivers are the integration suite's, so "what the caller
saw" means the same thing here as in the transparency tests."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
for path in (HERE, HERE.parent / "integrations", HERE.parents[1] / "src"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from http_drivers import Handler  # noqa: E402
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
    """A stdlib HTTP server answering each path with the bytes scripted for it in
    ``http_drivers.SCRIPTS`` (status, headers, chunks), exactly as given."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def fresh_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rate limiter with no history, so "logged once" is about this test alone."""
    fresh_rate_limit(monkeypatch)
