"""A streamed turn (`Agent.chat("/chunks N")` on the scripted model) with 3 onChunk extensions vs none.

Baseline: an Agent without extensions (no manager). Subject: an Agent on a manager with 3 extensions subscribed
to onChunk. Alternated (ABAB); the ratio is of medians. chat() returns after the turn's observations are flushed.
Extra figures: the host-CPU ratio (less sensitive to other load on the machine than wall time), and the CPU
the extension processes spent per chunk (the SDK side); `streamed_turn_loop_lag_max_ms`: how late a 5 ms timer fired
on the host's loop during a few more such turns with the 3 extensions (the scripted model's chunks are all ready, so
litellm's stream never suspends: what the turn loop gives back to the loop is all other tasks get meanwhile).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from host import ExtensionManager

from ._agents import measured_turn
from ._common import Config, Section, abab, bench_manifest, gc_paused, median, rnd, timer_lateness

NAME = "streamed_turn"
EXTENSIONS = 3


async def _loop_lag_ms(turn: Callable[[], Awaitable[object]]) -> float:
    """The latest a 5 ms timer fired (ms past its due time) on this loop while `turn` ran."""
    async with timer_lateness(0.005) as lags:
        await turn()
    return max(lags, default=0.0) * 1000


async def run(cfg: Config) -> Section:
    chunks = cfg.n(2000, 300)
    per_round = cfg.n(2, 1)
    message = f"/chunks {chunks}"
    out = Section()
    async with ExtensionManager(sandbox=cfg.sandbox) as mgr:
        await mgr.load_all([bench_manifest(f"stream{i}", ["onChunk"]) for i in range(EXTENSIONS)])
        await measured_turn(None, message)  # warm-up both paths
        await measured_turn(mgr, message)

        async def a() -> list[tuple[float, float, float]]:
            with gc_paused():
                return [await measured_turn(None, message) for _ in range(per_round)]

        async def b() -> list[tuple[float, float, float]]:
            with gc_paused():
                return [await measured_turn(mgr, message) for _ in range(per_round)]

        ra, rb = await abab(cfg.ab_rounds, a, b)
        dropped = sum(i.dropped_observations for i in mgr.extensions())
        lag_ms = max([await _loop_lag_ms(lambda: measured_turn(mgr, message)) for _ in range(cfg.n(3, 1))])
    base = [x for r in ra for x in r]
    subj = [x for r in rb for x in r]
    wall0, wall3 = median([x[0] for x in base]), median([x[0] for x in subj])
    cpu0, cpu3 = median([x[1] for x in base]), median([x[1] for x in subj])
    ext3 = median([x[2] for x in subj])
    out.values = {"streamed_turn_ratio_3ext": rnd(wall3 / wall0, 3)}
    out.extra = {
        "streamed_turn_ms_0ext": rnd(wall0 * 1000, 1),
        "streamed_turn_ms_3ext": rnd(wall3 * 1000, 1),
        "streamed_turn_host_cpu_ratio_3ext": rnd(cpu3 / cpu0, 3),
        "streamed_turn_host_cpu_us_per_chunk_per_ext": rnd((cpu3 - cpu0) * 1e6 / (chunks * EXTENSIONS), 2),
        "streamed_turn_ext_cpu_us_per_chunk_per_ext": rnd(ext3 * 1e6 / (chunks * EXTENSIONS), 2),
        "streamed_turn_chunks": chunks,
        "streamed_turn_chunks_dropped": dropped,
        "streamed_turn_loop_lag_max_ms": rnd(lag_ms, 1),
    }
    return out
