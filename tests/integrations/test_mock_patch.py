"""``unittest.mock.patch.object(SomeClass, "method")`` behaves exactly as without pairwatch.

Users test their code by patching a client class's send method, before or after
``pairwatch.instrument(client)`` ran (a fixture may instrument first).  Without pairwatch,
the client calls the class's current attribute, so the mock answers and the network is never
reached.  With pairwatch the same must hold: the mock is called with the same arguments,
the caller gets the same result, a counting server on loopback sees no request, and
pairwatch records nothing for a call that never reached a wire.  Once the patch is gone, the
still-instrumented client reaches the real server again and is counted.

web3's retry cases mirror web3.py 8's own ``test_http_request_retry.py``: a patched
``make_post_request`` that raises is retried a fixed number of times; pairwatch used to
bypass the patch and post to the real endpoint.
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

import aiohttp
import httpx
import pytest
import requests
from components import need

import pairwatch

BATCH = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "echo"} for i in range(3)])
REPLY = json.dumps([{"jsonrpc": "2.0", "id": i, "result": i} for i in range(3)]).encode()
JSON = {"Content-Type": "application/json"}
WEB3_INSTALL = "pip install 'pairwatch[web3]' (scripts/bootstrap.sh does)"


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


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/"
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
async def _opened(make: Callable[[], Any]) -> AsyncIterator[Any]:
    client = make()
    try:
        yield client
    finally:
        closing = getattr(client, "aclose", None) or getattr(client, "close", None)
        if closing is not None and asyncio.iscoroutine(result := closing()):
            await result


def _httpx_reply() -> dict[str, Any]:
    return {"return_value": httpx.Response(200, content=REPLY, headers=JSON)}


def _httpx_seen(m: mock.Mock) -> Any:
    return [
        (c.args[0].method, str(c.args[0].url), c.args[0].content, c.kwargs) for c in m.mock_calls
    ]


async def _httpx_sync_call(client: httpx.Client, url: str) -> Any:
    r = client.post(url, content=BATCH, headers=JSON)
    return r.status_code, r.json()


async def _httpx_async_call(client: httpx.AsyncClient, url: str) -> Any:
    r = await client.post(url, content=BATCH, headers=JSON)
    return r.status_code, r.json()


def _requests_reply() -> dict[str, Any]:
    response = requests.Response()
    response.status_code = 200
    response._content = REPLY
    response.headers.update(JSON)
    return {"return_value": response}


def _requests_seen(m: mock.Mock) -> Any:
    return [(c.args[0].method, c.args[0].url, c.args[0].body, c.kwargs) for c in m.mock_calls]


async def _requests_call(session: requests.Session, url: str) -> Any:
    r = session.post(url, data=BATCH, headers=JSON, timeout=5)
    return r.status_code, r.json()


def _aiohttp_reply() -> dict[str, Any]:
    response = mock.MagicMock(status=200)
    response.read = mock.AsyncMock(return_value=REPLY)
    return {"return_value": response}


@contextlib.asynccontextmanager
async def _aiohttp_session(url: str) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def _aiohttp_call(session: aiohttp.ClientSession, url: str) -> Any:
    r = await session.post(url, data=BATCH, headers=JSON)
    got = await r.read()
    if hasattr(r, "release"):
        r.release()
    return r.status, json.loads(got)


def _calls(m: mock.Mock) -> Any:
    return [(c.args, c.kwargs) for c in m.mock_calls]


def _web3_target(is_async: bool) -> tuple[type, str]:
    from web3._utils.http_session_manager import HTTPSessionManager

    return HTTPSessionManager, "async_make_post_request" if is_async else "make_post_request"


def _web3_echo(endpoint_uri: str, data: bytes, **kwargs: Any) -> bytes:
    sent = json.loads(data)
    return json.dumps({"jsonrpc": "2.0", "id": sent["id"], "result": "0x1"}).encode()


def _web3(is_async: bool, failing: bool) -> Case:
    """web3 over HTTP; ``failing``: the patched post raises and web3 retries it."""

    def client(url: str) -> contextlib.AbstractAsyncContextManager[Any]:
        from web3 import AsyncHTTPProvider, AsyncWeb3, HTTPProvider, Web3
        from web3.providers.rpc.utils import ExceptionRetryConfiguration

        retry = ExceptionRetryConfiguration(errors=(ConnectionError,), retries=3, backoff_factor=0)
        if is_async:
            return _opened(
                lambda: AsyncWeb3(AsyncHTTPProvider(url, exception_retry_configuration=retry))
            )
        return _opened(lambda: Web3(HTTPProvider(url, exception_retry_configuration=retry)))

    async def call(w3: Any, url: str) -> Any:
        try:
            return (await w3.eth.chain_id) if is_async else w3.eth.chain_id
        except ConnectionError as exc:
            return f"raised {type(exc).__name__}"

    def mock_kwargs() -> dict[str, Any]:
        return {"side_effect": ConnectionError("mocked") if failing else _web3_echo}

    return Case(
        target=lambda: _web3_target(is_async),
        mock_kwargs=mock_kwargs,
        client=client,
        call=call,
        seen=_calls,
        real=1,
        requests=1,
    )


CASES: dict[str, Case] = {
    "httpx": Case(
        lambda: (httpx.Client, "send"),
        _httpx_reply,
        lambda url: _opened(lambda: httpx.Client(timeout=5)),
        _httpx_sync_call,
        _httpx_seen,
        (200, [{"jsonrpc": "2.0", "id": i, "result": "0x1"} for i in range(3)]),
        3,
    ),
    "httpx_async": Case(
        lambda: (httpx.AsyncClient, "send"),
        _httpx_reply,
        lambda url: _opened(lambda: httpx.AsyncClient(timeout=5)),
        _httpx_async_call,
        _httpx_seen,
        (200, [{"jsonrpc": "2.0", "id": i, "result": "0x1"} for i in range(3)]),
        3,
    ),
    "requests": Case(
        lambda: (requests.Session, "send"),
        _requests_reply,
        lambda url: _opened(requests.Session),
        _requests_call,
        _requests_seen,
        (200, [{"jsonrpc": "2.0", "id": i, "result": "0x1"} for i in range(3)]),
        3,
    ),
    "aiohttp": Case(
        lambda: (aiohttp.ClientSession, "_request"),
        _aiohttp_reply,
        _aiohttp_session,
        _aiohttp_call,
        _calls,
        (200, [{"jsonrpc": "2.0", "id": i, "result": "0x1"} for i in range(3)]),
        3,
    ),
    "web3": _web3(is_async=False, failing=False),
    "web3_async": _web3(is_async=True, failing=False),
    "web3_retry": _web3(is_async=False, failing=True),
    "web3_async_retry": _web3(is_async=True, failing=True),
}


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


@pytest.mark.parametrize("order", ["before", "after"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_class_patch_behaves_as_without_pairwatch(otel, server, name, order):
    if name.startswith("web3"):
        need("web3", WEB3_INSTALL)
    case = CASES[name]
    Counting.hits = 0
    out = asyncio.run(_run(case, server, order, otel))
    assert out["patched"] == out["bare"]
    assert out["patched_seen"] == out["bare_seen"]
    assert len(out["patched_seen"]) == (3 if name.endswith("retry") else 1)
    assert out["hits_while_patched"] == 0  # the real network was never reached
    assert out["closed_while_patched"] == 0  # a mocked call is no exchange on any wire
    # The patch is gone: the client, still instrumented, reaches the server and is counted.
    assert out["real"] == case.real
    assert Counting.hits == 1
    assert otel.value("batch.closed") == 1
    assert otel.value("batch.requests") == case.requests
    assert otel.value("batch.missing_response") == 0


def test_a_class_patch_does_not_outlive_uninstrument(otel, server):
    """Instrument, patch, uninstrument inside the patch, leave it: the class's own method
    is back and the instance holds nothing of pairwatch's."""
    client = httpx.Client(timeout=5)
    original = httpx.Client.send
    pairwatch.instrument(client, meter_provider=otel.meter_provider)
    with mock.patch.object(httpx.Client, "send", **_httpx_reply()) as patched:
        assert client.post(server, content=BATCH).json()[0]["result"] == 0
        pairwatch.uninstrument(client)
    assert "send" not in vars(client)
    assert httpx.Client.send is original
    assert len(patched.mock_calls) == 1
    Counting.hits = 0
    assert client.post(server, content=BATCH).status_code == 200
    assert Counting.hits == 1
    assert otel.value("batch.closed") == 0  # uninstrumented: nothing counted
    client.close()


def test_an_instance_patch_over_pairwatch_is_restored_to_pairwatch(otel, server):
    """``patch.object(client, "send")`` after instrument: the mock answers; when the patch
    ends, pairwatch's wrapper is back and counts again."""
    client = pairwatch.instrument(httpx.Client(timeout=5), meter_provider=otel.meter_provider)
    with mock.patch.object(client, "send", **_httpx_reply()) as patched:
        assert client.post(server, content=BATCH).json()[2]["result"] == 2
    assert len(patched.mock_calls) == 1
    assert otel.value("batch.closed") == 0
    Counting.hits = 0
    assert client.post(server, content=BATCH).status_code == 200
    assert Counting.hits == 1
    assert otel.value("batch.closed") == 1
    assert otel.value("batch.requests") == 3
    pairwatch.uninstrument(client)
    assert "send" not in vars(client)
    client.close()
