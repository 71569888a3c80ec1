"""An extension learns what its manifest grants it from DescribeRequest.granted (SDK: `ext.granted`)."""

from __future__ import annotations

from pathlib import Path

from ext_helpers import write_manifest

from host import ExtensionManager


async def test_the_extension_is_told_its_grants_in_describe(manager: ExtensionManager, tmp_path: Path) -> None:
    manifest = write_manifest(
        tmp_path, "grants", "grants_ext.py",
        permissions={"workspace": "read", "context": {"read": "all", "write": ["grants.notes"]},
                     "session": {"metadata": True}, "turnConfig": ["system", "maxSteps"]},
        hooks={"beforeToolCall": {"decisions": True, "phase": "mutate", "mode": "shadow"}},
    )
    await manager.load(manifest)
    assert await manager.execute_tool("grants_granted", {}) == {
        "workspace": "read", "messages": "none", "context_read": ["all"], "context_write": ["grants.notes"],
        "send_message": False, "session_metadata": True, "network": [], "turn_config": ["system", "maxSteps"],
        "decisions": True, "host_bridge": True, "tool_phase": "mutate", "shadow_hooks": ["beforeToolCall"],
    }


async def test_an_extension_granted_nothing_is_told_so(manager: ExtensionManager, tmp_path: Path) -> None:
    await manager.load(write_manifest(tmp_path, "grants", "grants_ext.py"))
    granted = await manager.execute_tool("grants_granted", {})
    assert (granted["workspace"], granted["host_bridge"], granted["decisions"]) == ("none", False, False)
    assert (granted["tool_phase"], granted["shadow_hooks"]) == ("", [])
    assert granted["turn_config"][:3] == ["system", "activeTools", "toolChoice"]  # the default: the scalars
