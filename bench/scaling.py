"""Scaling: 50 concurrent sessions (one Agent each, one shared manager with 3 extensions on every hook) each
running the 3-step tool turn, beside the same sessions without extensions. The per-turn cost by extension count is
bench/ext_count.py.
"""

from __future__ import annotations

import asyncio
import time

from ._agents import THREE_STEP_TURN, BenchAgent, all_hook_manager
from ._common import Config, Section, gc_paused, pct, rnd

NAME = "scaling"
SESSIONS = 50


async def _concurrent(cfg: Config, extensions: int) -> tuple[float, float]:
    """(turns/s, p99 turn ms) of SESSIONS agents running turns concurrently, `extensions` on every hook."""
    waves = cfg.n(3, 1)
    mgr = await all_hook_manager(cfg, extensions, "conc") if extensions else None
    latencies: list[float] = []
    try:
        agents = [BenchAgent(manager=mgr, session_id=f"conc-{i}") for i in range(SESSIONS)]
        for agent in agents:
            await agent.start()
        try:
            async def one(agent: BenchAgent) -> None:
                t0 = time.perf_counter()
                result = await agent.chat(THREE_STEP_TURN)
                latencies.append(time.perf_counter() - t0)
                if result.status != "completed":
                    raise RuntimeError(f"concurrent turn ended {result.status}: {result.error}")

            await asyncio.gather(*(one(a) for a in agents[:5]))  # warm-up
            latencies.clear()
            t0 = time.perf_counter()
            with gc_paused():
                for _ in range(waves):
                    await asyncio.gather(*(one(a) for a in agents))
            wall = time.perf_counter() - t0
        finally:
            for agent in agents:
                await agent.close()
    finally:
        if mgr is not None:
            await mgr.close()
    return SESSIONS * waves / wall, pct(latencies, 0.99) * 1000


async def run(cfg: Config) -> Section:
    out = Section()
    tps0, p990 = await _concurrent(cfg, 0)
    tps, p99 = await _concurrent(cfg, 3)
    out.values = {
        "concurrent_turns_per_s": rnd(tps, 1),
        "concurrent_turn_p99_ms": rnd(p99, 1),
    }
    out.extra = {
        "concurrent_turns_per_s_0ext": rnd(tps0, 1),
        "concurrent_turn_p99_ms_0ext": rnd(p990, 1),
        "concurrent_sessions": SESSIONS,
    }
    return out
