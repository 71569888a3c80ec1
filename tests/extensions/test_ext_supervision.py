"""Supervision: restart after a crash, quarantine after a crash loop, fail-fast while quarantined."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from ext_helpers import hooks_manifest, process_gone, wait_until, write_manifest

from host import ExtensionManager, ExtensionUnavailableError, ToolCallSnapshot, TurnSnapshot

FAST_RESTART = {"maxCrashes": 3, "windowSeconds": 60, "backoffMs": 50, "maxBackoffMs": 200}


def state(manager: ExtensionManager, name: str) -> str:
    return next(i.state for i in manager.extensions() if i.name == name)


async def test_extension_killed_mid_call_errors_cleanly_and_is_restarted(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    info = await manager.load(write_manifest(tmp_path, "victim", "tools_ext.py", restart=FAST_RESTART))
    call = asyncio.ensure_future(manager.execute_tool("victim_nap", {"seconds": 30}))
    await asyncio.sleep(0.3)
    assert info.pid
    os.kill(info.pid, signal.SIGKILL)
    with pytest.raises(ExtensionUnavailableError, match="'victim'"):
        await asyncio.wait_for(call, 10)
    assert await wait_until(lambda: state(manager, "victim") == "running" and manager.extensions()[0].restarts == 1)
    new = manager.extensions()[0]
    assert new.pid != info.pid and new.crashes == 1
    assert process_gone(info.pid)
    assert await manager.execute_tool("victim_add", {"a": 2, "b": 2}) == 4


async def test_crash_loop_is_quarantined_and_calls_fail_fast(manager: ExtensionManager, tmp_path: Path) -> None:
    path = hooks_manifest(tmp_path, "die_soon", restart={**FAST_RESTART, "maxCrashes": 2})
    await manager.load(path)
    assert await wait_until(lambda: state(manager, "hooks-die_soon") == "quarantined", 15)
    info = manager.extensions()[0]
    assert info.crashes == 2 and info.pid is None
    with pytest.raises(ExtensionUnavailableError, match="'hooks-die_soon' is quarantined"):
        await manager.execute_tool("hooks_die_soon_ping", {})


async def test_quarantined_fail_closed_decider_blocks(manager: ExtensionManager, tmp_path: Path) -> None:
    policy = {"beforeToolCall": {"decisions": True, "failure": "closed"}}
    path = hooks_manifest(tmp_path, "guard", restart={**FAST_RESTART, "maxCrashes": 1}, hooks=policy)
    info = await manager.load(path)
    assert info.pid
    os.kill(info.pid, signal.SIGKILL)
    assert await wait_until(lambda: state(manager, "hooks-guard") == "quarantined")
    decision = await manager.before_tool_call(ToolCallSnapshot(tool_name="ls", tool_call_id="c"))
    assert decision is not None and decision.action == "block" and decision.failed_closed
    assert "quarantined" in (decision.reason or "")


async def test_quarantined_extension_is_skipped_by_before_turn(manager: ExtensionManager, tmp_path: Path) -> None:
    info = await manager.load(write_manifest(tmp_path, "fragile", "tools_ext.py",
                                             restart={**FAST_RESTART, "maxCrashes": 1}))
    assert info.pid
    os.kill(info.pid, signal.SIGKILL)
    assert await wait_until(lambda: state(manager, "fragile") == "quarantined")
    merged = await manager.before_turn(TurnSnapshot(system="s"))
    assert merged.patch.max_steps is None
