"""The MCP SDK's ClientSession over stdio against the real SDK server, with and without us."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator

import mcp.client.stdio as sdk_stdio
import mcp.client.streamable_http as sdk_http
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp_support import sampling, sdk_stdio_command, text
from otel_support import Otel

import pairwatch

pytestmark = pytest.mark.timeout(60)


@contextlib.asynccontextmanager
async def session(otel: Otel | None, **kw) -> AsyncIterator[ClientSession]:
    command, args = sdk_stdio_command()
    params = StdioServerParameters(command=command, args=args)
    async with (
        stdio_client(params) as (r, w),
        ClientSession(r, w, sampling_callback=sampling, read_timeout_seconds=10, **kw) as s,
    ):
        if otel is not None:
            pairwatch.instrument(
                s, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
        try:
            yield s
        finally:
            if otel is not None and pairwatch.is_instrumented(s):
                pairwatch.uninstrument(s)


async def scenario(s: ClientSession) -> list[object]:
    """What a caller sees: results, then the error codes of a timeout and a dying server."""
    await s.initialize()
    seen: list[object] = [text(await s.call_tool("add", {"a": 2, "b": 3}))]
    seen.append(text(await s.call_tool("ask_llm", {"prompt": "hi"})))  # sampling from server
    seen.append(text(await s.call_tool("ping_client", {})))  # ping from server
    for name, args in (("slow", {"seconds": 5}), ("exit_now", {})):
        try:
            await s.call_tool(name, args, read_timeout_seconds=0.5)
        except MCPError as exc:
            seen.append(exc.error.code)
    return seen


def check_spans(otel: Otel) -> None:
    """pairwatch's spans sit beside the SDK's: own scope, MCP attribute names."""
    children = [sp for sp in otel.spans() if sp.parent is not None]
    assert {sp.instrumentation_scope.name for sp in children} == {"pairwatch"}
    calls = {
        sp.attributes["gen_ai.tool.name"]: sp
        for sp in children
        if sp.attributes["mcp.method.name"] == "tools/call"
    }
    assert {name: sp.name for name, sp in calls.items()} == {
        name: f"tools/call {name}" for name in calls
    }
    add, slow = calls["add"], calls["slow"]
    assert add.attributes["mcp.method.name"] == "tools/call"
    assert add.attributes["jsonrpc.request.id"] == "2"
    assert add.attributes["pairwatch.outcome"] == "paired"
    assert slow.attributes["pairwatch.outcome"] == "missing"
    assert slow.attributes["error.type"] == "timeout"
    assert calls["exit_now"].attributes["pairwatch.outcome"] == "missing"
    init = next(sp for sp in children if sp.name == "initialize")
    assert init.attributes["mcp.method.name"] == "initialize"
    assert "gen_ai.tool.name" not in init.attributes


async def test_caller_sees_the_same_with_and_without_pairwatch_and_books_are_exact():
    async with session(None) as plain:
        expected = await scenario(plain)
    otel = Otel()
    async with session(otel) as s:
        assert await scenario(s) == expected == ["5", "sampled", "pinged", -32001, -32000]
        channel = pairwatch.api._handles[id(s)][1].state.channel
        # the server's sampling and ping requests (ids 1 and 2, like the client's) were
        # answered and paired in the inbound table, apart from the client's requests
        assert channel.ledger.inbound_pending == 0
    counters = otel.counters()
    # initialize, add, the SDK's own tools/list after it, ask_llm, ping_client: 5 paired;
    # slow (the SDK's read timeout) and exit_now (the server dies): 2 missing
    assert counters["batch.requests"] == 7
    assert otel.hist("batch.pair_latency")[0] == 5
    assert otel.value("batch.missing_response", pairwatch__close_reason="timeout") == 1
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_end") == 1
    assert counters.get("batch.unknown_id_response", 0) == 0  # server requests never unknown
    assert counters.get("batch.null_id_response", 0) == 0
    assert counters.get("batch.invalid_response", 0) == 0
    assert otel.attrs("batch.requests")[0]["pairwatch.transport"] == "stdio"
    assert otel.attrs("batch.requests")[0]["pairwatch.integration"] == "mcp"
    check_spans(otel)


async def test_uninstrument_restores_the_session_and_the_transports():
    before = (
        sdk_stdio._parse_line,
        sdk_http.jsonrpc_message_adapter,
        sys.modules["mcp.client.sse"].types,
    )
    otel = Otel()
    async with session(otel) as s:
        dispatcher = s._dispatcher
        assert "_write" in vars(dispatcher)
        assert sdk_stdio._parse_line is not before[0]
        await s.initialize()
        pairwatch.uninstrument(s)
        assert not {"_write", "_dispatch", "_fan_out_closed"} & set(vars(dispatcher))
        after = (
            sdk_stdio._parse_line,
            sdk_http.jsonrpc_message_adapter,
            sys.modules["mcp.client.sse"].types,
        )
        assert all(a is b for a, b in zip(after, before, strict=True))
        assert text(await s.call_tool("add", {"a": 2, "b": 2})) == "4"
    assert otel.value("batch.requests") == 1  # only initialize was seen


def test_detection_is_lazy_and_refuses_what_it_cannot_pair():
    from pairwatch.integrations import REGISTRY

    mcp_integration = next(i for i in REGISTRY if i.name == "mcp")
    assert not mcp_integration.detect(object())
    from mcp import Client

    client = Client("http://127.0.0.1:9/mcp")
    assert mcp_integration.detect(client)
    with pytest.raises(TypeError, match="enter the mcp Client first"):
        pairwatch.instrument(client)
