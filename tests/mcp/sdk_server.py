"""A real MCP Python SDK server for the tests: stdio, streamable HTTP (SSE or JSON) or SSE.

``python sdk_server.py`` serves stdio; ``python sdk_server.py http PORT [json] [stateless]``
serves streamable HTTP on 127.0.0.1:PORT/mcp; ``python sdk_server.py sse PORT`` the old
HTTP+SSE transport on /sse (``sse-drop``: the same, minus the reply of the ``dropped`` tool).
The tools cover what the pairing tests need: plain answers,
slow answers (a server that stops answering), an exit mid-call (the stream ends), and
requests the server sends to the client (sampling, ping).
"""

from __future__ import annotations

import os
import signal
import sys

import anyio
from mcp import types
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("pairwatch-test")


@server.tool()
def add(a: int, b: int) -> int:
    return a + b


@server.tool()
def session_id(ctx: Context) -> str:
    """The Mcp-Session-Id this request came with (empty without one): what spans must say."""
    request = getattr(ctx.request_context, "request", None)
    headers = getattr(request, "headers", None) or {}
    return str(headers.get("mcp-session-id") or "")


@server.prompt()
def greet(name: str) -> str:
    return f"Say hello to {name}."


@server.tool()
async def slow(seconds: float) -> str:
    await anyio.sleep(seconds)
    return "done"


@server.tool()
async def long_call(seconds: float, ctx: Context) -> str:
    """Says it started (so a test can act while it runs, without sleeping), then works."""
    await ctx.info("started")
    await anyio.sleep(seconds)
    return "finished"


DROP_MARK = "DROP-THIS-REPLY"


@server.tool()
def dropped() -> str:
    """Answered by the server; the ``sse-drop`` mode removes the reply from the SSE stream."""
    return DROP_MARK


@server.tool()
def two_rounds(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """2026-07-28 multi-round-trip: the first call asks for another round (its own reply);
    the client's retry, a new request with a new id, carries the state back and completes."""
    if ctx.request_state != "round-2":
        return types.InputRequiredResult(request_state="round-2")
    return types.CallToolResult(content=[types.TextContent(type="text", text="done in two")])


@server.tool()
def crash_now() -> str:
    """The server is killed mid-call (SIGKILL): the client's stream drops."""
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@server.tool()
def exit_now() -> str:
    os._exit(0)  # the server dies mid-call: the client's stream ends


@server.tool()
async def ask_llm(prompt: str, ctx: Context) -> str:
    reply = await ctx.session.create_message(
        messages=[
            types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
        ],
        max_tokens=10,
        related_request_id=ctx.request_id,
    )
    content = reply.content
    return content.text if isinstance(content, types.TextContent) else "?"


@server.tool()
async def ping_client(ctx: Context) -> str:
    await ctx.session.send_ping()
    return "pinged"


def drop_marked_events(app):  # type: ignore[no-untyped-def]
    """An ASGI wrapper that drops every SSE event carrying :data:`DROP_MARK`: the server
    answered, the stream stays open, and the reply never reaches the client."""

    async def wrapped(scope, receive, send):  # type: ignore[no-untyped-def]
        async def filtered(message):  # type: ignore[no-untyped-def]
            body = message.get("body", b"")
            if message.get("type") == "http.response.body" and DROP_MARK.encode() in body:
                message = {**message, "body": b""}
            await send(message)

        await app(scope, receive, filtered)

    return wrapped


def main(argv: list[str]) -> None:
    if not argv:
        server.run()  # stdio
        return
    import uvicorn

    port = int(argv[1])
    if argv[0] == "sse-drop":
        app = drop_marked_events(server.sse_app())
    elif argv[0] == "sse":
        app = server.sse_app()
    else:
        app = server.streamable_http_app(
            json_response="json" in argv, stateless_http="stateless" in argv
        )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1:])
