"""The MCP SDK client over streamable HTTP (SSE and JSON replies) and SSE, real SDK servers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest
from mcp import Client, ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_support import sampling, sdk_http, text
from otel_support import Otel

import pairwatch

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def sse_replies() -> Iterator[str]:
    with sdk_http() as url:
        yield url


@pytest.fixture(scope="module")
def json_replies() -> Iterator[str]:
    with sdk_http("json") as url:
        yield url


@pytest.fixture(scope="module")
def sse_transport() -> Iterator[str]:
    with sdk_http("sse") as url:
        yield url


@contextlib.asynccontextmanager
async def session(url: str, otel: Otel | None) -> AsyncIterator[ClientSession]:
    transport = sse_client(url) if url.endswith("/sse") else streamable_http_client(url)
    async with (
        transport as (r, w),
        ClientSession(r, w, sampling_callback=sampling, read_timeout_seconds=10) as s,
    ):
        if otel is not None:
            pairwatch.instrument(
                s, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
        yield s
        if otel is not None:
            pairwatch.uninstrument(s)


async def scenario(s: ClientSession, back_channel: bool) -> list[object]:
    await s.initialize()
    seen: list[object] = [text(await s.call_tool("add", {"a": 2, "b": 3}))]
    if back_channel:  # JSON replies have none: the server cannot send requests
        seen.append(text(await s.call_tool("ask_llm", {"prompt": "hi"})))
        seen.append(text(await s.call_tool("ping_client", {})))
    try:
        await s.call_tool("slow", {"seconds": 3}, read_timeout_seconds=0.5)
    except MCPError as exc:
        seen.append(exc.error.code)
    # Let whatever the server does about the cancelled call land before the session closes:
    # a reply racing the transport's teardown crashes the SDK's POST task (not ours).
    await anyio.sleep(0.3)
    return seen


async def check(url: str, back_channel: bool, transport: str) -> None:
    async with session(url, None) as plain:
        expected = await scenario(plain, back_channel)
    otel = Otel()
    async with session(url, otel) as s:
        assert await scenario(s, back_channel) == expected
    assert expected[-1] == -32001
    counters = otel.counters()
    paired = 5 if back_channel else 3  # initialize, add, tools/list (+ ask_llm, ping_client)
    assert counters["batch.requests"] == paired + 1
    assert otel.hist("batch.pair_latency")[0] == paired
    assert otel.value("batch.missing_response", pairwatch__close_reason="timeout") == 1
    # Over streamable HTTP (2025 wire) the SDK server ends a cancelled request's stream with
    # a -32800 "request cancelled" reply; it comes after the caller gave up, so it is late:
    # unknown-id.  The SSE transport sends nothing for it.
    late = 1 if transport == "http" else 0
    assert counters.get("batch.unknown_id_response", 0) == late
    for name in ("batch.null_id_response", "batch.invalid_response"):
        assert counters.get(name, 0) == 0, name
    (labels,) = {tuple(sorted(a.items())) for a in otel.attrs("batch.requests")}
    assert dict(labels)["pairwatch.transport"] == transport
    if transport == "http":
        assert dict(labels)["server.address"] == "127.0.0.1"


async def test_streamable_http_with_sse_replies_and_server_requests(sse_replies):
    await check(sse_replies, back_channel=True, transport="http")


async def test_streamable_http_with_json_replies(json_replies):
    await check(json_replies, back_channel=False, transport="http")


async def test_sse_transport_with_server_requests(sse_transport):
    await check(sse_transport, back_channel=True, transport="sse")


async def test_high_level_client_once_entered(sse_replies):
    otel = Otel()
    async with Client(sse_replies, sampling_callback=sampling) as client:
        pairwatch.instrument(
            client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
        )
        assert text(await client.call_tool("add", {"a": 1, "b": 2})) == "3"
        assert text(await client.call_tool("add", {"a": 2, "b": 2})) == "4"
        pairwatch.uninstrument(client)
    counters = otel.counters()
    assert counters["batch.requests"] == otel.hist("batch.pair_latency")[0] >= 2
    assert counters.get("batch.unknown_id_response", 0) == 0
    assert counters.get("batch.missing_response", 0) == 0
