"""Per-turn overhead: a 3-step turn with 2 (host-side) tool calls on the scripted model, with 5 extensions
subscribed to every hook (beforeToolCall with decisions, so awaited) vs no extensions. Alternated (ABAB).
"""

from __future__ import annotations

from ._agents import THREE_STEP_TURN, all_hook_manager, timed_turn
from ._common import Config, Section, abab, gc_paused, median, rnd

NAME = "turn_overhead"


async def run(cfg: Config) -> Section:
    per_round = cfg.n(5, 2)
    out = Section()
    mgr = await all_hook_manager(cfg, 5, "all")
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
    base = median([x for r in ra for x in r])
    subj = median([x for r in rb for x in r])
    out.values = {
        "turn_overhead_ms_5ext": rnd((subj - base) * 1000, 2),
        "turn_overhead_ratio_5ext": rnd(subj / base, 3),
    }
    out.extra = {"turn_ms_0ext": rnd(base * 1000, 2), "turn_ms_5ext": rnd(subj * 1000, 2)}
    return out
