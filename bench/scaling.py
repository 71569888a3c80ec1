"""Scaling: 50 concurrent sessions (one Agent each, one shared manager with 3 extensions on every hook) each
running the 3-step tool turn; and the per-turn overhead (vs no extensions, alternated) with 1, 2, 5 and 10
extensions on every hook, to see how the cost grows (the goal: linear, no cliff).
"""

from __future__ import annotations

import asyncio
import time

from ._agents import THREE_STEP_TURN, BenchAgent, all_hook_manager, timed_turn
from ._common import Config, Section, abab, gc_paused, median, pct, rnd

NAME = "scaling"
SESSIONS = 50
EXT_COUNTS = (10, 5, 2, 1)  # measured from the most to the fewest (extensions are unloaded between steps)


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


async def _by_count(cfg: Config) -> dict[str, float]:
    per_round = cfg.n(3, 1)
    rounds = cfg.ab_rounds
    mgr = await all_hook_manager(cfg, max(EXT_COUNTS), "scale")
    result: dict[str, float] = {}
    try:
        await timed_turn(None, THREE_STEP_TURN)
        await timed_turn(mgr, THREE_STEP_TURN)
        for count in EXT_COUNTS:
            for info in mgr.extensions()[count:]:
                await mgr.unload(info.name)

            async def a() -> list[float]:
                with gc_paused():
                    return [await timed_turn(None, THREE_STEP_TURN) for _ in range(per_round)]

            async def b() -> list[float]:
                with gc_paused():
                    return [await timed_turn(mgr, THREE_STEP_TURN) for _ in range(per_round)]

            ra, rb = await abab(rounds, a, b)
            base = median([x for r in ra for x in r])
            subj = median([x for r in rb for x in r])
            result[str(count)] = rnd((subj - base) * 1000, 2)
    finally:
        await mgr.close()
    return {k: result[k] for k in sorted(result, key=int)}


async def run(cfg: Config) -> Section:
    out = Section()
    tps0, p990 = await _concurrent(cfg, 0)
    tps, p99 = await _concurrent(cfg, 3)
    by_count = await _by_count(cfg)
    out.values = {
        "concurrent_turns_per_s": rnd(tps, 1),
        "concurrent_turn_p99_ms": rnd(p99, 1),
        "overhead_ms_by_ext_count": by_count,
    }
    per_ext = {k: rnd(v / int(k), 2) for k, v in by_count.items()}
    out.extra = {
        "concurrent_turns_per_s_0ext": rnd(tps0, 1),
        "concurrent_turn_p99_ms_0ext": rnd(p990, 1),
        "overhead_ms_per_ext_by_count": per_ext,
        "concurrent_sessions": SESSIONS,
    }
    return out
