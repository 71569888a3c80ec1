"""A streamed turn (`Agent.chat("/chunks N")` on the scripted model) with 3 onChunk extensions vs none.

Baseline: an Agent without extensions (no manager). Subject: an Agent on a manager with 3 extensions subscribed
to onChunk. Alternated (ABAB); the ratio is of medians. chat() returns after the turn's observations are flushed.
"""

from __future__ import annotations

from ._agents import timed_turn
from ._common import Config, Section, abab, bench_manifest, gc_paused, median, rnd

from host import ExtensionManager

NAME = "streamed_turn"


async def run(cfg: Config) -> Section:
    chunks = cfg.n(2000, 300)
    per_round = cfg.n(2, 1)
    message = f"/chunks {chunks}"
    out = Section()
    async with ExtensionManager(sandbox=cfg.sandbox) as mgr:
        await mgr.load_all([bench_manifest(f"stream{i}", ["onChunk"]) for i in range(3)])
        await timed_turn(None, message)  # warm-up both paths
        await timed_turn(mgr, message)

        async def a() -> list[float]:
            with gc_paused():
                return [await timed_turn(None, message) for _ in range(per_round)]

        async def b() -> list[float]:
            with gc_paused():
                return [await timed_turn(mgr, message) for _ in range(per_round)]

        ra, rb = await abab(cfg.ab_rounds, a, b)
        dropped = sum(i.dropped_observations for i in mgr.extensions())
    base = median([x for r in ra for x in r])
    subj = median([x for r in rb for x in r])
    out.values = {"streamed_turn_ratio_3ext": rnd(subj / base, 3)}
    out.extra = {
        "streamed_turn_ms_0ext": rnd(base * 1000, 1),
        "streamed_turn_ms_3ext": rnd(subj * 1000, 1),
        "streamed_turn_chunks": chunks,
        "streamed_turn_chunks_dropped": dropped,
    }
    return out
