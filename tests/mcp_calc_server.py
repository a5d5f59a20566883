"""A tiny MCP server over stdio, for the MCP tool-loading test."""

from mcp.server.fastmcp import FastMCP

server = FastMCP("calc")


@server.tool()
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


if __name__ == "__main__":
    server.run("stdio")
