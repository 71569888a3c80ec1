"""The decision journal through real turns: a real guard extension process, the scripted model through litellm,
SQLite and a real PostgreSQL server; the CLI's journal show/verify on a tampered store; a resumed durable
submission that reuses the journaled verdicts instead of asking the guard again."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path

import pytest
from journal_helpers import Scripted, asked, guard_manifest

from host import open_store
from host.cli import main
from host.turn._journal import GENESIS, sha256_text

BLOCKED_CALL = '/tool guard_ping {"msg": "hi"}'


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "sessions.db")
    return str(request.getfixturevalue("postgres").new_url())


async def test_each_awaited_hook_outcome_is_journaled_hash_chained_with_its_snapshot(tmp_path: Path,
                                                                                     location: str) -> None:
    manifest = guard_manifest(tmp_path, "--block", "guard_ping", "--max-steps", "3")
    async with Scripted(session_id="s1", store=location, extensions=[manifest], sandbox="off") as agent:
        result = await agent.chat(BLOCKED_CALL)
    store = open_store(location)
    try:
        rows = await store.journal("s1")
    finally:
        await store.close()
    assert result.message["content"] == "Tool results: guard_ping -> guard_ping is off limits."
    turn, call = (row.parsed() for row in rows)
    assert [(e.seq, e.hook, e.extension, e.extension_version, e.mode) for e in (turn, call)] == [
        (1, "beforeTurn", "guard", "1.0.0", "enforce"), (2, "beforeToolCall", "guard", "1.0.0", "enforce")]
    assert (turn.outcome, turn.decision) == ("ok", {"set": {"maxSteps": 3}})
    assert (call.outcome, call.decision, call.reason) == ("block", {"action": "block"}, "guard_ping is off limits")
    assert (call.call_id, call.phase, call.request_id, call.session_id) == ("call_1", "validate", result.request_id,
                                                                          "s1")
    snapshot = json.loads(rows[1].snapshot or "")
    assert (snapshot["toolName"], json.loads(snapshot["inputJson"])) == ("guard_ping", {"msg": "hi"})
    assert call.snapshot_sha256 == sha256_text(rows[1].snapshot or "")
    assert [r.hash for r in rows] == [sha256_text(r.entry) for r in rows]
    assert (turn.prev_hash, call.prev_hash) == (GENESIS, rows[0].hash)


async def test_verify_names_the_first_tampered_entry_and_exits_1(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "sessions.db"
    manifest = guard_manifest(tmp_path, "--block", "guard_ping", "--max-steps", "3")
    async with Scripted(session_id="s1", store=db, extensions=[manifest], sandbox="off") as agent:
        await agent.chat(BLOCKED_CALL)
        await agent.chat(BLOCKED_CALL)
    assert await asyncio.to_thread(main, ["journal", "verify", "--store", str(db)]) == 0
    with sqlite3.connect(db) as conn:  # entry 2 (the first block) now says it allowed the call
        conn.execute("""UPDATE journal SET entry = replace(entry, '"outcome":"block"', '"outcome":"allow"') """
                     "WHERE session_id = 's1' AND seq = 2")
    capsys.readouterr()
    code = await asyncio.to_thread(main, ["journal", "verify", "--store", str(db)])
    out = capsys.readouterr().out
    assert code == 1
    assert out.strip() == "session s1: entry 2 is broken: its content does not match its hash (the entry was changed)"


async def test_journal_show_prints_each_entry_of_the_session(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "sessions.db"
    manifest = guard_manifest(tmp_path, "--block", "guard_ping")
    async with Scripted(session_id="s1", store=db, extensions=[manifest], sandbox="off") as agent:
        result = await agent.chat(BLOCKED_CALL)
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["journal", "show", "--session", "s1", "--store", str(db), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(e["seq"], e["hook"], e["call_id"], e["outcome"], e["reason"], e["request_id"]) for e in shown] == [
        (1, "beforeToolCall", "call_1", "block", "guard_ping is off limits", result.request_id)]
    assert await asyncio.to_thread(main, ["journal", "show", "--session", "s1", "--store", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"turn {result.request_id}"
    assert re.fullmatch(r'  #1    beforeToolCall call_1  guard@1\.0\.0  block  "guard_ping is off limits"  '
                        r"\d+\.\d ms  snapshot [0-9a-f]{12}", lines[1]), lines[1]


async def test_a_resumed_submission_reuses_the_journaled_verdicts_without_asking_the_guard(tmp_path: Path) -> None:
    db, asked_file, hung = tmp_path / "sessions.db", tmp_path / "asked.txt", tmp_path / "hung"
    manifest = guard_manifest(tmp_path, "--block", "guard_ping", "--asked", str(asked_file), "--hang-once", str(hung))
    script = '/tool guard_ping {"msg": "x"}\n/tool guard_hang {}'
    host = Scripted(session_id="s1", store=db, extensions=[manifest], sandbox="off")
    await host.start()
    await host.submit_messages(script, submission_id="sub-1")
    for _ in range(600):  # until both verdicts are journaled and the allowed tool hangs
        if hung.exists() and len(await host.store.raw.journal("s1")) == 2:
            break
        await asyncio.sleep(0.05)
    # The crash, as the store sees it: nothing more reaches it (no partial answer, the submission still "running"),
    # as when the host process is killed (a child host process would cost ~10 s of imports on this machine).
    await host.store.raw.close()
    await host.close()
    first = {e.call_id: e for e in (row.parsed() for row in await open_journal(db))}
    assert sorted(asked(asked_file)) == ["guard_hang", "guard_ping"]

    async with Scripted(session_id="s1", store=db, extensions=[manifest], sandbox="off") as revived:
        result = await revived.wait_for_submission("sub-1")
    assert result.status == "completed"
    assert result.message["content"] == "Tool results: guard_ping -> guard_ping is off limits; guard_hang -> done."
    assert sorted(asked(asked_file)) == ["guard_hang", "guard_ping"]  # the new guard process was never asked
    reused = [e.detail for e in result.trace if e.extension == "guard" and e.detail.startswith("reused")]
    assert sorted(reused) == [f"reused: the verdict journaled in entry {first[c].seq} (not asked again)"
                              for c in sorted(first, key=lambda c: first[c].seq)]
    again = [row.parsed() for row in await open_journal(db)][2:]
    assert sorted((e.call_id, e.outcome, e.reused_from, e.submission_id) for e in again) == [
        ("call_1", "block", first["call_1"].seq, "sub-1"), ("call_2", "allow", first["call_2"].seq, "sub-1")]


async def open_journal(db: Path) -> list:  # type: ignore[type-arg]
    store = open_store(str(db))
    try:
        return await store.journal("s1")
    finally:
        await store.close()


async def test_a_shadow_guards_block_is_journaled_as_shadow_while_the_tool_runs(tmp_path: Path) -> None:
    location = str(tmp_path / "sessions.db")
    manifest = guard_manifest(tmp_path, "--block", "guard_ping", mode="shadow")
    async with Scripted(session_id="s1", store=location, extensions=[manifest], sandbox="off") as agent:
        result = await agent.chat(BLOCKED_CALL)
    store = open_store(location)
    try:
        rows = await store.journal("s1")
    finally:
        await store.close()
    call = [row.parsed() for row in rows if row.parsed().hook == "beforeToolCall"]
    assert result.message["content"] == "Tool results: guard_ping -> pong: hi."
    assert [(e.mode, e.phase, e.outcome, e.reason) for e in call] == [
        ("shadow", "validate", "block", "guard_ping is off limits")]
