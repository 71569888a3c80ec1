"""The Connect stream's fast paths: tool calls as frames (feature connect-tools), unanswered observation
frames, contexts compared by value, coalescing of observations into shared frames (observations.maxDelayMs),
held observations riding in the next awaited frame (feature prelude), and the observations of many turns sharing
one frame (feature multi-batch)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from ext_helpers import hooks_manifest, write_manifest

from host import (CallContext, ChunkSnapshot, ExtensionManager, ExtensionToolError, ExtensionUnloadedError, ToolCallSnapshot,
                  TraceEvent)


@pytest.fixture(autouse=True)
def connect_tools_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream tool path is opt-in (host.extensions._extension_client.USE_CONNECT_TOOLS): these tests turn it on."""
    from host.extensions import _extension_client as _extension_connection

    monkeypatch.setattr(_extension_connection, "USE_CONNECT_TOOLS", True)


def wire_manifest(tmp_path: Path, *args: str, **fields: Any) -> Path:
    return write_manifest(tmp_path, "wire", "wire_ext.py", *args, **fields)


async def seen(manager: ExtensionManager) -> dict[str, Any]:
    return await manager.execute_tool("wire_seen", {})


async def test_tool_calls_ride_the_connect_stream_when_the_extension_offers_connect_tools(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    info = await manager.load(wire_manifest(tmp_path))
    assert "connect-tools" in info.features
    assert await manager.execute_tool("wire_add", {"a": 2, "b": 3}) == 5
    assert (await seen(manager))["transports"] == ["stream", "stream"]


async def test_tool_calls_use_execute_tool_rpcs_without_connect_tools(manager: ExtensionManager, tmp_path: Path) -> None:
    info = await manager.load(wire_manifest(tmp_path, "--no-connect-tools"))
    assert "connect-tools" not in info.features
    assert await manager.execute_tool("wire_add", {"a": 2, "b": 3}) == 5
    assert (await seen(manager))["transports"] == ["rpc", "rpc"]


@pytest.mark.parametrize("args", [(), ("--no-connect-tools",)], ids=["stream", "rpc"])
async def test_streaming_tool_preliminaries_reach_the_caller_in_order_then_the_output(
    manager: ExtensionManager, tmp_path: Path, args: tuple[str, ...]
) -> None:
    await manager.load(wire_manifest(tmp_path, *args))
    prelims: list[Any] = []
    assert await manager.execute_tool("wire_count", {"n": 4}, on_preliminary=prelims.append) == 4
    assert prelims == [1, 2, 3]


async def test_tool_timeout_on_the_stream_raises_a_tool_error_and_cancels_the_tool(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    await manager.load(wire_manifest(tmp_path, timeouts={"toolMs": 300}))
    with pytest.raises(ExtensionToolError, match="timed out after 300 ms"):
        await manager.execute_tool("wire_nap", {"seconds": 30})
    assert await wait_until_seen(manager, "cancelled", ["nap"])


async def test_a_cancelled_caller_cancels_the_tool_in_the_extension(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(wire_manifest(tmp_path))
    call = asyncio.ensure_future(manager.execute_tool("wire_nap", {"seconds": 30}))
    await asyncio.sleep(0.3)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert await wait_until_seen(manager, "cancelled", ["nap"])


async def test_unloading_during_a_stream_tool_call_raises_unloaded(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(wire_manifest(tmp_path))
    call = asyncio.ensure_future(manager.execute_tool("wire_nap", {"seconds": 30}))
    await asyncio.sleep(0.3)
    await manager.unload("wire")
    with pytest.raises(ExtensionUnloadedError, match="has been unloaded"):
        await call


async def wait_until_seen(manager: ExtensionManager, key: str, expected: Any) -> bool:
    for _ in range(50):
        if (await seen(manager))[key] == expected:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_handler_errors_of_unanswered_frames_are_reported_by_the_next_flush(
    manager: ExtensionManager, tmp_path: Path, traces: list[TraceEvent]
) -> None:
    await manager.load(wire_manifest(tmp_path, observations={"maxDelayMs": 10}))
    ctx = CallContext(session_id="s", request_id="r")
    for text in ("a", "bad", "c"):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=text), ctx)
        await asyncio.sleep(0.05)  # each chunk its own frame (past the 10 ms hold)
    await manager.flush(ctx)
    errors = [t for t in traces if t.outcome == "error"]
    assert [(t.hook, t.extension) for t in errors] == [("onChunk", "wire")]
    assert "this chunk is bad" in errors[0].detail


async def test_equal_contexts_from_distinct_objects_share_one_frame(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(wire_manifest(tmp_path))
    for i in range(100):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=str(i)), CallContext(session_id="s", request_id="r"))
    await manager.flush()
    state = await seen(manager)
    assert state["batches"] == [100]
    assert [c[1] for c in state["chunks"]] == [str(i) for i in range(100)]


async def test_observations_of_different_turns_keep_their_own_context(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(wire_manifest(tmp_path))
    for rid in ("r1", "r2", "r1"):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=rid), CallContext(session_id="s", request_id=rid))
    await manager.flush()
    assert (await seen(manager))["chunks"] == [["r1", "r1"], ["r2", "r2"], ["r1", "r1"]]


def interleave_three_turns(manager: ExtensionManager) -> None:
    for i in range(12):
        rid = f"r{i % 3}"
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=str(i)), CallContext(session_id=f"s{rid}", request_id=rid))


async def test_interleaved_turns_share_one_frame_each_batch_under_its_own_context(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    info = await manager.load(wire_manifest(tmp_path))
    assert "multi-batch" in info.features
    interleave_three_turns(manager)
    await manager.flush()
    state = await seen(manager)
    assert state["chunks"] == [[f"r{i % 3}", str(i)] for i in range(12)]  # in order, each with its turn's context
    assert state["more"] == [11]  # one frame: the first turn's batch and 11 more, one per run of one turn
    assert state["batches"] == [1] * 12


async def test_without_multi_batch_each_turns_run_gets_a_frame_of_its_own(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    info = await manager.load(wire_manifest(tmp_path, "--no-multi-batch"))
    assert "multi-batch" not in info.features
    interleave_three_turns(manager)
    await manager.flush()
    state = await seen(manager)
    assert state["chunks"] == [[f"r{i % 3}", str(i)] for i in range(12)]
    assert state["more"] == [0] * 12


async def test_chunks_trickling_in_share_frames(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(wire_manifest(tmp_path))
    ctx = CallContext(session_id="s", request_id="r")
    for i in range(60):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=str(i)), ctx)
        await asyncio.sleep(0)  # the loop runs between chunks, as in a streamed turn
    await manager.flush(ctx)
    state = await seen(manager)
    assert sum(state["batches"]) == 60
    assert len(state["batches"]) < 30  # without coalescing, every chunk would be its own frame
    assert [c[1] for c in state["chunks"]] == [str(i) for i in range(60)]


async def five_chunks_20_ms_apart_then_flush(manager: ExtensionManager) -> list[int]:
    """The sizes of the observation batches the extension handled."""
    ctx = CallContext(session_id="s", request_id="r")
    for i in range(5):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=str(i)), ctx)
        await asyncio.sleep(0.02)
    await manager.flush(ctx)
    return (await seen(manager))["batches"]


async def test_observations_are_held_up_to_max_delay_to_share_a_frame(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(wire_manifest(tmp_path, observations={"maxDelayMs": 5000}))
    assert await five_chunks_20_ms_apart_then_flush(manager) == [5]


async def test_max_delay_zero_sends_each_observation_at_once(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(wire_manifest(tmp_path, observations={"maxDelayMs": 0}))
    batches = await five_chunks_20_ms_apart_then_flush(manager)
    assert batches == [1, 1, 1, 1, 1, 0]  # the last, empty frame is the flush asking for an ack of them all


async def test_held_observations_ride_in_the_tool_call_frame_and_are_handled_first(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    info = await manager.load(wire_manifest(tmp_path))
    assert "prelude" in info.features
    ctx = CallContext(session_id="s", request_id="r")
    for i in range(3):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=str(i)), ctx)
    assert await manager.execute_tool("wire_add", {"a": 2, "b": 3}, context=ctx) == 5
    await manager.flush(ctx)  # the tool call's answer already acknowledged them: nothing more is sent
    state = await seen(manager)
    assert state["frames"] == [["execute_tool", 3], ["execute_tool", 0]]
    assert [c[1] for c in state["chunks"]] == ["0", "1", "2"]


async def test_without_the_prelude_feature_held_observations_get_a_frame_of_their_own(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    info = await manager.load(wire_manifest(tmp_path, "--no-prelude"))
    assert "prelude" not in info.features
    ctx = CallContext(session_id="s", request_id="r")
    for i in range(3):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=str(i)), ctx)
    assert await manager.execute_tool("wire_add", {"a": 2, "b": 3}, context=ctx) == 5
    await manager.flush(ctx)
    state = await seen(manager)
    # the observations' own frame, the tool call, the flush's ack request (nothing acknowledged them), `seen`
    assert state["frames"] == [["observations", 0], ["execute_tool", 0], ["observations", 0], ["execute_tool", 0]]
    assert [c[1] for c in state["chunks"]] == ["0", "1", "2"]


async def test_a_prelude_handler_error_is_reported_by_the_next_flush(
    manager: ExtensionManager, tmp_path: Path, traces: list[TraceEvent]
) -> None:
    await manager.load(wire_manifest(tmp_path))
    ctx = CallContext(session_id="s", request_id="r")
    manager.on_chunk(ChunkSnapshot(type="text-delta", text="bad"), ctx)
    assert await manager.execute_tool("wire_add", {"a": 1, "b": 1}, context=ctx) == 2
    manager.on_chunk(ChunkSnapshot(type="text-delta", text="fine"), ctx)
    await manager.flush(ctx)
    errors = [t for t in traces if t.outcome == "error"]
    assert [(t.hook, t.extension) for t in errors] == [("onChunk", "wire")]
    assert "this chunk is bad" in errors[0].detail


class _ReadLog:
    """The connection's Connect call, its reads logged (every other attribute passed through)."""

    def __init__(self, call: Any, log: list[str]) -> None:
        self._call, self._log = call, log

    def read(self) -> Any:
        self._log.append("next read started")
        return self._call.read()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


async def test_an_awaited_hooks_caller_resumes_before_the_reader_starts_its_next_read(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    await manager.load(hooks_manifest(tmp_path, "guard", hooks={"beforeToolCall": {"decisions": True}}))
    conn = manager._registry.exts["hooks-guard"].conn  # noqa: SLF001 - the reader's order is what is tested
    assert conn is not None and conn.streaming
    log: list[str] = []
    conn._stream = _ReadLog(conn._stream, log)  # noqa: SLF001 - the read in flight is the old one; the next is logged
    decision = await manager.before_tool_call(ToolCallSnapshot(tool_name="rm", tool_call_id="c1", input={}))
    log.append("caller resumed")
    await asyncio.sleep(0.05)  # the reader goes on to its next read
    assert decision is not None and decision.action == "block"
    assert log == ["caller resumed", "next read started"]
