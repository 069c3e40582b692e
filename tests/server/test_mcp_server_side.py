"""The ASGI middleware around the MCP SDK's own streamable-HTTP app, under uvicorn.

The SDK's client (instrumented too) talks to the SDK's server (wrapped): the server side
keeps its books of every POST (JSON replies, and SSE streams that also carry the server's
own sampling request), and both sides count the same requests with nothing wrong.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from components import need
from otel_support import Otel
from server_support import uvicorn_server, wait_until

import pairwatch

need("mcp", "pip install -e '.[mcp]' (the MCP Python SDK)")
from mcp import ClientSession, types  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.filterwarnings("ignore:The sampling capability is deprecated"),
]

mcp_server = MCPServer("pairwatch-server-side")


@mcp_server.tool()
def add(a: int, b: int) -> int:
    return a + b


@mcp_server.tool()
async def ask_llm(prompt: str, ctx: Context) -> str:
    """A request the server sends to the client on the POST's own event stream."""
    reply = await ctx.session.create_message(
        messages=[
            types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
        ],
        max_tokens=10,
        related_request_id=ctx.request_id,
    )
    content = reply.content
    return content.text if isinstance(content, types.TextContent) else "?"


async def sampling(context: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="hello"), model="m"
    )


def scenario(json_response: bool) -> tuple[Otel, Otel, list[str]]:
    server_otel, client_otel = Otel(), Otel()
    app = pairwatch.PairwatchMiddleware(
        mcp_server.streamable_http_app(json_response=json_response),
        meter_provider=server_otel.meter_provider,
        tracer_provider=server_otel.tracer_provider,
    )
    seen: list[str] = []

    async def talk(url: str) -> None:
        async with (
            streamable_http_client(url + "/mcp") as (r, w),
            ClientSession(r, w, sampling_callback=sampling) as s,
        ):
            pairwatch.instrument(
                s,
                meter_provider=client_otel.meter_provider,
                tracer_provider=client_otel.tracer_provider,
            )
            await s.initialize()
            result = await s.call_tool("add", {"a": 2, "b": 3})
            seen.append(result.content[0].text)  # type: ignore[union-attr]
            if not json_response:  # JSON replies have no stream to ask the client on
                result = await s.call_tool("ask_llm", {"prompt": "hi"})
                seen.append(result.content[0].text)  # type: ignore[union-attr]

    with uvicorn_server(app) as base:
        anyio.run(talk, base)
        pairwatch.flush()
    return server_otel, client_otel, seen


def test_sse_replies_with_a_sampling_request_inside():
    server, client, seen = scenario(json_response=False)
    assert seen == ["5", "hello"]
    # initialize, tools/call add, tools/list (the SDK validates output), tools/call ask_llm;
    # plus the initialized notification and the client's POST of its sampling reply.
    wait_until(lambda: server.value("batch.closed") == 5, what="five server batches")
    assert server.counters() == {"batch.closed": 5, "batch.requests": 4}
    assert client.counters() == {"batch.closed": 5, "batch.requests": 4}
    transports = {a["pairwatch.transport"] for a in server.attrs("batch.requests")}
    assert transports == {"sse"}
    assert {a["pairwatch.side"] for a in server.attrs("batch.closed")} == {"server"}
    assert {a["pairwatch.diagnosis"] for a in server.attrs("batch.closed")} == {"ok"}
    assert server.hist("batch.pair_latency")[0] == 4


def test_json_replies():
    server, client, seen = scenario(json_response=True)
    assert seen == ["5"]
    wait_until(lambda: server.value("batch.closed") == 4, what="four server batches")
    assert server.counters() == {"batch.closed": 4, "batch.requests": 3}
    assert client.counters() == {"batch.closed": 4, "batch.requests": 3}
    closes = sorted(a["pairwatch.close_reason"] for a in server.attrs("batch.closed"))
    assert closes == ["body_end", "no_response_expected"]
