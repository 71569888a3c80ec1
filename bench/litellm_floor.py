"""A turn against its floor: the bare `litellm.acompletion` streaming calls the same turn makes, made directly.

One 3-step turn (2 tool calls) on the scripted model, no extensions, records the keyword arguments of its three
model calls; those calls are then replayed as bare `litellm.acompletion(**kwargs)` streams, read to the end. Four
subjects, alternated (ABAB):

- `turn`: `Agent.chat()` of the turn on a fresh session (host defaults: litellm's bookkeeping off);
- `bare`: the three calls with the host's switches (each call in the same quiet context as the turn's): the floor;
- `bare_defaults`: the three calls with litellm's defaults (cost calculation, success logging);
- `turn_bookkeeping`: the turn with `litellm_bookkeeping=True` (litellm's defaults, as before issue 16).

`turn_vs_litellm_ratio`: `turn` against `bare` in 40 short ABAB rounds of 6 each (a turn and its floor take ~8 ms),
each round's median turn wall over the adjacent round's median floor wall, the median of those 40 ratios (extras: their
min and max, and the ratio of the overall medians); `turn_bookkeeping` against `bare_defaults` in the usual 6 rounds
of 8. Measured so, four runs gave 1.236-1.243, where 6 rounds of 8 and the ratio of overall medians had given
1.145-1.291. `litellm_call_cpu_ms`: CPU per bare call (all
threads, the success logging that runs after the stream included), with the host's switches; its `_defaults` twin
is the same call with litellm's defaults (the figure before the switches).

Extras `litellm_ms_inside_turn` / `litellm_ms_inside_bare_calls` / `turn_ms_outside_litellm`: per turn, the time
spent inside litellm (`acompletion` and the stream's `__anext__`, timed by wrappers on both sides, interleaved turn by
turn) during the turn and during its bare calls, and the turn's wall time outside it: the split of the turn's excess
over its floor between the host's own work and litellm running slower inside the turn.

Extra `litellm_turn_host_cpu_ms` (with its `_min_max` over rounds): the host's own work alone — the same turn with
`litellm.acompletion` answering each of its three calls by replaying the chunks recorded from the real call (no
litellm work at all), CPU of the whole process per turn. On a shared machine it moves far less than the ratio, whose
numerator and denominator are each ~15x larger: it is the figure to steer the host's part by.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import litellm

from host.turn._litellm_work import quiet_context

from ._agents import THREE_STEP_TURN, BenchAgent
from ._common import Config, Section, abab, gc_paused, median, rnd

NAME = "litellm_floor"
T = TypeVar("T")
_ids = iter(range(1, 10**9))


async def record_calls(run: Callable[[], Awaitable[T]]) -> tuple[list[dict[str, Any]], T]:
    """The keyword arguments of every `litellm.acompletion` call `run()` makes, in order, and what it returned."""
    calls: list[dict[str, Any]] = []
    real = litellm.acompletion

    async def recording(**kwargs: Any) -> Any:
        calls.append(copy.deepcopy(kwargs))
        return await real(**kwargs)

    litellm.acompletion = recording  # type: ignore[assignment]
    try:
        return calls, await run()
    finally:
        litellm.acompletion = real  # type: ignore[assignment]


async def record_turn() -> list[dict[str, Any]]:
    """The keyword arguments of the turn's model calls, in order."""

    async def turn() -> Any:
        async with BenchAgent(session_id="floor-record") as agent:
            return await agent.chat(THREE_STEP_TURN)

    calls, result = await record_calls(turn)
    if result.status != "completed" or len(calls) != 3:
        raise RuntimeError(f"recording turn: {result.status} with {len(calls)} model calls ({result.error})")
    return calls


async def _drain() -> None:
    """Let what litellm scheduled after a stream (its success logging task) finish."""
    me = asyncio.current_task()
    for _ in range(100):
        pending = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
        if not pending:
            return
        await asyncio.wait(pending, timeout=0.1)


async def bare_calls(calls: list[dict[str, Any]], quiet: bool, drain: bool = True) -> tuple[float, float]:
    """(wall s, CPU s) of the calls made one after another, each read to its end; CPU includes the drain (waiting
    for every other task of the loop: pass drain=False when other calls run concurrently)."""

    async def one(kwargs: dict[str, Any]) -> None:
        stream = await litellm.acompletion(**kwargs)
        async for _ in stream:
            pass

    loop = asyncio.get_running_loop()
    c0, t0 = time.process_time(), time.perf_counter()
    for kwargs in calls:
        ctx = quiet_context(None, kwargs) if quiet else None
        if ctx is None:
            await one(kwargs)
        else:
            await loop.create_task(one(kwargs), context=ctx)
    wall = time.perf_counter() - t0
    if drain:
        await _drain()
    return wall, time.process_time() - c0


async def _turn(bookkeeping: bool | None) -> tuple[float, float]:
    async with BenchAgent(session_id=f"floor-{next(_ids)}", litellm_bookkeeping=bookkeeping) as agent:
        c0, t0 = time.process_time(), time.perf_counter()
        result = await agent.chat(THREE_STEP_TURN)
        wall = time.perf_counter() - t0
        await _drain()
        cpu = time.process_time() - c0
    if result.status != "completed":
        raise RuntimeError(f"benchmark turn ended {result.status}: {result.error}")
    return wall, cpu


class _Replayed:
    """One recorded model stream, replayed (the turn loop only iterates it)."""

    def __init__(self, chunks: list[Any]) -> None:
        self._chunks = chunks

    def __aiter__(self) -> Any:
        return self._replay()

    async def _replay(self) -> Any:
        for chunk in self._chunks:
            yield chunk


async def host_only_turns(calls: list[dict[str, Any]], rounds: int, per_round: int) -> list[float]:
    """CPU ms per turn of the turn with its model calls replayed (recorded chunks, in call order), per round."""
    recorded = []
    for kwargs in calls:
        stream = await litellm.acompletion(**kwargs)
        recorded.append([chunk async for chunk in stream])
    await _drain()
    real = litellm.acompletion
    served = iter(range(10**9))

    async def replay(**_: Any) -> _Replayed:
        return _Replayed(recorded[next(served) % len(recorded)])

    litellm.acompletion = replay  # type: ignore[assignment]
    try:
        per: list[float] = []
        for _ in range(rounds + 1):  # the first round warms up
            agents = [BenchAgent(session_id=f"floor-host-{next(_ids)}") for _ in range(per_round)]
            for agent in agents:
                await agent.__aenter__()
            try:
                with gc_paused():
                    c0 = time.process_time()
                    for agent in agents:
                        result = await agent.chat(THREE_STEP_TURN)
                        if result.status != "completed":
                            raise RuntimeError(f"replayed turn ended {result.status}: {result.error}")
                    per.append((time.process_time() - c0) * 1000 / per_round)
            finally:
                for agent in agents:
                    await agent.__aexit__(None, None, None)
        return per[1:]
    finally:
        litellm.acompletion = real  # type: ignore[assignment]


async def litellm_split(calls: list[dict[str, Any]], rounds: int, per_round: int) -> tuple[list[float], list[float],
                                                                                      list[float]]:
    """Per turn, in interleaved batches: (ms inside litellm during the turn, ms inside litellm in the bare calls,
    the turn's wall ms). "Inside litellm": `litellm.acompletion` and the stream's `__anext__`, timed by wrappers
    installed for this phase only (the same wrappers on both sides)."""
    from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

    spent = [0.0]
    real_acompletion, real_anext = litellm.acompletion, CustomStreamWrapper.__anext__

    async def acompletion(**kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await real_acompletion(**kwargs)
        finally:
            spent[0] += time.perf_counter() - t0

    async def anext_(self: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await real_anext(self)
        finally:
            spent[0] += time.perf_counter() - t0

    inside_turn: list[float] = []
    inside_bare: list[float] = []
    turn_wall: list[float] = []
    litellm.acompletion = acompletion  # type: ignore[assignment]
    CustomStreamWrapper.__anext__ = anext_  # type: ignore[method-assign]
    try:
        for _ in range(rounds):
            with gc_paused():
                for _ in range(per_round):
                    spent[0] = 0.0
                    await bare_calls(calls, True)
                    inside_bare.append(spent[0] * 1000)
                    spent[0] = 0.0
                    wall, _cpu = await _turn(None)
                    inside_turn.append(spent[0] * 1000)
                    turn_wall.append(wall * 1000)
    finally:
        litellm.acompletion = real_acompletion  # type: ignore[assignment]
        CustomStreamWrapper.__anext__ = real_anext  # type: ignore[method-assign]
    return inside_turn, inside_bare, turn_wall


async def run(cfg: Config) -> Section:
    calls = await record_turn()
    n_calls = len(calls)
    for _ in range(cfg.n(2, 1)):  # warm-up every path
        await bare_calls(calls, True)
        await bare_calls(calls, False)
        await _turn(None)
        await _turn(True)

    def batch(fn: Any, *args: Any, per_round: int) -> Any:
        async def go() -> list[tuple[float, float]]:
            with gc_paused():
                return [await fn(*args) for _ in range(per_round)]
        return go

    # the ratio: many short rounds (a turn and its floor take ~8 ms), each round's turn median over the adjacent
    # floor median, the median over rounds (a machine that drifts moves both sides of a round alike)
    rounds = cfg.rounds or cfg.n(40, 2)
    floor, turn = await abab(rounds, batch(bare_calls, calls, True, per_round=6), batch(_turn, None, per_round=6))
    # litellm's defaults (~25 ms a turn): the figure before the switches, fewer rounds
    defaults, turn_bk = await abab(cfg.ab_rounds, batch(bare_calls, calls, False, per_round=cfg.n(8, 1)),
                                   batch(_turn, True, per_round=cfg.n(8, 1)))

    def med(rounds: list[list[tuple[float, float]]], i: int) -> float:
        return median([x[i] for r in rounds for x in r])

    def per_round(rounds: list[list[tuple[float, float]]]) -> list[float]:
        return [median([x[0] for x in r]) * 1000 for r in rounds]

    def spread(values: list[float], digits: int = 1) -> list[float]:
        return [rnd(min(values), digits), rnd(max(values), digits)]

    floor_ms, turn_ms = med(floor, 0) * 1000, med(turn, 0) * 1000
    ratios = [t / f for t, f in zip(per_round(turn), per_round(floor))]
    out = Section()
    out.values = {
        "turn_vs_litellm_ratio": rnd(median(ratios), 3),
        "litellm_call_cpu_ms": rnd(med(floor, 1) * 1000 / n_calls, 2),
    }
    out.extra = {
        "turn_vs_litellm_ratio_spread": spread(ratios, 3),
        "turn_vs_litellm_ratio_of_medians": rnd(turn_ms / floor_ms, 3),
        "litellm_floor_ms_3_calls": rnd(floor_ms, 2),
        "litellm_floor_ms_3_calls_min_max": spread(per_round(floor)),
        "litellm_turn_ms_0ext": rnd(turn_ms, 2),
        "litellm_turn_ms_0ext_min_max": spread(per_round(turn)),
        "litellm_call_cpu_ms_defaults": rnd(med(defaults, 1) * 1000 / n_calls, 2),
        "litellm_defaults_ms_3_calls": rnd(med(defaults, 0) * 1000, 1),
        "litellm_turn_ms_bookkeeping_on": rnd(med(turn_bk, 0) * 1000, 1),
        "turn_vs_litellm_defaults_ratio": rnd(turn_ms / (med(defaults, 0) * 1000), 3),
        "turn_bookkeeping_vs_litellm_defaults_ratio": rnd(med(turn_bk, 0) / med(defaults, 0), 3),
        "litellm_turn_cpu_ms_0ext": rnd(med(turn, 1) * 1000, 2),
        "litellm_floor_cpu_ms_3_calls": rnd(med(floor, 1) * 1000, 2),
    }
    # where the turn's time over its floor goes: inside litellm (slower inside the turn than bare?) or outside it
    inside_turn, inside_bare, walls = await litellm_split(calls, cfg.n(10, 1), cfg.n(6, 2))
    out.extra["litellm_ms_inside_turn"] = rnd(median(inside_turn), 2)
    out.extra["litellm_ms_inside_bare_calls"] = rnd(median(inside_bare), 2)
    out.extra["turn_ms_outside_litellm"] = rnd(median([w - i for w, i in zip(walls, inside_turn)]), 2)
    host = await host_only_turns(calls, max(2, cfg.ab_rounds), cfg.n(40, 5))
    out.extra["litellm_turn_host_cpu_ms"] = rnd(median(host), 3)
    out.extra["litellm_turn_host_cpu_ms_min_max"] = [rnd(min(host), 3), rnd(max(host), 3)]
    return out
