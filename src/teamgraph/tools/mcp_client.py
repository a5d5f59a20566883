"""Tools from MCP servers (stdio), through ``langchain-mcp-adapters`` (extra ``teamgraph[mcp]``).

Agents name them ``mcp:<server>/<tool>``; the model sees the tool's own name.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from langchain_core.tools import BaseTool

from teamgraph.errors import ToolNotFound

PREFIX = "mcp:"


def reference(server: str, tool: str) -> str:
    return f"{PREFIX}{server}/{tool}"


async def load_mcp_tools(servers: Mapping[str, Any]) -> dict[str, BaseTool]:
    """Every tool of every server, keyed by its ``mcp:<server>/<tool>`` reference."""
    if importlib.util.find_spec("langchain_mcp_adapters") is None:
        raise ToolNotFound(
            'MCP tools need the langchain-mcp-adapters package: pip install "teamgraph[mcp]"'
        )
    from langchain_mcp_adapters.client import MultiServerMCPClient

    connections: dict[str, Any] = {
        name: {"transport": "stdio", **server.model_dump(exclude_none=True)}
        for name, server in servers.items()
    }
    client = MultiServerMCPClient(connections)
    tools: dict[str, BaseTool] = {}
    for name in servers:
        try:
            loaded = await client.get_tools(server_name=name)
        except Exception as exc:  # a server that does not start is a configuration error
            raise ToolNotFound(f"MCP server {name!r} could not be loaded: {exc}") from exc
        tools.update({reference(name, tool.name): tool for tool in loaded})
    return tools
