"""Per-turn overhead: a 3-step turn with 2 (host-side) tool calls on the scripted model, with 5 extensions
subscribed to every hook vs no extensions, interleaved turn by turn (A B B A ...; bench/_overhead.py).

`turn_overhead_ms_5ext`: every hook as Think subscribes to it — beforeTurn awaited, beforeToolCall/afterToolCall/
onStepFinish/onChunk observed; the median over every turn, and beside it (extra `*_spread`) the min..max of the
per-round figures. `turn_overhead_ms_5ext_loaded`: the same with a CPU hog process spinning beside it (one of the
two cores taken). `turn_overhead_ms_5ext_deciders` (extra): beforeToolCall opted in to decisions
(`hooks.beforeToolCall.decisions: true`), so each tool call also waits for all 5 extensions.
"""

from __future__ import annotations

from ._agents import THREE_STEP_TURN, all_hook_manager
from ._common import Config, Section, rnd
from ._overhead import Overhead, cpu_hog, load_avg, turn_overhead

NAME = "turn_overhead"


async def _overhead(cfg: Config, decisions: bool, loaded: bool = False) -> tuple[Overhead, float]:
    """The overhead of 5 extensions on every hook, and the load average as it was measured."""
    rounds = 1 if cfg.quick else max(cfg.ab_rounds, 30)
    pairs = cfg.n(6, 1)
    mgr = await all_hook_manager(cfg, 5, "dec" if decisions else "obs", decisions=decisions)
    try:
        if loaded:
            with cpu_hog():
                return await turn_overhead(mgr, THREE_STEP_TURN, rounds, pairs), load_avg()
        return await turn_overhead(mgr, THREE_STEP_TURN, rounds, pairs), load_avg()
    finally:
        await mgr.close()


async def run(cfg: Config) -> Section:
    out = Section()
    obs, load = await _overhead(cfg, decisions=False)
    dec, dload = await _overhead(cfg, decisions=True)
    hog, hload = await _overhead(cfg, decisions=False, loaded=True)
    out.values = {
        "turn_overhead_ms_5ext": rnd(obs.ms, 2),
        "turn_overhead_ratio_5ext": rnd(obs.ratio, 3),
        "turn_overhead_ms_5ext_loaded": rnd(hog.ms, 2),
    }
    out.extra = {
        "turn_ms_0ext": rnd(obs.base_ms, 2),
        "turn_ms_5ext": rnd(obs.subject_ms, 2),
        "turn_overhead_ms_5ext_spread": obs.spread(),
        "turn_overhead_load_avg_1m": load,
        "turn_overhead_host_cpu_ms_5ext": rnd(obs.host_cpu_ms, 2),
        "turn_ext_cpu_ms_5ext": rnd(obs.ext_cpu_ms, 2),
        "turn_overhead_ms_5ext_loaded_spread": hog.spread(),
        "turn_ms_0ext_loaded": rnd(hog.base_ms, 2),
        "turn_overhead_loaded_load_avg_1m": hload,
        "turn_overhead_ms_5ext_deciders": rnd(dec.ms, 2),
        "turn_overhead_ms_5ext_deciders_spread": dec.spread(),
        "turn_overhead_ratio_5ext_deciders": rnd(dec.ratio, 3),
        "turn_overhead_deciders_load_avg_1m": dload,
    }
    return out
