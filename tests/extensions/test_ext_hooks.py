"""Hook dispatch: the beforeTurn merge, deadlines, failures, beforeToolCall decisions, observations."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
from ext_helpers import hooks_manifest

from host import (
    Agent,
    CallContext,
    ChunkSnapshot,
    ExtensionManager,
    StepSnapshot,
    ToolCallSnapshot,
    ToolResultSnapshot,
    TraceEvent,
    TurnSnapshot,
)

TURN = TurnSnapshot(system="base", tool_names=["t1", "t2"], message_count=1, model_id="m")


def call(tool: str, input: object = None) -> ToolCallSnapshot:
    return ToolCallSnapshot(tool_name=tool, tool_call_id="c1", input=input if input is not None else {})


async def test_before_turn_returning_max_steps_42(manager: ExtensionManager, tools_manifest: Path) -> None:
    await manager.load(tools_manifest)
    merged = await manager.before_turn(TURN)
    assert merged.patch.max_steps == 42
    assert merged.provenance == {"maxSteps": "test-tools"}


GRANT_MAPS = {"turnConfig": ["system", "maxSteps", "temperature", "activeTools", "headers", "providerOptions"]}


async def test_merge_last_wins_headers_merged_with_provenance(manager: ExtensionManager, tmp_path: Path) -> None:
    """Scalars: last wins; headers merge case-insensitively, providerOptions option by option per provider."""
    await manager.load(hooks_manifest(tmp_path, "merge_a", permissions=GRANT_MAPS))
    await manager.load(hooks_manifest(tmp_path, "merge_b", permissions=GRANT_MAPS))
    merged = await manager.before_turn(TURN)
    patch = merged.patch
    assert patch.max_steps == 7
    assert patch.temperature == 0.5
    assert patch.headers == {"x-a": "1", "x-b": "2", "x-shared": "from-b"}
    assert patch.provider_options == {"openai": {"reasoning_effort": "high", "logprobs": True},
                                      "anthropic": {"thinking": {"type": "enabled"}}}
    assert merged.provenance == {
        "system": "hooks-merge_b", "maxSteps": "hooks-merge_b", "temperature": "hooks-merge_a",
        "activeTools": "hooks-merge_b", "headers.x-a": "hooks-merge_a", "headers.x-b": "hooks-merge_b",
        "headers.x-shared": "hooks-merge_b", "providerOptions.openai.reasoning_effort": "hooks-merge_b",
        "providerOptions.openai.logprobs": "hooks-merge_a", "providerOptions.anthropic.thinking": "hooks-merge_b",
    }
    assert merged.denied == []


async def test_headers_and_provider_options_denied_without_a_grant(manager: ExtensionManager, tmp_path: Path) -> None:
    """The default grant (scalars) refuses headers and providerOptions field by field; the scalars apply."""
    await manager.load(hooks_manifest(tmp_path, "merge_a"))
    merged = await manager.before_turn(TURN)
    assert merged.patch.set_fields() == {"system": "A:base", "max_steps": 3, "temperature": 0.5}
    assert sorted((d.extension, d.hook, d.field) for d in merged.denied) == [
        ("hooks-merge_a", "beforeTurn", "headers"), ("hooks-merge_a", "beforeTurn", "providerOptions")]
    assert {d.reason for d in merged.denied} == {"not granted by the manifest's permissions.turnConfig"}


async def test_second_extension_sees_the_first_ones_system(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(hooks_manifest(tmp_path, "merge_a"))
    await manager.load(hooks_manifest(tmp_path, "merge_b"))
    merged = await manager.before_turn(TURN)
    assert merged.patch.system == "A:base|B"
    assert merged.provenance["system"] == "hooks-merge_b"


async def test_tool_names_follow_active_tools(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(hooks_manifest(tmp_path, "merge_b"))
    await manager.load(hooks_manifest(tmp_path, "see_tools"))
    merged = await manager.before_turn(TURN)
    assert merged.patch.system == "t1"


async def test_hook_past_its_deadline_returns_in_time_and_late_reply_is_discarded(
    manager: ExtensionManager, tmp_path: Path, traces: list[TraceEvent]
) -> None:
    await manager.load(hooks_manifest(tmp_path, "slow", hooks={"beforeTurn": {"timeoutMs": 300}}))
    t0 = time.perf_counter()
    merged = await manager.before_turn(TURN)
    assert time.perf_counter() - t0 < 1.2  # the handler sleeps 1.5 s
    assert merged.patch.max_steps is None
    assert [t.outcome for t in traces] == ["timeout"]
    await asyncio.sleep(1.5)  # the late reply (maxSteps 1) arrives meanwhile and must be discarded
    merged = await manager.before_turn(TURN)
    assert merged.patch.max_steps == 2


async def test_handler_exception_is_logged_and_traced_not_raised(
    manager: ExtensionManager, tmp_path: Path, traces: list[TraceEvent], caplog: pytest.LogCaptureFixture
) -> None:
    await manager.load(hooks_manifest(tmp_path, "raise"))
    await manager.load(hooks_manifest(tmp_path, "merge_b"))
    with caplog.at_level(logging.WARNING, logger="hookwire.extensions"):
        merged = await manager.before_turn(TURN)
    assert merged.patch.max_steps == 7  # the next extension still ran
    failed = [t for t in traces if t.extension == "hooks-raise"]
    assert failed[0].outcome == "error" and "kaboom in beforeTurn" in failed[0].detail
    assert any("hooks-raise" in r.getMessage() and "beforeTurn" in r.getMessage() for r in caplog.records)


async def test_invalid_fields_are_rejected_and_valid_ones_applied(
    manager: ExtensionManager, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await manager.load(hooks_manifest(tmp_path, "invalid"))
    with caplog.at_level(logging.WARNING, logger="hookwire.extensions"):
        merged = await manager.before_turn(TURN)
    assert merged.patch.set_fields() == {"top_p": 0.5}
    text = "\n".join(r.getMessage() for r in caplog.records)
    for field in ("maxSteps", "temperature", "bogus"):
        assert f"invalid field {field}" in text
    assert "hooks-invalid" in text
    assert [(d.field, d.reason) for d in merged.denied] == [
        ("model", "never settable by an extension (the host owns model, tools and stopWhen)")]
    assert "'hooks-invalid' beforeTurn: field model: denied: never settable by an extension" in text


async def test_before_tool_call_without_deciders_is_an_observation(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(hooks_manifest(tmp_path, "guard"))  # no `decisions: true` in its manifest
    assert await manager.before_tool_call(call("rm")) is None


async def test_block_wins_over_substitute(manager: ExtensionManager, tmp_path: Path) -> None:
    decide = {"beforeToolCall": {"decisions": True}}
    await manager.load(hooks_manifest(tmp_path, "substitute", hooks=decide))
    await manager.load(hooks_manifest(tmp_path, "guard", hooks=decide))
    decision = await manager.before_tool_call(call("rm"))
    assert decision is not None
    assert (decision.action, decision.reason, decision.extension) == ("block", "rm is not allowed", "hooks-guard")


async def test_substitute_decision(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(hooks_manifest(tmp_path, "substitute", hooks={"beforeToolCall": {"decisions": True}}))
    decision = await manager.before_tool_call(call("ls"))
    assert decision is not None and decision.action == "substitute" and decision.output == {"cached": True}


async def test_allow_with_input(manager: ExtensionManager, tmp_path: Path) -> None:
    mutator = {"beforeToolCall": {"decisions": True, "phase": "mutate"}}
    await manager.load(hooks_manifest(tmp_path, "guard", hooks=mutator))
    decision = await manager.before_tool_call(call("shout", {"text": "hi"}))
    assert decision is not None and decision.action == "allow"
    assert decision.has_input and decision.input == {"text": "HI"}
    assert await manager.before_tool_call(call("ls")) is None


async def test_fail_closed_decider_that_times_out_blocks(manager: ExtensionManager, tmp_path: Path) -> None:
    policy = {"beforeToolCall": {"decisions": True, "failure": "closed", "timeoutMs": 200}}
    await manager.load(hooks_manifest(tmp_path, "hang_decider", hooks=policy))
    decision = await manager.before_tool_call(call("ls"))
    assert decision is not None and decision.action == "block" and decision.failed_closed
    assert "hooks-hang_decider" in (decision.reason or "")


async def test_fail_open_decider_that_times_out_gives_no_decision(
    manager: ExtensionManager, tmp_path: Path, traces: list[TraceEvent]
) -> None:
    policy = {"beforeToolCall": {"decisions": True, "failure": "open", "timeoutMs": 200}}
    await manager.load(hooks_manifest(tmp_path, "hang_decider", hooks=policy))
    assert await manager.before_tool_call(call("ls")) is None
    assert [t.outcome for t in traces] == ["failed_open"]


async def test_observations_arrive_in_order_and_flush_waits(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(hooks_manifest(tmp_path, "record"))
    ctx = CallContext(session_id="s", request_id="r")
    assert await manager.before_tool_call(call("ls"), ctx) is None
    for i in range(50):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=str(i)), ctx)
    manager.after_tool_call(ToolResultSnapshot(tool_name="ls", tool_call_id="c1", output=["a"]), ctx)
    manager.on_step_finish(StepSnapshot(step_number=0, finish_reason="stop"), ctx)
    await manager.flush(ctx)
    events = await manager.execute_tool("hooks_record_events", {})
    assert events[0] == ["beforeToolCall", "ls"]
    assert [e[1] for e in events[1:51]] == [str(i) for i in range(50)]
    assert events[51:] == [["afterToolCall", "ls", ["a"]], ["onStepFinish", 0]]


async def test_a_fast_observer_gets_every_chunk_of_a_stream_that_never_waits(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    # the scripted model's chunks are all ready, so litellm's stream never suspends (as a fast local model's or a
    # buffered burst's): the turn loop must still let the extension's sender run, or its outbox fills while the turn
    # holds the event loop and the oldest items are dropped (10,000 kept) although the extension keeps up easily
    await manager.load(hooks_manifest(tmp_path, "count_chunks"))
    async with Agent(manager=manager, store=str(tmp_path / "s.db")) as agent:
        result = await agent.chat("/chunks 15000")
    assert result.status == "completed"
    assert manager.extensions()[0].dropped_observations == 0
    assert await manager.execute_tool("hooks_count_chunks_total", {}) == 15000


async def test_slow_observer_drops_oldest_chunks_instead_of_blocking(
    manager: ExtensionManager, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await manager.load(hooks_manifest(tmp_path, "slow_chunks", timeouts={"hookMs": 500}))
    with caplog.at_level(logging.WARNING, logger="hookwire.extensions"):
        for i in range(30_000):  # synchronous: the turn never waits for the extension
            manager.on_chunk(ChunkSnapshot(type="text-delta", text=str(i)))
        await manager.flush()
    assert manager.extensions()[0].dropped_observations > 0
    assert any("can't keep up" in r.getMessage() and "hooks-slow_chunks" in r.getMessage() for r in caplog.records)


async def test_extension_without_connect_gets_unary_hooks_and_batched_observations(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    from ext_helpers import write_manifest

    info = await manager.load(write_manifest(tmp_path, "unary", "unary_ext.py"))
    assert info.features == []
    merged = await manager.before_turn(TurnSnapshot(message_count=4))
    assert merged.patch.max_steps == 5
    for i in range(5):
        manager.on_chunk(ChunkSnapshot(type="text-delta", text=str(i)))
    manager.after_tool_call(ToolResultSnapshot(tool_name="t", tool_call_id="c"))
    await manager.flush()
    assert await manager.execute_tool("unary_seen", {}) == ["0", "1", "2", "3", "4", "after_tool_call"]
