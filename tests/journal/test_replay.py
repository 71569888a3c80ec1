"""Replay through real processes: a session journaled with one guard, replayed (`hookwire replay`) against the
same guard and against a changed one; no model is called."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from journal_helpers import Scripted, guard_manifest

from host.cli import main
from host.turn import _scripted_model


@pytest.fixture
async def journaled(tmp_path: Path) -> tuple[Path, str]:
    """A session whose guard (1.0.0) set maxSteps 3 and blocked guard_ping: (store, the turn's request id)."""
    db = tmp_path / "sessions.db"
    manifest = guard_manifest(tmp_path, "--block", "guard_ping", "--max-steps", "3")
    async with Scripted(session_id="s1", store=db, extensions=[manifest], sandbox="off") as agent:
        result = await agent.chat('/tool guard_ping {"msg": "hi"}')
    assert result.message["content"] == "Tool results: guard_ping -> guard_ping is off limits."
    _scripted_model.last_requests.clear()
    return db, result.request_id


async def replay(db: Path, manifest: Path, *extra: str) -> int:
    return await asyncio.to_thread(main, ["replay", "--session", "s1", "--against", str(manifest), "--store", str(db),
                                          "--sandbox", "off", *extra])


async def test_replay_against_a_changed_guard_reports_each_changed_answer_and_exits_1(
        journaled: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, request_id = journaled
    changed = guard_manifest(tmp_path, "--max-steps", "5", version="2.0.0")  # no longer blocks guard_ping
    capsys.readouterr()
    assert await replay(db, changed) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "replay of session s1: guard's journaled answers against guard@2.0.0"
    assert out[1:5] == [
        f"turn {request_id}: differs",
        "  #1    beforeTurn: would now set maxSteps=5 (was 3)  (was set maxSteps, now set maxSteps)",
        "  #2    beforeToolCall call_1: would now allow  (was block, now allow)",
        "2 answer(s) differ",
    ]
    assert list(_scripted_model.last_requests) == []  # no model call


async def test_replay_against_the_same_guard_exits_0(journaled: tuple[Path, str], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    db, request_id = journaled
    same = guard_manifest(tmp_path, "--block", "guard_ping", "--max-steps", "3", name="guard")
    capsys.readouterr()
    assert await replay(db, same, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["differs"] == 0
    assert [(t["request_id"], [(i["seq"], i["verdict"]) for i in t["items"]]) for t in report["turns"]] == [
        (request_id, [(1, "same"), (2, "same")])]


async def test_replay_of_an_extension_the_session_never_journaled_exits_2_naming_it(
        journaled: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, _ = journaled
    other = guard_manifest(tmp_path, "--block", "guard_ping", name="other")
    capsys.readouterr()
    assert await replay(db, other) == 2
    assert capsys.readouterr().err.strip() == (
        "hookwire: error: session 's1' has no journal entries of extension 'other' (it has entries of: guard); "
        "pass --as NAME to compare with another extension's")
