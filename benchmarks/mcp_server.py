"""A stdio MCP server with one ``echo`` tool, spawned by the MCP benchmark."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("pairwatch-bench")


@server.tool()
def echo(x: int) -> int:
    return x


if __name__ == "__main__":
    server.run()
