"""Each sample loaded from its manifest through host.ExtensionManager (real processes, real gRPC, default sandbox)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from host import (
    CallContext,
    ChunkSnapshot,
    ExtensionManager,
    StepSnapshot,
    ToolCallSnapshot,
    ToolResultSnapshot,
    TraceEvent,
    TurnSnapshot,
)

from ._harness import HAS_BRIDGE, REPO, needs_bridge, node_missing_reason

SAMPLES = REPO / "sample_extensions"


def manifest(name: str) -> Path:
    return SAMPLES / name / "manifest.yaml"


class Session:
    """What a host app provides to the HostBridge for one session (the SessionServices protocol)."""

    def __init__(self, root: Path) -> None:
        self.workspace_root = root
        self.context: dict[str, str] = {}

    async def bridge_get_messages(self, limit: int) -> list[dict[str, Any]]:
        return []

    async def bridge_get_context(self, label: str) -> str | None:
        return self.context.get(label)

    async def bridge_set_context(self, label: str, content: str, *, extension: str) -> None:
        self.context[label] = content

    async def bridge_send_message(self, text: str, role: str) -> str:
        return "m1"

    async def bridge_session_info(self) -> dict[str, Any]:
        return {"sessionId": "s1", "messageCount": 0, "modelId": "scripted"}


@pytest.fixture()
async def mgr() -> AsyncIterator[ExtensionManager]:
    async with ExtensionManager() as manager:
        yield manager


CTX = CallContext(session_id="s1", request_id="r1")


async def test_every_python_sample_manifest_loads(mgr: ExtensionManager) -> None:
    names = ["guard", "router", "tools"] + (["audit_log", "token_meter"] if HAS_BRIDGE else [])
    infos = await mgr.load_all([manifest(n) for n in names])
    assert [i.name for i in infos] == names


async def test_tools_are_namespaced_and_calculator_runs(mgr: ExtensionManager) -> None:
    await mgr.load(manifest("tools"))
    assert {"tools_calculator", "tools_convert_units", "tools_count_to"} <= set(mgr.tool_names())
    assert await mgr.execute_tool("tools_calculator", {"expression": "2*(3+4)"}, context=CTX) == 14


async def test_count_to_sends_preliminaries_through_the_manager(mgr: ExtensionManager) -> None:
    await mgr.load(manifest("tools"))
    seen: list[Any] = []
    final = await mgr.execute_tool("tools_count_to", {"n": 4}, context=CTX, on_preliminary=seen.append)
    assert final == 4
    assert seen[-1] == {"progress": 4, "of": 4}


async def test_router_patch_is_merged_with_provenance(mgr: ExtensionManager) -> None:
    await mgr.load(manifest("router"))
    merged = await mgr.before_turn(TurnSnapshot(system="Base.", body={"mode": "creative", "persona": "a poet"}), CTX)
    assert merged.patch.temperature == 0.9 and merged.patch.max_steps == 8
    assert merged.patch.system == "Base.\n\nPersona for this turn: a poet"
    assert merged.provenance["temperature"] == "router"


async def test_guard_blocks_destructive_tool_through_the_manager(mgr: ExtensionManager) -> None:
    await mgr.load(manifest("guard"))
    decision = await mgr.before_tool_call(ToolCallSnapshot(tool_name="fs_delete_file", tool_call_id="c1", input={}), CTX)
    assert decision is not None and decision.action == "block" and decision.extension == "guard"
    assert "fs_delete_file" in (decision.reason or "")


async def test_guard_lets_safe_tools_through_the_manager(mgr: ExtensionManager) -> None:
    await mgr.load(manifest("guard"))
    assert await mgr.before_tool_call(ToolCallSnapshot(tool_name="tools_calculator", tool_call_id="c1"), CTX) is None


async def test_router_then_node_echo_system_prompt_accumulates_in_load_order(mgr: ExtensionManager) -> None:
    reason = node_missing_reason()
    if reason:
        pytest.skip(f"node_echo cannot run: {reason}")
    await mgr.load_all([manifest("router"), manifest("node_echo")])
    merged = await mgr.before_turn(TurnSnapshot(system="Base.", body={"persona": "terse"}), CTX)
    assert merged.patch.system is not None
    assert merged.patch.system.startswith("Base.\n\nPersona for this turn: terse\n\n")
    assert "Node.js" in merged.patch.system
    assert merged.provenance["system"] == "node_echo" and merged.provenance["maxSteps"] == "router"


async def test_node_echo_tool_and_observations_through_the_manager(mgr: ExtensionManager) -> None:
    reason = node_missing_reason()
    if reason:
        pytest.skip(f"node_echo cannot run: {reason}")
    await mgr.load(manifest("node_echo"))
    assert await mgr.execute_tool("node_echo_echo", {"text": "abc"}, context=CTX) == "node: cba"
    mgr.on_step_finish(StepSnapshot(step_number=0, finish_reason="stop", text="hi"), CTX)
    await mgr.flush(CTX)
    assert (await mgr.execute_tool("node_echo_observed", {}, context=CTX))["onStepFinish"] == 1


@needs_bridge
async def test_audit_log_writes_json_lines_into_the_workspace(mgr: ExtensionManager, tmp_path: Path) -> None:
    mgr.register_session("s1", Session(tmp_path))
    await mgr.load(manifest("audit_log"))
    mgr.after_tool_call(ToolResultSnapshot(tool_name="tools_calculator", tool_call_id="c1", input={"expression": "1+1"}, success=True, output=2), CTX)
    mgr.on_step_finish(StepSnapshot(step_number=0, finish_reason="tool-calls", text=""), CTX)
    await mgr.flush(CTX)
    lines = [json.loads(line) for line in (tmp_path / "audit" / "s1.jsonl").read_text().splitlines()]
    assert [r["event"] for r in lines] == ["afterToolCall", "onStepFinish"]
    assert lines[0]["toolName"] == "tools_calculator" and lines[0]["output"] == 2


@needs_bridge
async def test_token_meter_reports_into_its_context_block(mgr: ExtensionManager, tmp_path: Path) -> None:
    session = Session(tmp_path)
    mgr.register_session("s1", session)
    await mgr.load(manifest("token_meter"))
    for text in ("Hel", "lo", "!"):
        mgr.on_chunk(ChunkSnapshot(type="text-delta", text=text), CTX)
    mgr.on_step_finish(StepSnapshot(step_number=0, finish_reason="stop", text="Hello!"), CTX)
    await mgr.flush(CTX)
    report = json.loads(session.context["token_meter.usage"])
    assert report["lastStep"] == {"stepNumber": 0, "chunks": 3, "chars": 6, "outputTokens": None}


async def test_a_failing_router_hook_is_traced_not_raised(mgr: ExtensionManager) -> None:
    events: list[TraceEvent] = []
    mgr.add_trace_listener(events.append)
    await mgr.load(manifest("router"))
    merged = await mgr.before_turn(TurnSnapshot(system="S", body={"mode": "wild"}), CTX)
    assert merged.patch.temperature is None
    assert any(e.extension == "router" and e.outcome == "error" and "body.mode" in e.detail for e in events)


async def test_guard_env_allowlist_reaches_the_process_through_the_manifest(
    mgr: ExtensionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GUARD_ALLOW_TOOLS", "scratch_write")
    await mgr.load(manifest("guard"))
    assert await mgr.before_tool_call(ToolCallSnapshot(tool_name="scratch_write", tool_call_id="c1"), CTX) is None
    blocked = await mgr.before_tool_call(ToolCallSnapshot(tool_name="file_write", tool_call_id="c2"), CTX)
    assert blocked is not None and blocked.action == "block"
