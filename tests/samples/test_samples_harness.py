"""The Python samples tested as an author would test them: extension_sdk.testing, no host process."""

from __future__ import annotations

import json

import pytest

from extension_sdk.testing import ExtensionHarness, ToolFailed
from sample_extensions.audit_log import ext as audit_log
from sample_extensions.guard import ext as guard
from sample_extensions.token_meter import ext as token_meter
from sample_extensions.tools import ext as tools


async def test_guard_blocks_a_destructive_tool_unless_the_turn_body_allows_it() -> None:
    async with ExtensionHarness(guard) as h:
        await h.before_turn()
        blocked = await h.before_tool_call(toolName="delete_file", input={"path": "a"})
        h.next_turn()
        await h.before_turn(body={"guard": {"allow": ["delete_file"]}})
        allowed = await h.before_tool_call(toolName="delete_file", input={"path": "a"})
    assert blocked is not None and blocked["action"] == "block"
    assert blocked["reason"].startswith("guard: 'delete_file' looks destructive (its name contains 'delete')")
    assert allowed is None


async def test_audit_log_appends_a_json_line_per_tool_call_to_the_sessions_file() -> None:
    async with ExtensionHarness(audit_log, session_id="s/1") as h:
        await h.after_tool_call(toolName="tools_calculator", input={"expression": "6*7"}, output=42)
    (line,) = h.host.text("audit/s_1.jsonl").splitlines()
    record = json.loads(line)
    assert {k: record[k] for k in ("event", "session", "toolName", "input", "output", "success")} == {
        "event": "afterToolCall", "session": "s/1", "toolName": "tools_calculator",
        "input": {"expression": "6*7"}, "output": 42, "success": True,
    }


async def test_token_meter_writes_the_steps_chunk_counts_into_its_context_block() -> None:
    async with ExtensionHarness(token_meter) as h:
        await h.observe([("onChunk", {"text": "Hello"}), ("onChunk", {"text": ", world"}),
                         ("onStepFinish", {"stepNumber": 0, "usage": {"outputTokens": 2}})])
    usage = json.loads(h.host.context["token_meter.usage"])
    assert (usage["chunks"], usage["chars"], usage["lastStep"]["outputTokens"]) == (2, 12, 2)


async def test_tools_calculator_answers_and_a_bad_expression_is_a_tool_error() -> None:
    async with ExtensionHarness(tools) as h:
        assert await h.call_tool("calculator", {"expression": "6*7"}) == 42
        with pytest.raises(ToolFailed) as info:
            await h.call_tool("calculator", {"expression": "1/0"})
    assert (info.value.name, info.value.message) == ("CalculatorError", "division by zero")
