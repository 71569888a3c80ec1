"""The decision journal's cost: host CPU per entry, and a 3-step turn with 5 beforeToolCall deciders (15 entries
a turn: 5 beforeTurn, 2 x 5 decisions) with the journal on vs off (`Agent.journal`), alternated (ABAB), on a SQLite
file store.

`journal_us_per_entry`: host CPU to turn one hook record into a stored entry (snapshot JSON, sha256, the answer
normalized, the canonical entry and its hash, the batched INSERT on the store's thread), over 2,000 entries.
`journal_turn_ratio_5ext_deciders`: wall median of the turn with the journal over without.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from extension_sdk.proto import extension_pb2 as pb
from host import MessageStore
from host.extensions._journal_tap import HookRecord
from host.extensions._snapshots import CallContext
from host.turn._journal_writer import SessionJournal

from ._agents import THREE_STEP_TURN, BenchAgent, all_hook_manager
from ._common import Config, Section, abab, gc_paused, median, rnd

NAME = "journal"


class _Answer:
    frame = pb.ExtensionFrame(before_tool_call=pb.BeforeToolCallResponse(
        decision=pb.ToolCallDecision(action=pb.ToolCallDecision.BLOCK, reason="not on a Friday")))
    ms = 0.7


async def _us_per_entry(n: int, store_path: Path) -> float:
    store = MessageStore(store_path)
    journal = SessionJournal(store, "bench")
    snap = pb.ToolCallSnapshot(tool_name="lookup", tool_call_id="call_1", input_json='{"key": "alpha"}',
                               step_number=1)
    records = [HookRecord("guard", "1.0.0", "beforeToolCall", "enforce", "validate",
                          CallContext(session_id="bench", request_id=f"req_{i // 15}"), snap, _Answer())
               for i in range(n)]
    try:
        with gc_paused():
            t0 = time.process_time()
            for i in range(0, n, 15):  # a turn's worth at a time, flushed like a turn's end
                for record in records[i:i + 15]:
                    journal.record(record)
                await journal.flush()
            return (time.process_time() - t0) / n * 1e6
    finally:
        await store.close()


class _Off(BenchAgent):
    journal = False


async def _turn(cls: type[BenchAgent], mgr: object, store: Path, i: int) -> float:
    async with cls(manager=mgr, store=store, session_id=f"bench-{cls.__name__}-{i}") as agent:  # type: ignore[arg-type]
        t0 = time.perf_counter()
        result = await agent.chat(THREE_STEP_TURN)
        wall = time.perf_counter() - t0
    if result.status != "completed":
        raise RuntimeError(f"benchmark turn ended {result.status}: {result.error}")
    return wall


async def run(cfg: Config) -> Section:
    out = Section()
    with tempfile.TemporaryDirectory(prefix="hookwire-bench-journal-") as tmp:
        store = Path(tmp) / "sessions.db"
        us = await _us_per_entry(cfg.n(2000, 300), Path(tmp) / "entries.db")
        mgr = await all_hook_manager(cfg, 5, "jrn", decisions=True)
        per_round = cfg.n(5, 2)
        counter = iter(range(1_000_000))
        try:
            await _turn(_Off, mgr, store, next(counter))
            await _turn(BenchAgent, mgr, store, next(counter))

            async def a() -> list[float]:
                with gc_paused():
                    return [await _turn(_Off, mgr, store, next(counter)) for _ in range(per_round)]

            async def b() -> list[float]:
                with gc_paused():
                    return [await _turn(BenchAgent, mgr, store, next(counter)) for _ in range(per_round)]

            ra, rb = await abab(cfg.ab_rounds, a, b)
        finally:
            await mgr.close()
    base, subj = median([x for r in ra for x in r]), median([x for r in rb for x in r])
    out.values = {
        "journal_us_per_entry": rnd(us, 1),
        "journal_turn_ratio_5ext_deciders": rnd(subj / base, 3),
    }
    out.extra = {"turn_ms_journal_off": rnd(base * 1000, 2), "turn_ms_journal_on": rnd(subj * 1000, 2)}
    return out
