"""Extensions wired into the turn: beforeTurn patch, extension tools, and observation snapshots via the HostBridge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_helpers import Recorder, requests

from host import Agent
from host.turn import _loop

FIXTURE = Path(__file__).parent / "fixtures" / "agent_ext.py"


def manifest(tmp_path: Path, *args: str, **fields: Any) -> Path:
    data: dict[str, Any] = {
        "name": "agent-ext",
        "version": "1.0.0",
        "command": ["python", str(FIXTURE), *args],
        "timeouts": {"startMs": 15000, "shutdownMs": 1000},
        **fields,
    }
    path = tmp_path / "agent-ext.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class MaxSteps(Recorder):
    seen_max_steps: list[Any] = []

    def before_turn(self, ctx):  # type: ignore[no-untyped-def]
        return {"maxSteps": 5}


async def test_extension_before_turn_max_steps_reaches_the_loop(tmp_path: Path) -> None:
    async with MaxSteps(extensions=[manifest(tmp_path, "--max-steps", "1")], sandbox="off") as agent:
        result = await agent.chat('/tool echo {"msg": "a"}\n/next\n/tool echo {"msg": "b"}')
    assert result.status == "completed"
    assert len(requests()) == 1 and agent.executions == [("echo", "a")]
    assert any(e.hook == "beforeTurn" and e.extension == "agent-ext" for e in result.trace)


async def test_model_calls_an_extension_tool(tmp_path: Path) -> None:
    async with Recorder(extensions=[manifest(tmp_path)], sandbox="off") as agent:
        result = await agent.chat('/tool agent_ext_ping {"msg": "hi"}')
    assert result.message["content"] == "Tool results: agent_ext_ping -> pong: hi."
    part = next(p for p in result.message["parts"] if p.get("toolCallId"))
    assert part["type"] == "dynamic-tool" and part["output"] == "pong: hi"
    assert ("before_tool_call", "agent_ext_ping") in agent.events
    tools = [t["function"]["name"] for t in requests()[0]["tools"]]
    assert tools == ["echo", "agent_ext_ping"]


async def test_extension_block_wins_over_a_subclass_allow(tmp_path: Path) -> None:
    path = manifest(tmp_path, "--block-tool", "echo", hooks={"beforeToolCall": {"decisions": True}})

    class Allowing(Recorder):
        def before_tool_call(self, ctx):  # type: ignore[no-untyped-def]
            return {"action": "allow"}

    async with Allowing(extensions=[path], sandbox="off") as agent:
        result = await agent.chat('/tool echo {"msg": "a"}')
    assert agent.executions == []
    assert result.message["content"] == "Tool results: echo -> blocked by agent-ext."


async def test_subclass_substitute_stands_over_an_extension_block_which_still_runs(tmp_path: Path) -> None:
    path = manifest(tmp_path, "--block-tool", "echo", hooks={"beforeToolCall": {"decisions": True}})

    class Substituting(Recorder):
        def before_tool_call(self, ctx):  # type: ignore[no-untyped-def]
            return {"action": "substitute", "output": "cached"}

    async with Substituting(extensions=[path], sandbox="off") as agent:
        result = await agent.chat('/tool echo {"msg": "a"}')
    assert result.message["content"] == "Tool results: echo -> cached."
    assert agent.executions == []
    assert [(e.hook, e.extension, e.outcome) for e in result.trace if e.hook == "beforeToolCall"] == [
        ("beforeToolCall", "agent-ext", "denied")]


async def test_extension_before_tool_call_sees_the_subclass_substituted_input(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    path = manifest(tmp_path, "--observe", permissions={"workspace": "read-write"})

    class Rewriting(Recorder):
        def before_tool_call(self, ctx):  # type: ignore[no-untyped-def]
            return {"action": "allow", "input": {"msg": "rewritten"}}

    async with Rewriting(extensions=[path], workspace=ws, sandbox="off") as agent:
        result = await agent.chat('/tool echo {"msg": "hi"}')
    assert json.loads((ws / "beforeToolCall.json").read_text())["input"] == {"msg": "rewritten"}
    assert agent.executions == [("echo", "rewritten")]
    assert result.message["content"] == "Tool results: echo -> pong: rewritten."


async def test_extension_before_tool_call_is_dispatched_after_a_subclass_block(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    path = manifest(tmp_path, "--observe", permissions={"workspace": "read-write"})

    class Blocking(Recorder):
        def before_tool_call(self, ctx):  # type: ignore[no-untyped-def]
            return {"action": "block", "reason": "no echo today"}

    async with Blocking(extensions=[path], workspace=ws, sandbox="off") as agent:
        result = await agent.chat('/tool echo {"msg": "hi"}')
    seen = json.loads((ws / "beforeToolCall.json").read_text())
    assert (seen["toolName"], seen["input"]) == ("echo", {"msg": "hi"})
    assert agent.executions == []
    assert result.message["content"] == "Tool results: echo -> no echo today."


async def test_extension_observes_tool_step_and_chunk_snapshots(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    path = manifest(tmp_path, "--observe", permissions={"workspace": "read-write"})
    async with Recorder(extensions=[path], workspace=ws) as agent:  # default sandbox "auto"
        result = await agent.chat('/tool echo {"msg": "hi"}')
    assert result.status == "completed"
    before = json.loads((ws / "beforeToolCall.json").read_text())
    after = json.loads((ws / "afterToolCall.json").read_text())
    steps = [json.loads(line) for line in (ws / "onStepFinish.jsonl").read_text().splitlines()]
    chunks = [json.loads(line) for line in (ws / "onChunk.jsonl").read_text().splitlines()]
    assert before["toolName"] == "echo" and before["input"] == {"msg": "hi"}
    assert after["input"] == {"msg": "hi"} and after["success"] is True and after["output"] == "pong: hi"
    assert isinstance(after["durationMs"], (int, float))
    assert [s["stepNumber"] for s in steps] == [0, 1] and isinstance(steps[0]["stepNumber"], int)
    assert any(c["type"] == "text-delta" and c.get("text") for c in chunks)


async def test_extensions_see_the_same_chunks_whether_or_not_the_agent_has_an_on_chunk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # With no on_chunk of the agent's (and no transform), the loop hands the extensions each delta's fields without
    # making a Chunk for it; with one, the Chunk the agent sees is what the extensions get. The two must not differ.
    made: list[str] = []  # the Chunk models the loop built, by type

    class CountedChunk(_loop.Chunk):  # type: ignore[misc, valid-type]
        def __init__(self, **fields: Any) -> None:
            super().__init__(**fields)
            made.append(self.type)

    monkeypatch.setattr(_loop, "Chunk", CountedChunk)
    script = '/reason weighing it\n/tool echo {"msg": "hi"}\n/next\nall done'

    class Plain(Recorder):
        on_chunk = Agent.on_chunk  # Agent's own no-op: nobody but the extensions sees the chunks

    class Watching(Recorder):
        pass  # Recorder's on_chunk: the loop makes a Chunk for every delta

    seen: dict[str, list[dict[str, Any]]] = {}
    content: dict[str, str] = {}
    for name, cls in (("plain", Plain), ("watching", Watching)):
        ws = tmp_path / name
        path = manifest(tmp_path, "--observe", permissions={"workspace": "read-write"})
        async with cls(extensions=[path], workspace=ws, sandbox="off") as agent:
            result = await agent.chat(script)
        assert result.status == "completed"
        deltas = {t for t in made if t.endswith("-delta") or t == "tool-input-start"}
        assert deltas == (set() if name == "plain" else {"reasoning-delta", "tool-input-start", "tool-input-delta",
                                                         "text-delta"})
        made.clear()
        content[name] = result.message["content"]
        seen[name] = [json.loads(line) for line in (ws / "onChunk.jsonl").read_text().splitlines()]
    assert seen["plain"] == seen["watching"]
    types = [c["type"] for c in seen["plain"]]
    assert {"reasoning-delta", "tool-input-start", "tool-input-delta", "tool-call", "tool-result",
            "text-delta"} <= set(types)
    assert "".join(c["text"] for c in seen["plain"] if c["type"] == "text-delta") == content["plain"] != ""
    assert "".join(c["text"] for c in seen["plain"] if c["type"] == "tool-input-delta") == '{"msg":"hi"}'
