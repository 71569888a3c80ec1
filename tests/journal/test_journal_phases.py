"""The journal writes once per hook phase (host/turn/_journal_writer.py): a phase's entries in one transaction at
its end, a record with no phase end at most FALLBACK_S later, everything by the turn's flush. A real SQLite store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from extension_sdk.proto import extension_pb2 as pb
from host import open_store
from host.extensions._dispatch import Reply
from host.extensions._journal_tap import HookRecord
from host.extensions._snapshots import CallContext
from host.turn._journal_writer import FALLBACK_S, SessionJournal

ALLOW = pb.ExtensionFrame(before_tool_call=pb.BeforeToolCallResponse())


def record(ext: str, call: str) -> HookRecord:
    snapshot = pb.ToolCallSnapshot(tool_name="lookup", tool_call_id=call, input_json='{"key": "a"}', step_number=1)
    return HookRecord(ext, "1.0.0", "beforeToolCall", "enforce", "validate",
                      CallContext(session_id="s1", request_id="req_1"), snapshot, Reply(ALLOW, 0.5))


class Counting:
    """The real store, its journal appends counted (one append: one transaction)."""

    def __init__(self, store: Any) -> None:
        self.store, self.appends = store, 0

    async def append_journal(self, session_id: str, drafts: Any) -> Any:
        self.appends += 1
        return await self.store.append_journal(session_id, drafts)


async def test_a_phases_entries_are_written_at_its_end_in_one_transaction(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.db"))
    try:
        counting = Counting(store)
        journal = SessionJournal(counting, "s1")
        for ext in ("a", "b", "c"):  # a call's deciders
            journal.record(record(ext, "call_1"))
        await asyncio.sleep(0.05)
        assert len(await store.journal("s1")) == 0  # no phase end yet: still gathering
        journal.phase_end()
        for _ in range(100):
            await asyncio.sleep(0.005)
            if len(await store.journal("s1")) == 3:
                break
        assert len(await store.journal("s1")) == 3 and counting.appends == 1
        journal.record(record("a", "call_2"))  # a record with no phase end: written by the fallback
        await asyncio.sleep(FALLBACK_S + 0.2)
        assert len(await store.journal("s1")) == 4 and counting.appends == 2
        journal.record(record("a", "call_3"))
        await journal.flush()  # the turn's end: at once
        assert len(await store.journal("s1")) == 5 and counting.appends == 3
    finally:
        await store.close()
