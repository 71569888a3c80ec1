"""The frame path to the floor (issue 16 §1, §5): an awaited hook written from its caller when the stream is idle,
the sender waiting for that write; the turn's flush waiting for every extension's ack at once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ext_helpers import write_manifest

from host import (CallContext, ChunkSnapshot, ExtensionManager, StepSnapshot, ToolCallSnapshot, ToolResultSnapshot,
                  TraceEvent)

CTX = CallContext(session_id="s", request_id="r1")


def frames_manifest(tmp_path: Path, name: str = "frames", **fields: Any) -> Path:
    return write_manifest(tmp_path, name, "frames_ext.py", "--name", name, **fields)


def call(i: int) -> ToolCallSnapshot:
    return ToolCallSnapshot(tool_name="t", tool_call_id=f"c{i}", input={}, step_number=0)


async def log_of(manager: ExtensionManager, name: str = "frames") -> list[list[str]]:
    """What the extension `name` handled, in order."""
    return await manager.execute_tool(f"{name}_log", {})


async def test_observations_enqueued_while_a_hook_frame_is_written_follow_it_in_order(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    await manager.load(frames_manifest(tmp_path, hooks={"beforeToolCall": {"decisions": True}},
                                       observations={"maxDelayMs": 0}))
    deciding = asyncio.ensure_future(manager.before_tool_call(call(1), CTX))
    await asyncio.sleep(0)  # the call's frame is on its way (written from the caller: the stream was idle)
    for text in ("a", "b", "c"):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=text), CTX)  # the sender must wait for that write
    decision = await deciding
    await manager.flush(CTX)
    assert decision is not None and decision.reason == "c1"
    assert await log_of(manager) == [
        ["beforeToolCall", "c1"], ["onChunk", "a"], ["onChunk", "b"], ["onChunk", "c"]]


async def test_concurrent_hook_calls_each_get_their_own_answer_exactly_once(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    await manager.load(frames_manifest(tmp_path, hooks={"beforeToolCall": {"decisions": True}}))
    decisions = await asyncio.gather(*(manager.before_tool_call(call(i), CTX) for i in range(40)))
    assert [d.reason if d else None for d in decisions] == [f"c{i}" for i in range(40)]
    handled = await log_of(manager)
    assert sorted(handled) == sorted(["beforeToolCall", f"c{i}"] for i in range(40))


async def test_a_turns_observations_reach_each_extension_exactly_once_in_order(
    manager: ExtensionManager, tmp_path: Path, traces: list[TraceEvent]
) -> None:
    names = [f"obs{i}" for i in range(3)]
    for name in names:
        await manager.load(frames_manifest(tmp_path, name))
    sent: list[list[str]] = []
    assert await manager.before_tool_call(call(1), CTX) is None  # observed only: enqueued, nothing awaited
    sent.append(["beforeToolCall", "c1"])
    for i in range(5):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=str(i)), CTX)
        sent.append(["onChunk", str(i)])
    manager.after_tool_call(ToolResultSnapshot(tool_name="t", tool_call_id="c1", input={}, step_number=0,
                                               duration_ms=1.0, success=True, output="ok"), CTX)
    sent.append(["afterToolCall", "c1"])
    manager.on_step_finish(StepSnapshot(step_number=0, finish_reason="stop", text="done"), CTX)
    sent.append(["onStepFinish", "0"])
    await manager.flush(CTX)
    for name in names:
        assert await log_of(manager, name) == sent
    rows = {(t.extension, t.hook, t.outcome) for t in traces if t.request_id == "r1"}
    assert rows == {(n, h, "ok") for n in names for h in ("beforeToolCall", "afterToolCall", "onStepFinish", "onChunk")}
