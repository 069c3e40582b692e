"""The MCP caller's own decisions are withdrawals, never the server's faults.

Real SDK sessions against the SDK's own server: a caller that cancels a running tool call (the
SDK sends ``notifications/cancelled``) withdraws that request, over stdio, over memory
streams and through the in-process dispatcher; the next call pairs as usual.  A server killed
mid-call is a dropped stream; one that exits in order ends it.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import sdk_server
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.memory import create_client_server_memory_streams
from mcp_support import FAULTS, sdk_stdio_command, text
from otel_support import Otel

import pairwatch

pytestmark = pytest.mark.timeout(60)


async def cancel_one_then_add(s: Any) -> str:
    """Start a slow call, cancel it from the caller's side, then make a plain one."""
    with anyio.move_on_after(0.5):
        await s.call_tool("slow", {"seconds": 30})
    return text(await s.call_tool("add", {"a": 2, "b": 2}))


def assert_withdrawn(otel: Otel, requests: int) -> None:
    counters = otel.counters()
    assert counters["batch.requests"] == requests
    assert counters.get("batch.withdrawn_request", 0) == 1
    assert otel.value("batch.withdrawn_request", pairwatch__reason="cancelled") == 1
    for name in FAULTS:
        assert counters.get(name, 0) == 0, name
    assert otel.hist("batch.pair_latency")[0] == requests - 1
    diagnoses = {a["pairwatch.diagnosis"] for a in otel.attrs("batch.closed")}
    assert diagnoses == {"ok"}


async def test_a_cancelled_call_over_stdio_is_withdrawn():
    otel = Otel()
    command, args = sdk_stdio_command()
    params = StdioServerParameters(command=command, args=args)
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        pairwatch.instrument(
            s, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
        )
        await s.initialize()
        assert await cancel_one_then_add(s) == "4"
        pairwatch.uninstrument(s)
    # initialize, the slow call, tools/list (output schemas, fetched once), add
    assert_withdrawn(otel, 4)


async def test_a_cancelled_call_over_memory_streams_is_withdrawn():
    otel = Otel()
    low = sdk_server.server._lowlevel_server
    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(lambda: low.run(*server_streams, low.create_initialization_options()))
        async with ClientSession(*client_streams) as s:
            pairwatch.instrument(
                s, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
            await s.initialize()
            assert await cancel_one_then_add(s) == "4"
            pairwatch.uninstrument(s)
        tg.cancel_scope.cancel()
    assert_withdrawn(otel, 4)


async def test_a_cancelled_call_in_process_is_withdrawn():
    otel = Otel()
    async with Client(sdk_server.server) as client:
        pairwatch.instrument(
            client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
        )
        assert await cancel_one_then_add(client) == "4"
        pairwatch.uninstrument(client)
    assert_withdrawn(otel, 3)  # tools/list, the slow call, add


@pytest.mark.parametrize(("tool", "reason"), [("crash_now", "stream_dropped"),
                                              ("exit_now", "stream_end")])  # fmt: skip
async def test_a_server_that_dies_mid_call(tool: str, reason: str):
    """Killed by a signal: the stream dropped; an orderly exit (status 0): it ended."""
    otel = Otel()
    command, args = sdk_stdio_command()
    params = StdioServerParameters(command=command, args=args)
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        pairwatch.instrument(
            s, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
        )
        await s.initialize()
        with pytest.raises(MCPError):
            await s.call_tool(tool, {})
    # The exit status reaches the event loop a moment after the stream ends; a program that
    # goes on running meets no wait (the batch closes as soon as it is known).
    await anyio.sleep(0.1)
    pairwatch.uninstrument(s)
    got = [a["pairwatch.close_reason"] for a in otel.attrs("batch.missing_response")]
    assert got == [reason]
    assert otel.value("batch.missing_response") == 1
