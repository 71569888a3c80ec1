"""ExtensionManager's hook methods take the snapshot models or their camelCase dicts (the wire's names)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ext_helpers import hooks_manifest

from host import ExtensionManager


async def test_before_turn_takes_a_camelcase_snapshot_dict_and_context_dict(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    await manager.load(hooks_manifest(tmp_path, "see_tools"))
    merged = await manager.before_turn({"system": "s", "toolNames": ["a", "b"], "messageCount": 1},
                                       {"sessionId": "s1", "requestId": "r1"})
    assert merged.patch.system == "a,b"


async def test_observation_hooks_take_camelcase_snapshot_dicts(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(hooks_manifest(tmp_path, "record"))
    await manager.before_tool_call({"toolName": "lookup", "toolCallId": "c1", "input": {"q": 1}})
    manager.on_chunk({"type": "text-delta", "text": "hi"}, {"sessionId": "s1", "requestId": "r1"})
    manager.after_tool_call({"toolName": "lookup", "toolCallId": "c1", "durationMs": 3.5, "output": "sunny"})
    manager.on_step_finish({"stepNumber": 0, "finishReason": "stop", "text": "hi"})
    await manager.flush()
    assert await manager.execute_tool("hooks_record_events", {}) == [
        ["beforeToolCall", "lookup"], ["onChunk", "hi"], ["afterToolCall", "lookup", "sunny"], ["onStepFinish", 0],
    ]


async def test_an_invalid_snapshot_dict_is_a_clear_error_naming_the_hook_and_field(manager: ExtensionManager) -> None:
    with pytest.raises(ValueError, match=r"^beforeTurn snapshot: field toolNames: Input should be a valid list"):
        await manager.before_turn({"toolNames": 5})
    with pytest.raises(TypeError, match=r"^beforeToolCall snapshot: expected a ToolCallSnapshot or its dict, got str"):
        await manager.before_tool_call("lookup")  # type: ignore[arg-type]
