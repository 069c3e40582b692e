"""What one HTTP exchange counts when the reply is not simply a JSON body: ``[]``, 202
Accepted, redirects.  Real clients against a real loopback server, exact books.

- ``[]`` is invisible no more: the spec's single null-id error reply counts as a null-id
  response over every client, and a reply that is not JSON-RPC counts nothing.
- 202 with an empty or non-JSON body: the reply comes on another channel; nothing is
  counted on this exchange (no request, no missing).  A 202 carrying a JSON-RPC reply pairs.
- A redirect the client follows is one exchange: the 3xx is not a missing reply, and the
  request that finally gets the answer is tracked, also when the caller re-sends httpx's
  ``next_request`` itself (its body is a stream by then) as the MCP SDK does.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import httpx
import pytest
import requests
from http_drivers import JSON, SCRIPTS, bare, instrumenting

import pairwatch

REQUEST = json.dumps(
    [{"jsonrpc": "2.0", "id": 1, "method": "a"}, {"jsonrpc": "2.0", "id": 2, "method": "b"}]
).encode()
REPLY = b'[{"jsonrpc":"2.0","id":1,"result":"A"},{"jsonrpc":"2.0","id":2,"result":"B"}]'
SPEC_EMPTY = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}'
APPJSON = {"Content-Type": "application/json"}

SCRIPTS.update(
    {
        "/empty-spec": (200, APPJSON, [SPEC_EMPTY], False),
        "/empty-rest": (200, APPJSON, [b'{"created": 0, "items": []}'], False),
        "/accepted": (202, {}, [], False),
        "/accepted-text": (202, {"Content-Type": "text/plain"}, [b"Accepted"], False),
        "/accepted-json": (202, APPJSON, [REPLY], False),
        "/mcp": (307, {"Location": "/mcp/"}, [], False),
        "/mcp/": (200, APPJSON, [REPLY], False),
        "/moved": (
            308,
            {"Location": "/mcp/", "Content-Type": "text/html"},
            [b"<a>/mcp/</a>"],
            False,
        ),
    }
)


def paired_books(otel: Any, batches: int = 1) -> None:
    assert otel.counters() == {"batch.requests": 2 * batches, "batch.closed": batches}
    assert otel.hist("batch.pair_latency")[0] == 2 * batches
    assert otel.value("batch.closed", pairwatch__close_reason="body_end") == batches


def providers(otel: Any) -> dict[str, Any]:
    return {"meter_provider": otel.meter_provider, "tracer_provider": otel.tracer_provider}


# ----------------------------------------------------------------------------- []
def test_empty_batch_spec_reply_is_a_null_id_response(otel, scripted, driver):
    _, run = driver
    without = run(scripted + "/empty-spec", b"[]", False, bare)
    with_pw = run(scripted + "/empty-spec", b"[]", False, instrumenting(otel))
    assert with_pw == without
    assert with_pw.body == SPEC_EMPTY
    assert otel.counters() == {
        "batch.closed": 1,
        "batch.null_id_response": 1,
        "batch.invalid_request": 1,
    }
    assert otel.value("batch.invalid_request", pairwatch__reason="empty_batch") == 1
    assert otel.value("batch.closed", pairwatch__diagnosis="malformed_request_element") == 1
    assert otel.value("batch.protocol_violation") == 0


def test_empty_batch_answered_by_something_else_counts_nothing(otel, scripted, driver):
    _, run = driver
    assert run(scripted + "/empty-rest", b"[]", False, instrumenting(otel)).body is not None
    assert otel.counters() == {}
    assert otel.hist("batch.size") == (0, 0)


def test_empty_batch_sent_as_a_json_object_over_aiohttp(otel, scripted):
    async def run() -> bytes:
        async with aiohttp.ClientSession() as session:
            pairwatch.instrument(session, **providers(otel))
            async with session.post(scripted + "/empty-spec", json=[]) as r:
                return await r.read()

    assert asyncio.run(run()) == SPEC_EMPTY
    assert otel.value("batch.null_id_response") == 1
    assert otel.value("batch.closed") == 1


# ---------------------------------------------------------------------------- 202
@pytest.mark.parametrize("path", ["/accepted", "/accepted-text"])
def test_accepted_without_a_jsonrpc_body_counts_nothing(otel, scripted, driver, path):
    _, run = driver
    without = run(scripted + path, REQUEST, False, bare)
    with_pw = run(scripted + path, REQUEST, False, instrumenting(otel))
    assert with_pw == without
    assert with_pw.error is None
    assert otel.counters() == {}
    assert otel.value("batch.missing_response") == 0


def test_accepted_with_a_jsonrpc_body_pairs_it(otel, scripted, driver):
    _, run = driver
    assert run(scripted + "/accepted-json", REQUEST, False, instrumenting(otel)).body == REPLY
    paired_books(otel)


def test_accepted_stream_closed_unread_counts_nothing(otel, scripted):
    """The MCP SDK closes a 202 response without reading it: still nothing missing."""
    client = pairwatch.instrument(httpx.Client(timeout=5), **providers(otel))
    with client, client.stream("POST", scripted + "/accepted-text", content=REQUEST) as r:
        assert r.status_code == 202
    assert otel.counters() == {}


# ---------------------------------------------------------------------- redirects
def test_httpx_following_redirects_is_one_exchange(otel, scripted):
    with pairwatch.instrument(
        httpx.Client(timeout=5, follow_redirects=True), **providers(otel)
    ) as c:
        r = c.post(scripted + "/mcp", content=REQUEST, headers=JSON)
    assert (r.status_code, r.content, len(r.history)) == (200, REPLY, 1)
    paired_books(otel)


def test_httpx_async_following_redirects_is_one_exchange(otel, scripted):
    async def run() -> httpx.Response:
        client = pairwatch.instrument(
            httpx.AsyncClient(timeout=5, follow_redirects=True), **providers(otel)
        )
        async with client:
            return await client.post(scripted + "/moved", json=json.loads(REQUEST))

    r = asyncio.run(run())
    assert (r.status_code, r.content) == (200, REPLY)
    paired_books(otel)


@pytest.mark.parametrize("path", ["/mcp", "/moved"])
def test_requests_and_aiohttp_follow_by_default(otel, scripted, path):
    with pairwatch.instrument(requests.Session(), **providers(otel)) as session:
        assert session.post(scripted + path, data=REQUEST, headers=JSON, timeout=5).content == REPLY

    async def run() -> bytes:
        async with aiohttp.ClientSession() as session:
            pairwatch.instrument(session, **providers(otel))
            async with session.post(scripted + path, data=REQUEST, headers=JSON) as r:
                return await r.read()

    assert asyncio.run(run()) == REPLY
    paired_books(otel, batches=2)


@pytest.mark.parametrize("how", ["content", "json", "stream"])
def test_httpx_next_request_sent_by_the_caller(otel, scripted, how):
    """The MCP SDK's pattern: POST /mcp, get a 307, ``client.send(response.next_request)``.
    The 307 is not a missing reply; the re-sent request (its body a stream) is tracked."""
    with pairwatch.instrument(httpx.Client(timeout=5), **providers(otel)) as client:
        if how == "content":
            first = client.post(scripted + "/mcp", content=REQUEST, headers=JSON)
        elif how == "json":
            first = client.post(scripted + "/mcp", json=json.loads(REQUEST))
        else:
            request = client.build_request("POST", scripted + "/mcp", content=REQUEST)
            first = client.send(request, stream=True)
            first.close()
        assert first.status_code == 307
        assert otel.counters() == {}  # the 307 alone counts nothing
        following = first.next_request
        assert following is not None
        with pytest.raises(httpx.RequestNotRead):
            following.content  # noqa: B018 - a stream: pairwatch must not read it
        second = client.send(following)
    assert second.content == REPLY
    paired_books(otel)


def test_httpx_async_next_request_sent_by_the_caller(otel, scripted):
    async def run() -> bytes:
        async with pairwatch.instrument(httpx.AsyncClient(timeout=5), **providers(otel)) as c:
            async with c.stream("POST", scripted + "/mcp", content=REQUEST) as first:
                following = first.next_request
            assert following is not None
            second = await c.send(following)
            return second.content

    assert asyncio.run(run()) == REPLY
    paired_books(otel)


def test_requests_manual_redirect(otel, scripted):
    """``allow_redirects=False``, then sending ``response.next`` (a prepared request whose
    body is bytes again): the 307 counts nothing, the second exchange pairs."""
    with pairwatch.instrument(requests.Session(), **providers(otel)) as session:
        first = session.post(
            scripted + "/mcp", data=REQUEST, headers=JSON, timeout=5, allow_redirects=False
        )
        assert first.status_code == 307
        assert otel.counters() == {}
        second = session.send(first.next, timeout=5)
    assert second.content == REPLY
    paired_books(otel)


def test_aiohttp_redirect_not_followed_counts_nothing(otel, scripted):
    async def run() -> int:
        async with aiohttp.ClientSession() as session:
            pairwatch.instrument(session, **providers(otel))
            async with session.post(
                scripted + "/mcp", data=REQUEST, headers=JSON, allow_redirects=False
            ) as r:
                return r.status

    assert asyncio.run(run()) == 307
    assert otel.counters() == {}


# ------------------------------------------------------------- streamed request bodies
def chunks_of(body: bytes) -> Any:
    yield body[:10]
    yield body[10:]


async def achunks_of(body: bytes) -> Any:
    yield body[:10]
    yield body[10:]


def test_httpx_generator_body_is_tracked(otel, scripted):
    """A body httpx sends as a stream (a generator): pairwatch sees the chunks as they go
    out, and the exchange counts as any other."""
    with pairwatch.instrument(httpx.Client(timeout=5), **providers(otel)) as client:
        r = client.post(scripted + "/mcp/", content=chunks_of(REQUEST), headers=JSON)
        assert r.content == REPLY
        # Not JSON-RPC: untouched and uncounted, read for the caller as httpx would.
        other = client.post(scripted + "/mcp/", content=chunks_of(b"<upload/>"))
        assert other.content == REPLY
    paired_books(otel)


def test_httpx_async_generator_body_is_tracked(otel, scripted):
    async def run() -> httpx.Response:
        async with pairwatch.instrument(httpx.AsyncClient(timeout=5), **providers(otel)) as c:
            return await c.post(scripted + "/mcp/", content=achunks_of(REQUEST))

    assert asyncio.run(run()).content == REPLY
    paired_books(otel)


def test_requests_generator_body_is_tracked(otel, scripted):
    with pairwatch.instrument(requests.Session(), **providers(otel)) as session:
        r = session.post(scripted + "/mcp/", data=chunks_of(REQUEST), headers=JSON, timeout=5)
        assert r.content == REPLY
    paired_books(otel)
