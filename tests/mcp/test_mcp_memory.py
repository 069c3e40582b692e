"""In-process MCP sessions: ``Client(server)`` in every mode and sessions over memory streams.

The server is the real SDK ``MCPServer`` in this process (the same tools as sdk_server.py).
Every mode must pair each request exactly once under ``pairwatch.transport="memory"``: a
legacy client runs JSON-RPC message objects over anyio memory streams; the modern modes call
the server through a ``DirectDispatcher`` with no JSON-RPC at all.  The same calls are made
bare first: the caller must see the same results.
"""

from __future__ import annotations

import anyio
import pytest
import sdk_server
from mcp import Client, ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.memory import create_client_server_memory_streams
from mcp_support import text
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from otel_support import Otel

import pairwatch

pytestmark = pytest.mark.timeout(60)

M = "batch.missing_response"


async def calls(client: Client) -> list[object]:
    seen: list[object] = [text(await client.call_tool("add", {"a": 2, "b": 3}))]
    seen.append(text(await client.call_tool("add", {"a": 1, "b": 1})))
    try:
        await client.call_tool("no_such_tool", {})
    except MCPError as exc:  # a handler's error reply, paired like any other
        seen.append(exc.error.code)
    else:
        seen.append("tool error as a result")
    return seen


async def run(mode: str, otel: Otel | None) -> list[object]:
    async with Client(sdk_server.server, mode=mode) as client:
        if otel is not None:
            pairwatch.instrument(
                client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
        seen = await calls(client)
        if otel is not None:
            pairwatch.uninstrument(client)
    return seen


@pytest.mark.parametrize("mode", ["legacy", "auto", *sorted(MODERN_PROTOCOL_VERSIONS)])
async def test_in_process_client_pairs_every_call(mode):
    expected = await run(mode, None)
    otel = Otel()
    assert await run(mode, otel) == expected
    counters = otel.counters()
    # Three calls, after one tools/list the SDK makes to learn the tools' output schemas.
    assert counters["batch.requests"] == otel.hist("batch.pair_latency")[0] == 4
    for name in (M, "batch.unknown_id_response", "batch.null_id_response"):
        assert counters.get(name, 0) == 0, name
    transports = {a["pairwatch.transport"] for a in otel.attrs("batch.requests")}
    assert transports == {"memory"}


async def test_memory_stream_session_times_out_at_the_sessions_own_clock():
    """A hand-built session over memory streams: the SDK's read timeout, not pairwatch's,
    decides when a slow call is missing; the next call still pairs."""
    otel = Otel()
    low = sdk_server.server._lowlevel_server
    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(lambda: low.run(*server_streams, low.create_initialization_options()))
        async with ClientSession(*client_streams, read_timeout_seconds=10) as s:
            pairwatch.instrument(
                s, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
            await s.initialize()
            with pytest.raises(MCPError) as caught:
                await s.call_tool("slow", {"seconds": 5}, read_timeout_seconds=0.3)
            assert text(await s.call_tool("add", {"a": 2, "b": 2})) == "4"
            pairwatch.uninstrument(s)
        tg.cancel_scope.cancel()
    assert caught.value.error.code == -32001
    counters = otel.counters()
    # initialize, the slow call, tools/list (the SDK fetches output schemas once), add
    assert counters["batch.requests"] == 4
    assert otel.hist("batch.pair_latency")[0] == 3
    methods = {a.get("rpc.method") for a in otel.attrs("batch.pair_latency")}
    assert methods == {"initialize", "tools/list", "tools/call"}
    assert counters[M] == otel.value(M, pairwatch__close_reason="timeout") == 1
    assert counters.get("batch.unknown_id_response", 0) == 0
    assert {a["pairwatch.transport"] for a in otel.attrs("batch.requests")} == {"memory"}


async def test_in_process_modern_call_times_out_at_the_sdks_clock():
    """Client(server) without the legacy handshake: no JSON-RPC, no stream; the dispatcher's
    own timeout is the one that makes a call missing."""
    otel = Otel()
    async with Client(sdk_server.server) as client:
        pairwatch.instrument(
            client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
        )
        with pytest.raises(MCPError) as caught:
            await client.call_tool("slow", {"seconds": 5}, read_timeout_seconds=0.2)
        assert text(await client.call_tool("add", {"a": 2, "b": 2})) == "4"
        pairwatch.uninstrument(client)
    assert caught.value.error.code == -32001
    counters = otel.counters()
    assert counters["batch.requests"] == 3  # tools/list, slow, add
    assert otel.hist("batch.pair_latency")[0] == 2
    assert counters[M] == otel.value(M, pairwatch__close_reason="timeout") == 1
    assert {a["pairwatch.transport"] for a in otel.attrs("batch.requests")} == {"memory"}
