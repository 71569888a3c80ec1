"""A hook call's journal entries are written when the call is over (every subscriber answered), not after the
writer's quiet wait: the write overlaps the turn's next work instead of delaying the store round trips at its end."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from journal_helpers import Scripted, guard_manifest

from extension_sdk.proto import extension_pb2 as pb
from host import MessageStore, tool
from host.extensions._journal_tap import HookRecord
from host.extensions._snapshots import CallContext
from host.turn import _journal_writer
from host.turn._journal_writer import SessionJournal


class Reply:
    frame = pb.ExtensionFrame(before_tool_call=pb.BeforeToolCallResponse(
        decision=pb.ToolCallDecision(action=pb.ToolCallDecision.BLOCK, reason="no")))
    ms = 0.7


def record(i: int) -> HookRecord:
    snap = pb.ToolCallSnapshot(tool_name="lookup", tool_call_id="call_1", input_json='{"key": "alpha"}')
    return HookRecord(f"guard{i}", "1.0.0", "beforeToolCall", "enforce", "validate",
                      CallContext(session_id="s1", request_id="req_1"), snap, Reply())


async def stored(store: MessageStore, want: int, within_s: float) -> int:
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        rows = len(await store.journal("s1"))
        if rows >= want or asyncio.get_running_loop().time() > deadline:
            return rows
        await asyncio.sleep(0.01)


@pytest.fixture
def slow_gathering(monkeypatch: pytest.MonkeyPatch) -> None:
    # a quiet wait far longer than the test: entries written within it were written because the burst was over
    monkeypatch.setattr(_journal_writer, "QUIET_S", 60.0)
    monkeypatch.setattr(_journal_writer, "GATHER_S", 60.0)


async def test_entries_of_a_finished_hook_call_are_written_at_once(tmp_path: Path, slow_gathering: None) -> None:
    async with MessageStore(tmp_path / "s.db") as store:
        journal = SessionJournal(store, "s1")
        for i in range(5):
            journal.record(record(i))
        journal.burst_over()
        assert await stored(store, 5, within_s=5.0) == 5


async def test_entries_still_gathering_are_not_written_before_their_call_is_over(
        tmp_path: Path, slow_gathering: None) -> None:
    async with MessageStore(tmp_path / "s.db") as store:
        journal = SessionJournal(store, "s1")
        journal.record(record(0))
        assert await stored(store, 1, within_s=0.3) == 0  # one decider answered; the others may still come
        journal.record(record(1))
        journal.burst_over()
        assert await stored(store, 2, within_s=5.0) == 2
        journal.record(record(2))  # the next call's first answer gathers anew
        assert await stored(store, 3, within_s=0.3) == 2
        await journal.flush()
        assert await stored(store, 3, within_s=0.0) == 3


async def test_a_turn_stores_a_tool_calls_verdicts_before_the_tool_runs(tmp_path: Path, slow_gathering: None) -> None:
    # The turn says when a tool call's deciders have all answered; with a 60 s quiet wait, the verdict is in the
    # store while the tool runs only because of that (otherwise it would wait for the turn's end).
    seen: list[list[str]] = []

    class Probing(Scripted):
        def get_tools(self) -> dict[str, Any]:
            agent = self

            @tool(description="Reads the journal", parameters={"type": "object", "properties": {}})
            async def probe() -> str:
                for _ in range(500):
                    rows = [row.parsed() for row in await agent.store.raw.journal("s1")]
                    if rows:
                        break
                    await asyncio.sleep(0.01)
                seen.append([f"{e.hook} {e.extension} {e.outcome}" for e in rows])
                return "ok"

            return {"probe": probe}

    db = tmp_path / "s.db"
    async with Probing(session_id="s1", store=db, extensions=[guard_manifest(tmp_path)], sandbox="off") as agent:
        result = await agent.chat("/tool probe {}")
    assert result.status == "completed"
    assert seen == [["beforeToolCall guard allow"]]
