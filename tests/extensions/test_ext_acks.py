"""ObservationAck.handled is part of the contract: what an extension says it did not handle (or an Observe it does
not serve) is a failure in the trace, never "ok N observation(s) delivered"."""

from __future__ import annotations

from pathlib import Path

import pytest
from ext_helpers import write_manifest

from host import Agent, ExtensionManager, TraceEvent
from host.extensions._snapshots import ChunkSnapshot


async def _observe_outcome(manager: ExtensionManager, traces: list[TraceEvent], tmp_path: Path,
                           mode: str) -> TraceEvent:
    await manager.load(write_manifest(tmp_path, f"acks-{mode}", "acks_ext.py", "--mode", mode))
    for i in range(3):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=str(i)))
    await manager.flush()
    return next(e for e in traces if e.hook == "observe")


async def test_observe_answered_unimplemented_is_failed_open_not_delivered(
    manager: ExtensionManager, traces: list[TraceEvent], tmp_path: Path
) -> None:
    event = await _observe_outcome(manager, traces, tmp_path, "unimplemented")
    assert (event.outcome, event.extension) == ("failed_open", "acks-unimplemented")
    assert event.detail.startswith("3 of 3 observation(s) not handled: Observe failed: UNIMPLEMENTED")


async def test_a_unary_ack_handling_fewer_than_the_batch_is_failed_open(
    manager: ExtensionManager, traces: list[TraceEvent], tmp_path: Path
) -> None:
    event = await _observe_outcome(manager, traces, tmp_path, "short-unary")
    assert event.outcome == "failed_open"
    assert event.detail == ("3 of 3 observation(s) not handled: Observe acknowledged 0 of 3 observation(s) "
                            "(ObservationAck.handled)")


async def test_a_stream_ack_handling_fewer_than_sent_since_the_last_ack_is_failed_open(
    manager: ExtensionManager, traces: list[TraceEvent], tmp_path: Path
) -> None:
    event = await _observe_outcome(manager, traces, tmp_path, "short-stream")
    assert event.outcome == "failed_open"
    assert event.detail == "3 of 3 observation(s) not handled: acknowledged 0 of 3 observation(s) (ObservationAck.handled)"


async def test_an_extension_answering_every_frame_with_its_own_count_is_delivered(
    manager: ExtensionManager, traces: list[TraceEvent], tmp_path: Path
) -> None:
    await manager.load(write_manifest(tmp_path, "acks-per-frame", "acks_ext.py", "--mode", "per-frame"))
    for i in range(3):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=str(i)))
    await manager.flush()
    # delivered observations are a trace row per hook (issue 14 §3), not one merged `observe` row
    assert [(e.hook, e.outcome, e.detail) for e in traces] == [("onChunk", "ok", "3 observation(s) delivered in order")]


@pytest.mark.parametrize("mode", ["unimplemented", "short-stream"])
async def test_a_turn_whose_observer_did_not_handle_its_observations_lists_it_as_failed_open(
    tmp_path: Path, mode: str
) -> None:
    manifest = write_manifest(tmp_path, f"acks-{mode}", "acks_ext.py", "--mode", mode)
    async with Agent(extensions=[manifest], sandbox="off", store=str(tmp_path / "s.db")) as agent:
        result = await agent.chat("hello there")
    assert result.status == "completed"
    assert result.failed_open == [f"acks-{mode}"]
    event = next(e for e in result.trace if e.hook == "observe")
    assert event.outcome == "failed_open" and "not handled" in event.detail


@pytest.mark.parametrize("decisions", [False, True])
async def test_before_tool_call_is_an_observation_item_unless_the_manifest_opts_in_to_decisions(
    manager: ExtensionManager, tmp_path: Path, decisions: bool
) -> None:
    from host.extensions._snapshots import ToolCallSnapshot

    await manager.load(write_manifest(tmp_path, "acks-btc", "acks_ext.py", "--mode", "btc",
                                      hooks={"beforeToolCall": {"decisions": decisions}}))
    await manager.before_tool_call(ToolCallSnapshot(tool_name="lookup", tool_call_id="c1"))
    await manager.flush()
    want = [["BeforeToolCall", True]] if decisions else [["Observe", "before_tool_call"]]
    assert await manager.execute_tool("acks_btc_seen", {}) == want
