"""The HostBridge: started lazily for extensions whose manifest grants bridge permissions."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from typing import Any

import pytest
from ext_helpers import write_manifest

from host import CallContext, ExtensionManager, StepSnapshot, ToolCallSnapshot


class Services:
    """A host app's session, as the HostBridge sees it."""

    workspace_root = None

    def __init__(self, last: str = "hi from the host") -> None:
        self.last = last

    async def bridge_get_messages(self, limit: int) -> list[dict[str, Any]]:
        return [{"role": "user", "content": self.last}][:limit]

    async def bridge_get_context(self, label: str) -> str | None:
        return None

    async def bridge_set_context(self, label: str, content: str, *, extension: str) -> None:
        return None

    async def bridge_send_message(self, text: str, role: str) -> str:
        return "m1"

    async def bridge_session_info(self) -> dict[str, Any]:
        return {"sessionId": "s1"}


async def test_extension_without_bridge_permissions_gets_no_host_address(
    manager: ExtensionManager, tools_manifest: Path
) -> None:
    await manager.load(tools_manifest)
    env = await manager.execute_tool("test_tools_environ", {})
    assert "HOOKWIRE_HOST_ADDRESS" not in env


@pytest.mark.skipif(importlib.util.find_spec("host.extensions._bridge_server") is None, reason="host/extensions/_bridge_server.py has not landed yet")
async def test_extension_with_messages_permission_reads_messages_over_the_bridge(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    manager.register_session("s1", Services())  # before the bridge exists: registered when it starts
    await manager.load(write_manifest(tmp_path, "bridged", "bridge_ext.py", permissions={"messages": "read"}))
    out = await manager.execute_tool("bridged_messages", {}, context=CallContext(session_id="s1"))
    assert out == [{"role": "user", "content": "hi from the host"}]


async def test_an_observer_awaiting_the_host_gets_its_answer_while_the_frame_loop_waits_for_it(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    # The observer runs inside the extension's in-order frame loop, which is busy with it until the host answers:
    # something else must read that answer off the Connect stream, or the loop (and the flush) would wait forever.
    manager.register_session("s1", Services("hi from the host"))
    await manager.load(write_manifest(tmp_path, "bridged", "bridge_ext.py", permissions={"messages": "read"}))
    ctx = CallContext(session_id="s1", request_id="r1")
    for step in range(3):
        manager.on_step_finish(StepSnapshot(step_number=step, finish_reason="stop"), ctx)
        await manager.flush(ctx)
    out = await manager.execute_tool("bridged_observed_steps", {}, context=ctx)
    assert out == ["step 0: hi from the host", "step 1: hi from the host", "step 2: hi from the host"]


async def test_a_decider_awaiting_the_host_decides_on_its_answer(manager: ExtensionManager, tmp_path: Path) -> None:
    manager.register_session("s1", Services("no search today"))
    await manager.load(write_manifest(tmp_path, "bridged", "bridge_ext.py", permissions={"messages": "read"},
                                      hooks={"beforeToolCall": {"decisions": True}}))
    ctx = CallContext(session_id="s1", request_id="r1")
    blocked = await manager.before_tool_call(ToolCallSnapshot(tool_name="search", tool_call_id="c1", input={}), ctx)
    allowed = await manager.before_tool_call(ToolCallSnapshot(tool_name="fetch", tool_call_id="c2", input={}), ctx)
    assert blocked is not None and blocked.action == "block"
    assert blocked.reason == "the host's last message says: no search today"
    assert allowed is None


async def test_hooks_observers_and_tools_awaiting_the_host_at_once_all_get_their_answers(
    manager: ExtensionManager, tmp_path: Path
) -> None:
    # Bridge calls from an observer (the frame loop busy), from hooks and from tools (their own tasks), in flight
    # together on one stream: every answer reaches its caller, and the frames keep their order.
    manager.register_session("s1", Services("no search today"))
    await manager.load(write_manifest(tmp_path, "bridged", "bridge_ext.py", permissions={"messages": "read"},
                                      hooks={"beforeToolCall": {"decisions": True}}))
    ctx = CallContext(session_id="s1", request_id="r1")
    calls = []
    for i in range(20):
        manager.on_step_finish(StepSnapshot(step_number=i, finish_reason="stop"), ctx)
        manager.send_observations()
        calls.append(manager.before_tool_call(ToolCallSnapshot(tool_name="search", tool_call_id=f"c{i}", input={}),
                                              ctx))
        calls.append(manager.execute_tool("bridged_messages", {}, context=ctx))
    results = await asyncio.gather(*calls)
    await manager.flush(ctx)
    decisions, reads = results[0::2], results[1::2]
    assert [d.action if d is not None else None for d in decisions] == ["block"] * 20
    assert reads == [[{"role": "user", "content": "no search today"}]] * 20
    out = await manager.execute_tool("bridged_observed_steps", {}, context=ctx)
    assert out == [f"step {i}: no search today" for i in range(20)]
