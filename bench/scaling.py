"""Scaling: 50 concurrent sessions (one Agent each, one shared manager with 3 extensions on every hook) each
running the 3-step tool turn, beside the same sessions without extensions, and beside the floor: the turn's three
bare `litellm.acompletion` streams (recorded from a real turn, bench/litellm_floor.py) made by SESSIONS concurrent
tasks, with the host's switches: what litellm alone reaches on this machine. The per-turn cost by extension count
is bench/ext_count.py.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ._agents import THREE_STEP_TURN, BenchAgent, all_hook_manager
from ._common import Config, Section, ext_cpu_s, gc_paused, pct, rnd
from .litellm_floor import bare_calls, record_turn

NAME = "scaling"
SESSIONS = 50


async def _concurrent(cfg: Config, extensions: int) -> tuple[float, float, float, float]:
    """(turns/s, p99 turn ms, host CPU ms per turn, extensions' CPU ms per turn) of SESSIONS agents running turns
    concurrently, `extensions` on every hook."""
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
            infos = mgr.extensions() if mgr is not None else []
            e0, c0, t0 = ext_cpu_s(infos), time.process_time(), time.perf_counter()
            with gc_paused():
                for _ in range(waves):
                    await asyncio.gather(*(one(a) for a in agents))
            wall, cpu, ext = time.perf_counter() - t0, time.process_time() - c0, ext_cpu_s(infos) - e0
        finally:
            for agent in agents:
                await agent.close()
    finally:
        if mgr is not None:
            await mgr.close()
    turns = SESSIONS * waves
    return turns / wall, pct(latencies, 0.99) * 1000, cpu * 1000 / turns, ext * 1000 / turns


async def _litellm_floor(cfg: Config, calls: list[dict[str, Any]]) -> tuple[float, float]:
    """(turns/s, p99 ms) of SESSIONS tasks each making the turn's bare model calls one after another, at once."""
    waves = cfg.n(3, 1)
    latencies: list[float] = []

    async def one() -> None:
        t0 = time.perf_counter()
        await bare_calls(calls, True, drain=False)
        latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(one() for _ in range(5)))  # warm-up
    latencies.clear()
    t0 = time.perf_counter()
    with gc_paused():
        for _ in range(waves):
            await asyncio.gather(*(one() for _ in range(SESSIONS)))
    wall = time.perf_counter() - t0
    return SESSIONS * waves / wall, pct(latencies, 0.99) * 1000


async def run(cfg: Config) -> Section:
    out = Section()
    floor_tps, floor_p99 = await _litellm_floor(cfg, await record_turn())
    tps0, p990, host0, _ = await _concurrent(cfg, 0)
    tps, p99, host3, ext3 = await _concurrent(cfg, 3)
    out.values = {
        "concurrent_turns_per_s": rnd(tps, 1),
        "concurrent_turn_p99_ms": rnd(p99, 1),
        "concurrent_litellm_floor_turns_per_s": rnd(floor_tps, 1),
        "concurrent_turns_vs_litellm_floor": rnd(tps / floor_tps, 3),
    }
    out.extra = {
        "concurrent_turns_per_s_0ext": rnd(tps0, 1),
        "concurrent_litellm_floor_p99_ms": rnd(floor_p99, 1),
        "concurrent_turns_vs_litellm_floor_0ext": rnd(tps0 / floor_tps, 3),
        "concurrent_turn_p99_ms_0ext": rnd(p990, 1),
        "concurrent_host_cpu_ms_per_turn_0ext": rnd(host0, 1),
        "concurrent_host_cpu_ms_per_turn": rnd(host3, 1),
        "concurrent_ext_cpu_ms_per_turn": rnd(ext3, 1),
        "concurrent_sessions": SESSIONS,
    }
    return out
