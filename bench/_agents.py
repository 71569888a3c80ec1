"""Agents for the turn benchmarks: a host.Agent with one host-side tool, on the offline scripted model."""

from __future__ import annotations

import itertools
import time
from typing import Any

from host import Agent, ExtensionManager, tool

from ._common import ALL_HOOKS, Config, bench_manifest, ext_cpu_s

#: A 3-step turn with 2 tool calls: step 1 calls lookup, step 2 calls lookup, step 3 answers.
THREE_STEP_TURN = '/tool lookup {"key": "alpha"}\n/next\n/tool lookup {"key": "beta"}\n/next\ndone'

_ids = itertools.count(1)


class BenchAgent(Agent):
    """An agent whose only tool is `lookup` (host-side), so runs with and without extensions do the same work."""

    def get_tools(self) -> dict[str, Any]:
        @tool(description="Looks up a key", parameters={
            "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]})
        def lookup(key: str) -> str:
            return key.upper()

        return {"lookup": lookup}


async def timed_turn(manager: ExtensionManager | None, message: str) -> float:
    """Wall seconds of one chat() on a fresh agent (fresh session: no history growth across runs)."""
    return (await measured_turn(manager, message))[0]


async def measured_turn(manager: ExtensionManager | None, message: str) -> tuple[float, float, float]:
    """(wall s, host CPU s, extensions' CPU s) of one chat() on a fresh agent (a fresh session each time)."""
    infos = manager.extensions() if manager is not None else []
    async with BenchAgent(manager=manager, session_id=f"bench-{next(_ids)}") as agent:
        e0 = ext_cpu_s(infos)
        c0, t0 = time.process_time(), time.perf_counter()
        result = await agent.chat(message)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        ext = ext_cpu_s(infos) - e0
    if result.status != "completed":
        raise RuntimeError(f"benchmark turn ended {result.status}: {result.error}")
    return wall, cpu, ext


async def all_hook_manager(cfg: Config, count: int, prefix: str, *, decisions: bool = True) -> ExtensionManager:
    """A started manager with `count` extensions subscribed to every hook.

    `decisions`: beforeToolCall awaited as a decision (the manifest opts in); otherwise it is an observation,
    Think's default for a subscriber.
    """
    mgr = ExtensionManager(sandbox=cfg.sandbox)
    await mgr.__aenter__()
    if count:
        try:
            await mgr.load_all(
                [bench_manifest(f"{prefix}{i}", ALL_HOOKS, decisions=decisions) for i in range(count)]
            )
        except BaseException:
            await mgr.close()
            raise
    return mgr
