"""The MCP SDK client against @modelcontextprotocol/server-everything (node), stdio and HTTP.

A server written with another SDK: its own id counter (from 0) for the requests it sends to
the client, response members in another order, four list_changed notifications after the
handshake.  Installed by ``bash scripts/bootstrap.sh``; absent, these tests skip locally and
fail under CI=true.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import AsyncIterator, Callable

import anyio
import pytest
from components import require
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_support import (
    EVERYTHING,
    INSTALL,
    ROOTS,
    child_running,
    elicitation,
    everything_http,
    everything_http_process,
    list_roots,
    node_available,
    sampling,
)
from otel_support import Otel

import pairwatch

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _needs_node() -> None:
    require(node_available(), "node and @modelcontextprotocol/server-everything", INSTALL)


@contextlib.asynccontextmanager
async def stdio_session() -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command="node", args=[str(EVERYTHING), "stdio"])
    async with (
        stdio_client(params) as (r, w),
        ClientSession(
            r,
            w,
            sampling_callback=sampling,
            elicitation_callback=elicitation,
            list_roots_callback=list_roots,
            read_timeout_seconds=10,
        ) as s,
    ):
        yield s


@contextlib.asynccontextmanager
async def http_session() -> AsyncIterator[ClientSession]:
    with everything_http() as url:
        async with (
            streamable_http_client(url) as (r, w),
            ClientSession(
                r,
                w,
                sampling_callback=sampling,
                elicitation_callback=elicitation,
                list_roots_callback=list_roots,
                read_timeout_seconds=10,
            ) as s,
        ):
            yield s


async def roots_seen(s: ClientSession) -> None:
    content = (await s.call_tool("get-roots-list", {})).content[0]
    assert ROOTS[0].name in getattr(content, "text", "")


async def scenario(s: ClientSession, otel: Otel) -> None:
    pairwatch.instrument(
        s, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    info = await s.initialize()
    assert info.server_info.name == "mcp-servers/everything"
    content = (await s.call_tool("echo", {"message": "hi"})).content[0]
    assert getattr(content, "text", None) == "Echo: hi"
    content = (await s.call_tool("get-sum", {"a": 2, "b": 3})).content[0]
    assert "5" in getattr(content, "text", "")
    # the server asks the client (ids 0 and 1: the client's own ids are in flight too)
    await s.call_tool("trigger-sampling-request", {"prompt": "x", "maxTokens": 5})
    await s.call_tool("trigger-elicitation-request", {})
    # concurrent calls interleaved with the server's own request, then a call the caller
    # cancels (the SDK sends notifications/cancelled): withdrawn, never missing
    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(s.call_tool, "get-sum", {"a": i, "b": 1})
        tg.start_soon(s.call_tool, "trigger-sampling-request", {"prompt": "y", "maxTokens": 5})
        tg.start_soon(s.call_tool, "trigger-elicitation-request", {})
        tg.start_soon(roots_seen, s)  # the server asked for roots/list after initialized
    with anyio.move_on_after(0.5):
        await s.call_tool("trigger-long-running-operation", {"duration": 20, "steps": 2})
    content = (await s.call_tool("echo", {"message": "after"})).content[0]
    assert getattr(content, "text", None) == "Echo: after"
    channel = pairwatch.api._handles[id(s)][1].state.channel
    assert channel.ledger.inbound_pending == 0
    pairwatch.uninstrument(s)
    counters = otel.counters()
    assert counters["batch.withdrawn_request"] == 1
    assert counters["batch.requests"] == otel.hist("batch.pair_latency")[0] + 1 >= 11
    for name in (
        "batch.unknown_id_response",
        "batch.null_id_response",
        "batch.missing_response",
        "batch.invalid_response",
        "batch.response_count_mismatch",
    ):
        assert counters.get(name, 0) == 0, name


async def test_everything_over_stdio():
    otel = Otel()
    async with stdio_session() as s:
        await scenario(s, otel)
    assert otel.attrs("batch.requests")[0]["pairwatch.transport"] == "stdio"


async def test_everything_over_streamable_http():
    otel = Otel()
    async with http_session() as s:
        await scenario(s, otel)
    assert otel.attrs("batch.requests")[0]["server.address"] == "127.0.0.1"


async def killed_mid_call(s: ClientSession, otel: Otel, kill: Callable[[], None]) -> None:
    """Two long operations in flight when the server is killed: both missing, dropped."""
    pairwatch.instrument(
        s, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    await s.initialize()
    content = (await s.call_tool("echo", {"message": "hi"})).content[0]
    assert getattr(content, "text", None) == "Echo: hi"

    async def long_operation() -> None:
        with contextlib.suppress(Exception):  # the SDK's error for the lost request
            await s.call_tool("trigger-long-running-operation", {"duration": 20, "steps": 2})

    try:  # over HTTP the SDK cancels this body when its connection breaks
        with anyio.move_on_after(8):
            async with anyio.create_task_group() as tg:
                tg.start_soon(long_operation)
                tg.start_soon(long_operation)
                await anyio.sleep(0.5)
                kill()
        await anyio.sleep(0.2)  # stdio: the exit status reaches the loop a moment later
    finally:
        pairwatch.uninstrument(s)


def assert_dropped(otel: Otel) -> None:
    counters = otel.counters()
    assert counters["batch.requests"] == otel.hist("batch.pair_latency")[0] + 2
    assert counters["batch.missing_response"] == 2
    got = {a["pairwatch.close_reason"] for a in otel.attrs("batch.missing_response")}
    assert got == {"stream_dropped"}
    assert counters.get("batch.withdrawn_request", 0) == 0
    assert counters.get("batch.unknown_id_response", 0) == 0


async def test_everything_killed_mid_call_over_stdio():
    otel = Otel()
    async with stdio_session() as s:
        pid = child_running(str(EVERYTHING))
        await killed_mid_call(s, otel, lambda: os.kill(pid, signal.SIGKILL))
    assert_dropped(otel)


async def test_everything_killed_mid_call_over_streamable_http():
    otel = Otel()
    with everything_http_process() as (url, proc):
        try:
            async with (
                streamable_http_client(url) as (r, w),
                ClientSession(r, w, read_timeout_seconds=10) as s,
            ):
                await killed_mid_call(s, otel, proc.kill)
        except Exception as exc:  # the SDK's transport task ends the session with the break
            assert "RemoteProtocolError" in repr(exc), repr(exc)  # noqa: PT017
    assert_dropped(otel)
