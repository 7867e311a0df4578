"""MCP servers' tools, each declaring its server and tool so approval cards name them.

``langchain-mcp-adapters`` turns MCP tools into LangChain tools but keeps the
server's name out of the tool. :func:`get_mcp_tools` replaces
``client.get_tools()`` and marks every tool with a
:class:`~aais_langgraph.tools.ToolAction` of kind ``mcp.tool.call`` and resource
``mcp://SERVER/TOOL``: gated calls then say which server and tool they run,
the digest binds them, and ``resource_prefix`` scope constraints can name a
server. Gate them with ``ApprovalMiddleware`` like any other tool.

Needs the ``mcp`` extra. Not imported by ``aais_langgraph.tools``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import quote

from langchain_core.tools import BaseTool

from .declared import ToolAction

if TYPE_CHECKING:
    from langchain_mcp_adapters.client import MultiServerMCPClient

__all__ = ["MCP_ACTION_KIND", "get_mcp_tools", "mark_mcp_tools", "mcp_resource"]

MCP_ACTION_KIND = "mcp.tool.call"


def mcp_resource(server_name: str, tool_name: str) -> str:
    """``mcp://SERVER/TOOL``, each part percent-encoded so no name can pose as another."""
    return f"mcp://{quote(server_name, safe='')}/{quote(tool_name, safe='')}"


def mark_mcp_tools(
    tools: Iterable[BaseTool], *, server_name: str, tool_name_prefix: bool = False
) -> list[BaseTool]:
    """Copies of tools loaded from one MCP server, each declaring that server and its tool.

    For tools from ``load_mcp_tools(session, server_name=...)``; pass
    ``tool_name_prefix=True`` when the tools were loaded with it, so the resource
    names the server's own tool name.
    """
    marked = []
    prefix = f"{server_name}_"
    for tool in tools:
        name = tool.name
        if tool_name_prefix:
            if not name.startswith(prefix):
                raise ValueError(f"tool {name!r} does not carry the prefix of {server_name!r}")
            name = name[len(prefix) :]
        declared = ToolAction(kind=MCP_ACTION_KIND, resource=mcp_resource(server_name, name))
        marked.append(tool.model_copy(update={"metadata": declared.with_metadata(tool.metadata)}))
    return marked


async def get_mcp_tools(
    client: MultiServerMCPClient, *, server_name: str | None = None
) -> list[BaseTool]:
    """``client.get_tools(server_name=...)``, with each tool marked with its server."""
    names = [server_name] if server_name is not None else list(client.connections)
    loaded = await asyncio.gather(*(client.get_tools(server_name=name) for name in names))
    return [
        tool
        for name, tools in zip(names, loaded, strict=True)
        for tool in mark_mcp_tools(
            tools, server_name=name, tool_name_prefix=client.tool_name_prefix
        )
    ]
