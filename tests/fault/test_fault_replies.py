"""Untrusted replies and bounded sizes, through real turns: invalid values, wrong-kind, duplicate, stray,
undecodable and oversize replies; truncated snapshots; a log flood. Each rejection is logged with the extension,
the hook and the field; the rest of the reply is applied; the turn goes on; the store stays intact."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_helpers import host, mode, persisted_and_next_turn_works, raw, scratch_dir, tool_output, wait_until

from host.turn import _scripted_model

Record = Callable[[str, str, str], None]
ECHO = '/tool echo {"msg": "a"}'
DECIDES = {"beforeToolCall": {"decisions": True, "timeoutMs": 3000}}


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "hookwire.extensions" and r.levelno >= logging.WARNING]


async def test_invalid_before_turn_fields_are_rejected_one_by_one_and_the_rest_applied(
    tmp_path: Path, record: Record, caplog: pytest.LogCaptureFixture
) -> None:
    _scripted_model.last_requests.clear()
    with caplog.at_level(logging.WARNING, logger="hookwire.extensions"):
        async with host(tmp_path, raw(tmp_path, "untrusted")) as agent:
            result = await agent.chat("hello")
    assert result.status == "completed" and result.message["content"] == "echo: hello"
    request = _scripted_model.last_requests[-1]
    assert request["top_p"] == 0.25  # the valid fields were applied
    assert result.provenance == {"maxSteps": "raw", "topP": "raw"}
    logged = warnings(caplog)
    for field in ("system", "temperature", "topK", "messages", "toolChoice", "model", "bogus", "seed", "#50"):
        assert any("'raw' beforeTurn" in line and f"field {field}:" in line for line in logged), field
    assert result.failed_open == ["raw"]
    await persisted_and_next_turn_works(tmp_path, result, "hello")
    record("untrusted beforeTurn values", "NaN/Inf, wrong types, unknown, deep, huge: rejected per field",
           "9 fields rejected and logged; maxSteps, topP applied")


@pytest.mark.parametrize(
    ("raw_mode", "logged", "scenario"),
    [
        ("wrong_kind", "reply of the wrong kind: beforeTurn frame answering a beforeToolCall call", "wrong-kind reply"),
        ("invalid_utf8", "a string field holds invalid UTF-8", "invalid UTF-8 reply"),
    ],
)
async def test_rejected_decision_reply_fails_open_and_the_extension_keeps_serving(
    tmp_path: Path, record: Record, caplog: pytest.LogCaptureFixture, raw_mode: str, logged: str, scenario: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="hookwire.extensions"):
        async with host(tmp_path, raw(tmp_path, raw_mode, hooks=DECIDES)) as agent:
            result = await agent.chat(ECHO)
            second = await agent.chat(ECHO)  # the same connection still works (and rejects again)
            state = agent.manager.extensions()[0]
    assert tool_output(result, "echo") == "pong: a" and tool_output(second, "echo") == "pong: a"
    assert result.failed_open == ["raw"]
    assert sum("'raw' beforeToolCall" in line and logged in line for line in warnings(caplog)) >= 2
    assert state.state == "running" and state.restarts == 0
    await persisted_and_next_turn_works(tmp_path, second, ECHO)
    record(scenario, "rejected with a log line, fail open, stream kept", f"logged: {logged[:45]}")


async def test_duplicate_reply_is_discarded_and_the_first_one_used(
    tmp_path: Path, record: Record, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="hookwire.extensions"):
        async with host(tmp_path, raw(tmp_path, "duplicate", hooks=DECIDES)) as agent:
            result = await agent.chat(ECHO)
            await wait_until(lambda: any("duplicate reply" in line for line in warnings(caplog)), 5)
    assert tool_output(result, "echo") == "first answer wins"  # the BLOCK, not the later ALLOW-with-input
    assert any("'raw' beforeToolCall: duplicate reply to call" in line for line in warnings(caplog))
    await persisted_and_next_turn_works(tmp_path, result, ECHO)
    record("duplicate reply", "first reply used, second discarded and logged", "blocked by the first; dup logged")


async def test_reply_with_an_unknown_id_is_discarded(tmp_path: Path, record: Record,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="hookwire.extensions"):
        async with host(tmp_path, raw(tmp_path, "stray", hooks=DECIDES)) as agent:
            result = await agent.chat(ECHO)
    assert tool_output(result, "echo") == "pong: a"  # the stray BLOCK was not applied
    assert result.failed_open == []
    assert any("'raw' beforeToolCall: reply with unknown call id" in line for line in warnings(caplog))
    await persisted_and_next_turn_works(tmp_path, result, ECHO)
    record("reply with an unknown id", "discarded and logged, real reply used", "stray block ignored")


async def test_20_mb_reply_is_rejected_logged_and_the_turn_goes_on(
    tmp_path: Path, record: Record, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="hookwire.extensions"):
        async with host(tmp_path, raw(tmp_path, "huge", hooks=DECIDES, restart={"backoffMs": 50})) as agent:
            result = await agent.chat(ECHO)
            assert await wait_until(lambda: agent.manager.extensions()[0].restarts >= 1, 15)
    assert result.status == "completed" and tool_output(result, "echo") == "pong: a"
    assert result.failed_open == ["raw"]
    event = next(e for e in result.trace if e.hook == "beforeToolCall")
    assert "over the 16777216 byte limit" in event.detail
    assert any("'raw'" in line and "larger than max" in line for line in warnings(caplog))
    await persisted_and_next_turn_works(tmp_path, result, ECHO)
    record("20 MB reply", "rejected (16 MiB cap), logged, turn goes on, restarted", "failed open; restarted")


async def test_oversize_values_reach_the_extension_truncated_with_a_marker(tmp_path: Path, record: Record) -> None:
    big = "x" * (1536 * 1024)
    sent = '/tool echo {"msg": "%s"}' % big
    async with host(tmp_path, mode(tmp_path, "record")) as agent:
        result = await agent.chat(sent)
        await agent.manager.flush()
        scratch = scratch_dir(agent)
        after = json.loads((scratch / "afterToolCall.json").read_text())
        step = json.loads((scratch / "onStepFinish-1.json").read_text())
    assert tool_output(result, "echo") == f"pong: {big}"  # the host's own data is whole
    for key in ("input", "output"):
        marker = after[key]
        assert marker["$truncated"] is True and marker["bytes"] > 1024 * 1024 and len(marker["preview"]) <= 2048
    assert step["text"].endswith(" bytes]") and "…[truncated " in step["text"] and len(step["text"]) < 300 * 1024
    await persisted_and_next_turn_works(tmp_path, result, sent)
    record("oversize snapshot values", "JSON -> $truncated marker, text -> …[truncated N bytes]",
           f"input/output {after['input']['bytes']} B -> marker; step text cut")


async def test_log_flood_and_a_10_mb_stderr_line_do_not_stall_the_host(tmp_path: Path, record: Record) -> None:
    async with host(tmp_path, mode(tmp_path, "log_flood", "--seconds", "3")) as agent:
        first = await agent.chat("start the flood")
        served = 0
        loop = __import__("asyncio").get_running_loop()
        end = loop.time() + 2.5
        while loop.time() < end:  # turns keep completing while the extension floods stderr
            result = await agent.chat(f"turn {served}")
            assert result.status == "completed" and result.message["content"] == f"echo: turn {served}"
            served += 1
        assert agent.manager.extensions()[0].state == "running"
    assert first.status == "completed" and served >= 3
    await persisted_and_next_turn_works(tmp_path, result, None)
    record("log flood + 10 MB stderr line", "host keeps serving turns", f"{served} turns in 2.5 s during the flood")
