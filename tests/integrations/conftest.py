"""Fixtures for the HTTP integration tests: real servers on 127.0.0.1, one driver per library."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
SRC = Path(__file__).resolve().parents[2] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from http_drivers import DRIVERS, Handler, Seen  # noqa: E402

from pairwatch.chaos import ChaosServer  # noqa: E402


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
    """A stdlib HTTP server answering each path with the bytes scripted in SCRIPTS."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
