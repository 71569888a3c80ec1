"""Host cost per turn against history length: one session pre-filled with 10 or 500 messages, then plain turns
(no extensions, the offline scripted model), alternated ABAB; and the event loop's lag under the concurrent
benchmark's load (50 sessions, 3 extensions on every hook) with the cyclic GC on, as in production.

`host_ms_per_turn_10_msgs` / `_500_msgs`: median wall ms of one chat() on each session. What the model itself does
with the history (litellm's request building, the scripted model reading the prompt) is part of both; the goal is
that the host's own work (store, normalizing, persisting, copies) adds nothing that grows with the history. So the
floor is measured beside it, alternated in the same rounds: the turn's own model call (its keyword arguments
recorded from a real turn on each session) made as a bare `litellm.acompletion` stream (extra
`litellm_floor_ms_10_msgs` / `_500_msgs`); extra `host_own_ms_10_msgs` / `_500_msgs` = turn − floor.
Turn minus floor is the difference of two figures of ~10-20 ms each, on a shared 2-core machine: its noise is
larger than what it looks for. So the host's own work is also measured alone (extra `host_replay_ms_10_msgs` /
`_500_msgs`): the same turns, alternated ABAB, with `litellm.acompletion` answering by replaying the recorded chunks
of the same call (the model's and litellm's per-call work taken out; what remains is the host's, plus a constant
replay).
`loop_lag_p99_ms` / `loop_lag_max_ms`: how late a 5 ms timer fired on the host's loop while the turns ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from pathlib import Path
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ._agents import THREE_STEP_TURN, BenchAgent, all_hook_manager
from ._common import Config, Section, abab, gc_paused, median, pct, rnd, timer_lateness
from .litellm_floor import bare_calls, record_calls

NAME = "history"
SESSIONS = 50
TICK_S = 0.005


def _filler(n: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        out.append({"id": f"h{i}", "role": role, "content": f"message {i} " + "lorem ipsum " * 20,
                    "parts": [{"type": "text", "text": f"message {i} " + "lorem ipsum " * 20}]})
    return out


class _Replay:
    """A model stream that replays recorded chunks (the loop only reads them)."""

    def __init__(self, chunks: list[Any]) -> None:
        self._chunks = chunks

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._replay()

    async def _replay(self) -> AsyncIterator[Any]:
        for chunk in self._chunks:
            yield chunk


@contextlib.contextmanager
def _replayed_model(chunks: list[Any]) -> Iterator[None]:
    """`litellm.acompletion` answering every call with `chunks`, for the block."""
    import litellm

    real = litellm.acompletion

    async def replay(**_: Any) -> _Replay:
        return _Replay(chunks)

    litellm.acompletion = replay  # type: ignore[assignment]
    try:
        yield
    finally:
        litellm.acompletion = real  # type: ignore[assignment]


async def _recorded_chunks(agent: BenchAgent) -> list[Any]:
    """The chunks of the model call of one "hello" turn on `agent` (the scripted model answers it alike at any
    history length)."""
    import litellm

    real, chunks = litellm.acompletion, []

    async def recording(**kwargs: Any) -> _Replay:
        chunks.extend([chunk async for chunk in await real(**kwargs)])
        return _Replay(list(chunks))

    litellm.acompletion = recording  # type: ignore[assignment]
    try:
        await agent.chat("hello")
    finally:
        litellm.acompletion = real  # type: ignore[assignment]
    return chunks


async def _per_turn_ms(cfg: Config, store: Path) -> tuple[float, float, float, float, float, float]:
    """Median ms of a turn at 10 and at 500 messages of history, of its bare model call at each (the floor), and of
    the turn with its model call replayed (the host's own work) at each."""
    per_round = cfg.n(10, 3)
    short = BenchAgent(session_id="hist-10", store=store)
    long = BenchAgent(session_id="hist-500", store=store)
    await short.start()
    await long.start()
    try:
        await short.store.replace_all(_filler(10))
        await long.store.replace_all(_filler(500))

        async def turns(agent: BenchAgent) -> list[float]:
            out = []
            with gc_paused():
                for _ in range(per_round):
                    t0 = time.perf_counter()
                    result = await agent.chat("hello")
                    out.append(time.perf_counter() - t0)
                    if result.status != "completed":
                        raise RuntimeError(f"history turn ended {result.status}: {result.error}")
            # keep the history length: drop this round's turns again
            await agent.store.replace_all(_filler(10 if agent is short else 500))
            return out

        async def recorded(agent: BenchAgent) -> list[dict[str, Any]]:
            return (await record_calls(lambda: agent.chat("hello")))[0]

        async def floor(calls: list[dict[str, Any]]) -> list[float]:
            with gc_paused():
                return [(await bare_calls(calls, True))[0] for _ in range(per_round)]

        await turns(short)
        await turns(long)
        short_calls, long_calls = await recorded(short), await recorded(long)
        await short.store.replace_all(_filler(10))
        await long.store.replace_all(_filler(500))
        ra, rb = await abab(cfg.ab_rounds, lambda: turns(short), lambda: turns(long))
        fa, fb = await abab(cfg.ab_rounds, lambda: floor(short_calls), lambda: floor(long_calls))
        chunks = await _recorded_chunks(short)
        await short.store.replace_all(_filler(10))
        with _replayed_model(chunks):
            await turns(short)
            await turns(long)
            ha, hb = await abab(cfg.ab_rounds, lambda: turns(short), lambda: turns(long))
    finally:
        await short.close()
        await long.close()

    def ms(rounds: list[list[float]]) -> float:
        return median([x for r in rounds for x in r]) * 1000

    return ms(ra), ms(rb), ms(fa), ms(fb), ms(ha), ms(hb)


async def _loop_lag(cfg: Config) -> tuple[float, float, int]:
    """(p99 ms, max ms, samples) of timer lateness while SESSIONS agents (10 with --quick) run turns, GC on."""
    waves = cfg.n(4, 1)
    sessions = cfg.n(SESSIONS, 10)
    mgr = await all_hook_manager(cfg, 3, "lag")
    try:
        agents = [BenchAgent(manager=mgr, session_id=f"lag-{i}") for i in range(sessions)]
        for agent in agents:
            await agent.start()
        try:
            await asyncio.gather(*(a.chat(THREE_STEP_TURN) for a in agents[:5]))  # warm-up
            async with timer_lateness(TICK_S) as lags:
                for _ in range(waves):
                    results = await asyncio.gather(*(a.chat(THREE_STEP_TURN) for a in agents))
                    if any(r.status != "completed" for r in results):
                        raise RuntimeError("a concurrent turn did not complete")
        finally:
            for agent in agents:
                await agent.close()
    finally:
        await mgr.close()
    return pct(lags, 0.99) * 1000, max(lags) * 1000, len(lags)


async def run(cfg: Config) -> Section:
    out = Section()
    with tempfile.TemporaryDirectory(prefix="hwb-hist-") as tmp:
        short_ms, long_ms, floor_short, floor_long, own_short, own_long = await _per_turn_ms(
            cfg, Path(tmp) / "store.db")
    p99, worst, samples = await _loop_lag(cfg)
    out.values = {
        "host_ms_per_turn_10_msgs": rnd(short_ms, 2),
        "host_ms_per_turn_500_msgs": rnd(long_ms, 2),
        "loop_lag_p99_ms": rnd(p99, 1),
        "loop_lag_max_ms": rnd(worst, 1),
    }
    out.extra = {
        "history_cost_ratio_500_vs_10": rnd(long_ms / short_ms, 2),
        "litellm_floor_ms_10_msgs": rnd(floor_short, 2),
        "litellm_floor_ms_500_msgs": rnd(floor_long, 2),
        "host_own_ms_10_msgs": rnd(short_ms - floor_short, 2),
        "host_own_ms_500_msgs": rnd(long_ms - floor_long, 2),
        "host_replay_ms_10_msgs": rnd(own_short, 2),
        "host_replay_ms_500_msgs": rnd(own_long, 2),
        "loop_lag_samples": samples,
    }
    return out
