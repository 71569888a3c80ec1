"""An extension tool call (`mgr.execute_tool`) vs the same tool in an MCP server over stdio (official `mcp`
SDK: FastMCP server (MCPServer in mcp 2.x), `mcp.client.stdio` + ClientSession.call_tool). Both tools are `async def add(a, b)`.
Alternated (ABAB) in the same run; p50 is the median over rounds of each round's p50.
"""

from __future__ import annotations

import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from host import ExtensionManager

from ._common import EXT_DIR, REPO_ROOT, Config, Section, abab, bench_manifest, median, pct, rnd, time_calls

NAME = "tool_vs_mcp"


async def run(cfg: Config) -> Section:
    calls = cfg.n(1000, 100)
    warmup = cfg.n(100, 20)
    out = Section()
    params = StdioServerParameters(command=sys.executable, args=[str(EXT_DIR / "mcp_server.py")], cwd=str(REPO_ROOT))
    async with ExtensionManager(sandbox=cfg.sandbox) as mgr:
        await mgr.load(bench_manifest("tools", tool=True))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            args = {"a": 2, "b": 3}

            async def ext_call() -> None:
                if await mgr.execute_tool("tools_add", args) != 5:
                    raise RuntimeError("extension tool gave a wrong answer")

            async def mcp_call() -> None:
                result = await session.call_tool("add", args)
                if getattr(result, "is_error", None) or getattr(result, "isError", None):
                    raise RuntimeError(f"MCP tool failed: {result.content}")

            await time_calls(warmup, mcp_call)
            await time_calls(warmup, ext_call)

            async def a() -> list[float]:
                return await time_calls(calls, mcp_call)

            async def b() -> list[float]:
                return await time_calls(calls, ext_call)

            mcp_rounds, ext_rounds = await abab(cfg.ab_rounds, a, b)
    ext_p50 = median([pct(r, 0.5) for r in ext_rounds])
    mcp_p50 = median([pct(r, 0.5) for r in mcp_rounds])
    out.values = {
        "tool_rtt_p50_us": rnd(ext_p50, 1),
        "mcp_tool_rtt_p50_us": rnd(mcp_p50, 1),
        "tool_vs_mcp_ratio": rnd(ext_p50 / mcp_p50, 3),
    }
    out.extra = {
        "tool_rtt_p99_us": rnd(median([pct(r, 0.99) for r in ext_rounds]), 1),
        "mcp_tool_rtt_p99_us": rnd(median([pct(r, 0.99) for r in mcp_rounds]), 1),
    }
    return out
