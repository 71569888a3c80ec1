"""Steady under faults (issue 19): exact failed_open attribution, restart text that agrees with the state, and
tool outputs decoded as untrusted (nothing a strict JSON reader refuses reaches the store)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_helpers import ext_pid, host, mode, tool_output, wait_until

Record = Callable[[str, str, str], None]
ACT = "/tool misbehave_act {}"


def strict_loads(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


async def test_a_crash_while_a_turn_runs_is_not_blamed_on_that_turn(tmp_path: Path, record: Record) -> None:
    # the extension serves a tool and no hook: a turn that never calls it cannot have failed because of it
    async with host(tmp_path, mode(tmp_path, "ok", restart={"backoffMs": 50})) as agent:
        pid = ext_pid(agent)
        turn = asyncio.ensure_future(agent.chat("/stall 1200\nhello"))
        await asyncio.sleep(0.4)
        os.kill(pid, signal.SIGKILL)  # crashes while the turn is in flight
        result = await turn
        assert await wait_until(lambda: agent.manager.extensions()[0].restarts == 1, 15)
    assert result.status == "completed"
    assert result.failed_open == []
    assert result.failed_open_reasons == {}
    record("crash during an unrelated turn", "not listed in that turn's failed_open",
           f"failed_open={result.failed_open}")


async def test_a_turn_without_the_beforeturn_of_a_restarting_extension_lists_it_as_restarting(
    tmp_path: Path, record: Record
) -> None:
    path = mode(tmp_path, "turn_hook", hooks={"beforeTurn": {}}, restart={"backoffMs": 4000})
    async with host(tmp_path, path) as agent:
        before = await agent.chat("hello")
        os.kill(ext_pid(agent), signal.SIGKILL)
        assert await wait_until(lambda: agent.manager.extensions()[0].state == "restarting", 10)
        during = await agent.chat(ACT)
    assert before.failed_open == []
    assert during.status == "completed"
    assert during.failed_open == ["misbehave"]
    assert during.failed_open_reasons == {"misbehave": ["restarting"]}
    assert [(e.hook, e.outcome, e.reason) for e in during.trace if e.extension == "misbehave"] == [
        ("beforeTurn", "skipped", "restarting"), ("tool:act", "error", "restarting")]
    record("turn during a restart", "listed, reason restarting (beforeTurn skipped, tool not called)",
           f"failed_open_reasons={during.failed_open_reasons}")


async def test_a_tool_call_during_a_restart_says_restarting_not_running(tmp_path: Path, record: Record) -> None:
    async with host(tmp_path, mode(tmp_path, "ok", restart={"backoffMs": 4000})) as agent:
        os.kill(ext_pid(agent), signal.SIGKILL)
        assert await wait_until(lambda: agent.manager.extensions()[0].state == "restarting", 10)
        result = await agent.chat(ACT)
    text = tool_output(result, "misbehave_act")
    assert "extension 'misbehave' is restarting" in text
    record("tool call during a restart", "the error says restarting", text)


async def test_tool_output_nan_infinity_and_lone_surrogates_are_converted_and_logged(
    tmp_path: Path, record: Record, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="hookwire.extensions"):
        async with host(tmp_path, mode(tmp_path, "untrusted_out")) as agent:
            result = await agent.chat(ACT)
    assert result.status == "completed"
    assert tool_output(result, "misbehave_act") == {"nan": None, "inf": None, "lone": "a\ufffdb",
                                                    "emoji": "\U0001F600", "n": 1.5}
    assert any("'misbehave' tool 'act'" in r.getMessage() and "2 non-finite number(s)" in r.getMessage()
               and "1 string(s) with lone surrogates" in r.getMessage() for r in caplog.records)
    with sqlite3.connect(tmp_path / "store.db") as db:
        rows = [row[0] for row in db.execute("SELECT data FROM messages")]
    assert rows and all(strict_loads(row) for row in rows)
    record("tool output NaN/Infinity/lone surrogate", "null and U+FFFD, logged; store strict JSON",
           "2 non-finite -> null, 1 surrogate -> U+FFFD")


async def test_an_observation_error_is_listed_in_the_turn_it_observed(tmp_path: Path, record: Record) -> None:
    async with host(tmp_path, mode(tmp_path, "obs_raise")) as agent:
        first = await agent.chat("hello")
        second = await agent.chat("again")
    for result in (first, second):
        assert result.failed_open == ["misbehave"]
        assert result.failed_open_reasons == {"misbehave": ["error"]}
        errors = [e for e in result.trace if e.extension == "misbehave" and e.outcome == "error"]
        assert errors and all(e.request_id == result.request_id and "observer broke" in e.detail for e in errors)
    record("observation error", "listed in the turn it observed, reason error",
           f"{first.failed_open_reasons}, {second.failed_open_reasons}")
