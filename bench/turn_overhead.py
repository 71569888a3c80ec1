"""Per-turn overhead: a 3-step turn with 2 (host-side) tool calls on the scripted model, with 5 extensions
subscribed to every hook vs no extensions, alternated (ABAB).

Two subscriptions are measured. `turn_overhead_ms_5ext`: every hook as Think subscribes to it — beforeTurn
awaited, beforeToolCall/afterToolCall/onStepFinish/onChunk observed. `turn_overhead_ms_5ext_deciders` (extra):
the same with beforeToolCall opted in to decisions (`hooks.beforeToolCall.decisions: true`), so each tool call
also waits for all 5 extensions.
"""

from __future__ import annotations

from ._agents import THREE_STEP_TURN, all_hook_manager, timed_turn
from ._common import Config, Section, abab, gc_paused, median, rnd

NAME = "turn_overhead"


async def _overhead(cfg: Config, decisions: bool) -> tuple[float, float]:
    """(median seconds without extensions, median seconds with 5)."""
    per_round = cfg.n(5, 2)
    mgr = await all_hook_manager(cfg, 5, "dec" if decisions else "obs", decisions=decisions)
    try:
        await timed_turn(None, THREE_STEP_TURN)
        await timed_turn(mgr, THREE_STEP_TURN)

        async def a() -> list[float]:
            with gc_paused():
                return [await timed_turn(None, THREE_STEP_TURN) for _ in range(per_round)]

        async def b() -> list[float]:
            with gc_paused():
                return [await timed_turn(mgr, THREE_STEP_TURN) for _ in range(per_round)]

        ra, rb = await abab(cfg.ab_rounds, a, b)
    finally:
        await mgr.close()
    return median([x for r in ra for x in r]), median([x for r in rb for x in r])


async def run(cfg: Config) -> Section:
    out = Section()
    base, subj = await _overhead(cfg, decisions=False)
    dbase, dsubj = await _overhead(cfg, decisions=True)
    out.values = {
        "turn_overhead_ms_5ext": rnd((subj - base) * 1000, 2),
        "turn_overhead_ratio_5ext": rnd(subj / base, 3),
    }
    out.extra = {
        "turn_ms_0ext": rnd(base * 1000, 2),
        "turn_ms_5ext": rnd(subj * 1000, 2),
        "turn_overhead_ms_5ext_deciders": rnd((dsubj - dbase) * 1000, 2),
        "turn_overhead_ratio_5ext_deciders": rnd(dsubj / dbase, 3),
    }
    return out
