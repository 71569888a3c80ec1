"""Guards through real turns and real extension processes: two-phase beforeToolCall (a mutator and a validator
in two extensions), shadow mode (a block and beforeTurn fields recorded, nothing applied) and a hook handler
cancelled at its deadline (issue 17 items 1, 2, 5). The rules themselves: tests/extensions/test_phases.py."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_helpers import Recorder, requests

FIXTURE = Path(__file__).parent / "fixtures" / "guard_ext.py"


def manifest(tmp_path: Path, name: str, *args: str, **fields: Any) -> Path:
    data: dict[str, Any] = {
        "name": name,
        "version": "1.0.0",
        "command": ["python", str(FIXTURE), "--name", name, *args],
        "timeouts": {"startMs": 15000, "shutdownMs": 1000},
        **fields,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_a_validator_judges_the_input_a_mutator_in_another_extension_changed(tmp_path: Path) -> None:
    seen = tmp_path / "seen.jsonl"
    # the validator is loaded first: phases, not load order, decide that it judges after the mutator
    checker = manifest(tmp_path, "checker", "--record", str(seen), "--block-word", "rm -rf",
                       hooks={"beforeToolCall": {"decisions": True, "phase": "validate"}})
    rewriter = manifest(tmp_path, "rewriter", "--mutate", " (checked)",
                        hooks={"beforeToolCall": {"decisions": True, "phase": "mutate"}})
    async with Recorder(extensions=[checker, rewriter], sandbox="off") as agent:
        result = await agent.chat('/tool echo {"msg": "hi"}')
    assert lines(seen) == [{"msg": "hi (checked)"}]
    assert agent.executions == [("echo", "hi (checked)")]
    call_id = next(p["toolCallId"] for p in result.message["parts"] if p.get("toolCallId"))
    assert result.provenance[f"toolInput.{call_id}"] == "rewriter"
    assert [(e.extension, e.phase, e.outcome) for e in result.trace if e.hook == "beforeToolCall"] == [
        ("rewriter", "mutate", "ok"), ("checker", "validate", "ok")]


async def test_a_shadow_guards_block_is_recorded_and_the_tool_runs(tmp_path: Path) -> None:
    guard = manifest(tmp_path, "shadow-guard", "--block-word", "hi", mode="shadow",
                     hooks={"beforeToolCall": {"decisions": True, "failure": "closed"}})
    async with Recorder(extensions=[guard], sandbox="off") as agent:
        result = await agent.chat('/tool echo {"msg": "hi"}')
    assert agent.executions == [("echo", "hi")]
    assert result.message["content"] == "Tool results: echo -> pong: hi."
    assert [(e.outcome, e.mode, e.detail) for e in result.trace if e.hook == "beforeToolCall"] == [
        ("denied", "shadow", "shadow: would block: shadow-guard: 'hi' is not allowed")]


async def test_shadow_before_turn_fields_are_recorded_and_not_applied(tmp_path: Path) -> None:
    trial = manifest(tmp_path, "trial", "--set-system", "TRIAL PROMPT", hooks={"beforeTurn": {"mode": "shadow"}})
    async with Recorder(extensions=[trial], sandbox="off") as agent:
        result = await agent.chat("hello")
    assert result.status == "completed"
    sent = requests()[0]["messages"]
    assert all("TRIAL PROMPT" not in json.dumps(m) for m in sent)
    assert result.provenance == {}
    assert [(e.extension, e.mode, e.detail) for e in result.trace if e.hook == "beforeTurn"] == [
        ("trial", "shadow", "shadow: would set system")]


async def test_a_hook_handler_is_cancelled_at_its_deadline(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    seen, marker = tmp_path / "seen.jsonl", tmp_path / "ran-past-deadline"
    slow = manifest(tmp_path, "slow-guard", "--slow", "0.8", "--record", str(seen), "--marker", str(marker),
                    hooks={"beforeToolCall": {"decisions": True, "timeoutMs": 300}})
    caplog.set_level(logging.INFO)
    async with Recorder(extensions=[slow], sandbox="off") as agent:
        result = await agent.chat('/tool echo {"msg": "hi"}')
        gave_up = time.monotonic()
        assert agent.executions == [("echo", "hi")]  # failed open at the deadline
        assert [(e.outcome, e.reason) for e in result.trace if e.hook == "beforeToolCall"] == [
            ("failed_open", "timeout")]
        [call] = lines(seen)
        assert 0 < call["deadline"] - call["now"] <= 0.3  # current_call().deadline: the hook's timeoutMs away
        await asyncio.sleep(max(0.0, gave_up + 1.0 - time.monotonic()))  # past the end of the handler's sleep
        assert not marker.exists()  # the task really stopped: the side effect after its await never happened
    assert any(r.name == "hookwire.ext.slow-guard"
               and "beforeToolCall handler cancelled: the host gave up on it" in r.getMessage()
               for r in caplog.records)
