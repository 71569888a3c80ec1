"""Baseline: the benchmark's `add` tool as an MCP server over stdio (official `mcp` SDK: FastMCP, named MCPServer in mcp 2.x)."""

from __future__ import annotations

try:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as _Server
except ImportError:  # mcp 2.x renamed FastMCP to MCPServer
    from mcp.server.mcpserver import MCPServer as _Server

mcp = _Server("bench")


@mcp.tool(description="Adds two integers")
async def add(a: int, b: int) -> int:
    return a + b


if __name__ == "__main__":
    mcp.run("stdio")
