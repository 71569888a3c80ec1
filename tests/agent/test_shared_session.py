"""Two Agents on one session of one store file (two host processes' view): each turn's history holds what the other
wrote, though each agent keeps its transcript decoded between turns (host/turn/_transcript_cache.py)."""

from __future__ import annotations

from pathlib import Path

from agent_helpers import Recorder, requests


async def test_a_turn_sees_the_turns_another_agent_ran_on_the_same_session(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    async with Recorder(session_id="s", store=db) as first, Recorder(session_id="s", store=db) as second:
        await first.chat("one")
        await second.chat("two")
        await first.chat("three")
    history = [(m["role"], m["content"]) for m in requests()[-1]["messages"] if m["role"] != "system"]
    assert history == [("user", "one"), ("assistant", "echo: one"), ("user", "two"), ("assistant", "echo: two"),
                       ("user", "three")]
