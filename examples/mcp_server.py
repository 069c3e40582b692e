"""A tiny MCP server (MCP Python SDK) for examples/mcp_client.py: stdio, two tools."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("pairwatch-example")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
async def slow(seconds: float) -> str:
    """Answer after a while (long enough, and the client's read timeout fires first)."""
    await anyio.sleep(seconds)
    return "done"


if __name__ == "__main__":
    server.run()
