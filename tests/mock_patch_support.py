"""The runner behind the mock.patch transparency tests (tests/integrations, tests/web3).

One case per client library: a class method patched with ``unittest.mock.patch.object``
before or after ``pairwatch.instrument``; the same call bare and instrumented; a counting
server on loopback that must see nothing while the patch is on.  The web3 cases live under
tests/web3 because importing web3 raises the interpreter's recursion limit for the rest of
the process (py_ecc does), which other suites must not inherit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from unittest import mock

import pairwatch


class Counting(BaseHTTPRequestHandler):
    """Answers every JSON-RPC id with ``0x1`` and counts the requests it was sent."""

    protocol_version = "HTTP/1.1"
    hits = 0
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        with Counting.lock:
            Counting.hits += 1
        sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))

        def reply(m: dict[str, Any]) -> dict[str, Any]:
            return {"jsonrpc": "2.0", "id": m["id"], "result": "0x1"}

        body = json.dumps([reply(m) for m in sent] if isinstance(sent, list) else reply(sent))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())


@contextlib.contextmanager
def counting_server() -> Iterator[str]:
    """A :class:`Counting` server on 127.0.0.1; yields its URL."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/"
    finally:
        srv.shutdown()
        srv.server_close()


@dataclass(frozen=True)
class Case:
    """One client library: what to patch, how to call it, how to read the mock's call."""

    target: Callable[[], tuple[type, str]]
    mock_kwargs: Callable[[], dict[str, Any]]  # fresh per patch: a reply object is read once
    client: Callable[[str], contextlib.AbstractAsyncContextManager[Any]]
    call: Callable[[Any, str], Awaitable[Any]]
    seen: Callable[[mock.Mock], Any]  # the mock's calls, as comparable values
    real: Any  # what ``call`` returns from the counting server
    requests: int  # JSON-RPC requests in one real call


@contextlib.asynccontextmanager
async def opened(make: Callable[[], Any]) -> AsyncIterator[Any]:
    """A client made by ``make``, closed (sync or async) at the end."""
    client = make()
    try:
        yield client
    finally:
        provider = getattr(client, "provider", None)  # web3: the provider owns the session
        closing = (
            getattr(client, "aclose", None)
            or getattr(client, "close", None)
            or getattr(provider, "disconnect", None)
        )
        if closing is not None and asyncio.iscoroutine(result := closing()):
            await result


def calls(m: mock.Mock) -> Any:
    return [(c.args, c.kwargs) for c in m.mock_calls]


async def _run(case: Case, url: str, order: str, otel: Any) -> dict[str, Any]:
    """The same call bare and instrumented (patched ``order`` instrument), then once for
    real through the still-instrumented client, then uninstrumented."""
    cls, name = case.target()
    out: dict[str, Any] = {}
    async with case.client(url) as client:
        with mock.patch.object(cls, name, **case.mock_kwargs()) as bare_mock:
            out["bare"] = await case.call(client, url)
        out["bare_seen"] = case.seen(bare_mock)
    async with case.client(url) as client:

        def instrument() -> None:
            pairwatch.instrument(client, meter_provider=otel.meter_provider)

        if order == "after":
            instrument()
        with mock.patch.object(cls, name, **case.mock_kwargs()) as patched:
            if order == "before":
                instrument()
            out["patched"] = await case.call(client, url)
        out["patched_seen"] = case.seen(patched)
        out["closed_while_patched"] = otel.value("batch.closed")
        out["hits_while_patched"] = Counting.hits
        out["real"] = await case.call(client, url)
        pairwatch.uninstrument(client)
    return out


def check(case: Case, url: str, order: str, otel: Any, *, calls: int = 1) -> None:
    """Run ``case`` and assert: the patched call equals the bare one (result and the mock's
    arguments), nothing reached the server or was counted while patched, and the real call
    afterwards was counted once."""
    Counting.hits = 0
    out = asyncio.run(_run(case, url, order, otel))
    assert out["patched"] == out["bare"]
    assert out["patched_seen"] == out["bare_seen"]
    assert len(out["patched_seen"]) == calls
    assert out["hits_while_patched"] == 0  # the real network was never reached
    assert out["closed_while_patched"] == 0  # a mocked call is no exchange on any wire
    # The patch is gone: the client, still instrumented, reaches the server and is counted.
    assert out["real"] == case.real
    assert Counting.hits == 1
    assert otel.value("batch.closed") == 1
    assert otel.value("batch.requests") == case.requests
    assert otel.value("batch.missing_response") == 0
