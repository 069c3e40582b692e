"""``unittest.mock.patch.object(SomeClass, "method")`` behaves exactly as without pairwatch.

Users test their code by patching a client class's send method, before or after
``pairwatch.instrument(client)`` ran (a fixture may instrument first).  Without pairwatch,
the client calls the class's current attribute, so the mock answers and the network is never
reached.  With pairwatch the same must hold: the mock is called with the same arguments,
the caller gets the same result, a counting server on loopback sees no request, and
pairwatch records nothing for a call that never reached a wire.  Once the patch is gone, the
still-instrumented client reaches the real server again and is counted.  (web3's cases:
tests/web3/test_web3_mock_patch.py; the runner: tests/mock_patch_support.py.)
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any
from unittest import mock

import aiohttp
import httpx
import pytest
import requests
from mock_patch_support import Case, Counting, calls, check, counting_server, opened

import pairwatch

BATCH = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "echo"} for i in range(3)])
REPLY = json.dumps([{"jsonrpc": "2.0", "id": i, "result": i} for i in range(3)]).encode()
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with counting_server() as url:
        yield url


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


CASES: dict[str, Case] = {
    "httpx": Case(
        lambda: (httpx.Client, "send"),
        _httpx_reply,
        lambda url: opened(lambda: httpx.Client(timeout=5)),
        _httpx_sync_call,
        _httpx_seen,
        (200, [{"jsonrpc": "2.0", "id": i, "result": "0x1"} for i in range(3)]),
        3,
    ),
    "httpx_async": Case(
        lambda: (httpx.AsyncClient, "send"),
        _httpx_reply,
        lambda url: opened(lambda: httpx.AsyncClient(timeout=5)),
        _httpx_async_call,
        _httpx_seen,
        (200, [{"jsonrpc": "2.0", "id": i, "result": "0x1"} for i in range(3)]),
        3,
    ),
    "requests": Case(
        lambda: (requests.Session, "send"),
        _requests_reply,
        lambda url: opened(requests.Session),
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
        calls,
        (200, [{"jsonrpc": "2.0", "id": i, "result": "0x1"} for i in range(3)]),
        3,
    ),
}


@pytest.mark.parametrize("order", ["before", "after"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_class_patch_behaves_as_without_pairwatch(otel, server, name, order):
    check(CASES[name], server, order, otel)


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


def test_an_autospec_class_patch_is_called_as_the_caller_called_it(otel, server):
    """``patch.object(Class, "send", autospec=True)`` puts a plain function in the class (it
    carries its mock as ``.mock``): pairwatch calls it untouched, without ``stream=True``,
    and counts nothing, since nothing reached a wire."""
    client = pairwatch.instrument(httpx.Client(timeout=5), meter_provider=otel.meter_provider)
    reply = httpx.Response(200, content=REPLY, headers=JSON)
    with mock.patch.object(httpx.Client, "send", autospec=True, return_value=reply) as patched:
        assert client.post(server, content=BATCH).json()[1]["result"] == 1
    assert len(patched.mock_calls) == 1
    assert "stream" not in patched.mock_calls[0].kwargs
    assert otel.value("batch.closed") == 0
    assert otel.value("batch.requests") == 0
    Counting.hits = 0
    assert client.post(server, content=BATCH).status_code == 200
    assert Counting.hits == 1
    assert otel.value("batch.closed") == 1
    pairwatch.uninstrument(client)
    client.close()
