"""Per-turn overhead by the number of extensions: 1, 2, 5, 10 and 20, two series, each turn interleaved with the
same turn without extensions (bench/_overhead.py).

`overhead_ms_by_ext_count`: observe-only extensions (beforeToolCall, afterToolCall, onStepFinish, onChunk, all
observed). Their observations are serialized once for all of them and each extension gets one frame per turn, sent
in parallel at the end of the turn: the cost should grow sub-linearly. `overhead_ms_by_ext_count_before_turn`: the
same counts subscribed to beforeTurn only, which is awaited and sequential by contract (each extension sees the
previous one's system prompt): linear. Measured from the most extensions to the fewest (unloaded between steps).
"""

from __future__ import annotations

from collections.abc import Sequence

from host import ExtensionManager

from ._agents import THREE_STEP_TURN
from ._common import Config, Section, bench_manifest, rnd
from ._overhead import Overhead, load_avg, turn_overhead

NAME = "ext_count"
EXT_COUNTS = (20, 10, 5, 2, 1)  # from the most to the fewest (extensions are unloaded between steps)
OBSERVED = ("beforeToolCall", "afterToolCall", "onStepFinish", "onChunk")


async def _series(cfg: Config, hooks: Sequence[str], prefix: str) -> dict[int, Overhead]:
    rounds = 1 if cfg.quick else max(cfg.ab_rounds, 6)
    pairs = cfg.n(4, 1)
    mgr = ExtensionManager(sandbox=cfg.sandbox)
    await mgr.__aenter__()
    out: dict[int, Overhead] = {}
    try:
        await mgr.load_all([bench_manifest(f"{prefix}{i}", hooks) for i in range(max(EXT_COUNTS))])
        for count in EXT_COUNTS:
            for info in mgr.extensions()[count:]:
                await mgr.unload(info.name)
            out[count] = await turn_overhead(mgr, THREE_STEP_TURN, rounds, pairs, warm=count == max(EXT_COUNTS))
    finally:
        await mgr.close()
    return {k: out[k] for k in sorted(out)}


def _slope(series: dict[int, Overhead], figure: str) -> float:
    """The marginal cost of one more extension: the least-squares slope of `figure` over the counts."""
    xs = list(series)
    ys = [getattr(series[k], figure) for k in xs]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return rnd(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den, 3) if den else 0.0


def _figures(series: dict[int, Overhead]) -> dict[str, float]:
    return {str(k): rnd(v.ms, 2) for k, v in series.items()}


async def run(cfg: Config) -> Section:
    out = Section()
    observed = await _series(cfg, OBSERVED, "obsn")
    obs_load = load_avg()
    before_turn = await _series(cfg, ("beforeTurn",), "btn")
    bt_load = load_avg()
    out.values = {
        "overhead_ms_by_ext_count": _figures(observed),
        "overhead_ms_by_ext_count_before_turn": _figures(before_turn),
    }
    out.extra = {
        "overhead_ms_per_ext_by_count": {str(k): rnd(v.ms / k, 2) for k, v in observed.items()},
        "overhead_ms_by_ext_count_spread": {str(k): v.spread() for k, v in observed.items()},
        "overhead_ms_per_ext_by_count_before_turn": {str(k): rnd(v.ms / k, 2) for k, v in before_turn.items()},
        "overhead_ms_by_ext_count_before_turn_spread": {str(k): v.spread() for k, v in before_turn.items()},
        "host_cpu_ms_by_ext_count": {str(k): rnd(v.host_cpu_ms, 2) for k, v in observed.items()},
        "ext_cpu_ms_by_ext_count": {str(k): rnd(v.ext_cpu_ms, 2) for k, v in observed.items()},
        "host_cpu_ms_by_ext_count_before_turn": {str(k): rnd(v.host_cpu_ms, 2) for k, v in before_turn.items()},
        "ext_cpu_ms_by_ext_count_before_turn": {str(k): rnd(v.ext_cpu_ms, 2) for k, v in before_turn.items()},
        "ext_count_turn_ms_0ext": rnd(observed[1].base_ms, 2),
        # per added observe-only extension (slopes over 1..20): wall ms, host CPU ms, the extensions' CPU ms
        "overhead_ms_marginal_per_ext": _slope(observed, "ms"),
        "host_cpu_ms_marginal_per_ext": _slope(observed, "host_cpu_ms"),
        "ext_cpu_ms_marginal_per_ext": _slope(observed, "ext_cpu_ms"),
        "ext_count_load_avg_1m": [obs_load, bt_load],
    }
    return out
