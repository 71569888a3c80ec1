"""Each sample in a real turn: host.Agent on the embedded scripted model, extensions loaded from their manifests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from host import Agent, tool
from host.turn._scripted_model import last_requests

from ._harness import REPO, needs_bridge, node_missing_reason

SAMPLES = REPO / "sample_extensions"


def manifests(*names: str) -> list[str]:
    return [str(SAMPLES / n / "manifest.yaml") for n in names]


def tool_parts(message: dict[str, Any] | None) -> list[dict[str, Any]]:
    assert message is not None
    return [p for p in message["parts"] if p.get("toolCallId")]


class FilesAgent(Agent):
    """An agent with a destructive host tool, to show the guard blocking it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deleted: list[str] = []

    def get_tools(self) -> dict[str, Any]:
        def delete_file(path: str) -> str:
            """Deletes a file."""
            self.deleted.append(path)
            return f"deleted {path}"

        return {"delete_file": tool(delete_file)}


def agent(names: Sequence[str], tmp_path: Path, cls: type[Agent] = Agent) -> Agent:
    return cls(session_id="s1", extensions=manifests(*names), workspace=tmp_path / "ws")


async def test_turn_calls_the_calculator_tool(tmp_path: Path) -> None:
    async with agent(["tools"], tmp_path) as a:
        result = await a.chat('/tool tools_calculator {"expression": "2*(3+4)"}')
    assert result.status == "completed"
    assert tool_parts(result.message)[0]["output"] == 14
    assert result.message is not None and result.message["content"] == "Tool results: tools_calculator -> 14."


async def test_turn_streaming_count_to_ends_with_the_total(tmp_path: Path) -> None:
    async with agent(["tools"], tmp_path) as a:
        result = await a.chat('/tool tools_count_to {"n": 3}')
    assert tool_parts(result.message)[0]["output"] == 3


async def test_turn_guard_blocks_a_destructive_host_tool(tmp_path: Path) -> None:
    async with agent(["guard"], tmp_path, FilesAgent) as a:
        result = await a.chat('/tool delete_file {"path": "notes.txt"}')
        assert isinstance(a, FilesAgent) and a.deleted == []
    output = tool_parts(result.message)[0]["output"]
    assert "guard" in output and "delete_file" in output
    assert any(e.extension == "guard" and e.outcome == "denied" for e in result.trace)


async def test_turn_guard_body_read_only_false_lets_the_tool_run(tmp_path: Path) -> None:
    async with agent(["guard"], tmp_path, FilesAgent) as a:
        result = await a.chat('/tool delete_file {"path": "notes.txt"}', body={"readOnly": False})
        assert isinstance(a, FilesAgent) and a.deleted == ["notes.txt"]
    assert tool_parts(result.message)[0]["output"] == "deleted notes.txt"


async def test_turn_router_sets_temperature_and_persona_on_the_model_request(tmp_path: Path) -> None:
    async with agent(["router"], tmp_path) as a:
        await a.chat("hello", body={"mode": "precise", "persona": "a pirate"})
    request = last_requests[-1]
    assert request["temperature"] == 0
    system = request["messages"][0]
    assert system["role"] == "system" and "Persona for this turn: a pirate" in system["content"]


@needs_bridge
async def test_turn_audit_log_writes_tool_and_step_lines(tmp_path: Path) -> None:
    async with agent(["tools", "audit_log"], tmp_path) as a:
        await a.chat('/tool tools_calculator {"expression": "6*7"}')
    log = tmp_path / "ws" / "audit" / "s1.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["event"] for r in records] == ["afterToolCall", "onStepFinish", "onStepFinish"]
    assert records[0]["toolName"] == "tools_calculator" and records[0]["output"] == 42


@needs_bridge
async def test_turn_token_meter_fills_its_context_block(tmp_path: Path) -> None:
    async with agent(["token_meter"], tmp_path) as a:
        await a.chat("/chunks 5")
        report = json.loads(await a.get_context("token_meter.usage") or "null")
    assert report["steps"] == 1 and report["chunks"] == 5


async def test_turn_node_echo_tool_and_system_note(tmp_path: Path) -> None:
    reason = node_missing_reason()
    if reason:
        pytest.skip(f"node_echo cannot run: {reason}")
    async with agent(["node_echo"], tmp_path) as a:
        result = await a.chat('/tool node_echo_echo {"text": "hookwire"}')
    assert tool_parts(result.message)[0]["output"] == "node: eriwkooh"
    assert "Node.js extension" in last_requests[-1]["messages"][0]["content"]
