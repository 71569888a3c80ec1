"""Awaited hook calls of one connection share one expiry timer (host/extensions/_extension_client.py): a call with a
short deadline still times out on time while an earlier call with a long one is pending."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from fault_helpers import mode

from host import ExtensionManager, ToolCallSnapshot, TraceEvent

SNAP = ToolCallSnapshot(tool_name="echo", tool_call_id="c1", input={}, step_number=0)


async def test_a_short_deadline_expires_on_time_behind_a_long_pending_call(tmp_path: Path) -> None:
    path = mode(tmp_path, "hang_hook", hooks={"beforeToolCall": {"decisions": True, "timeoutMs": 20000}})
    events: list[TraceEvent] = []
    async with ExtensionManager(sandbox="off") as mgr:
        await mgr.load(path)
        mgr.add_trace_listener(events.append)
        long_call = asyncio.ensure_future(mgr.before_tool_call(SNAP))
        await asyncio.sleep(0.2)  # the long call is out: the connection's timer is armed for its 20 s
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        decision = await mgr.before_tool_call(SNAP, deadline=t0 + 0.3)
        waited = loop.time() - t0
        assert decision is None  # failed open
        assert waited < 5, f"waited {waited:.1f} s for a call bounded to 0.3 s"
        assert not long_call.done()  # the long call still waits for its own deadline
        long_call.cancel()
    failed = [e for e in events if e.hook == "beforeToolCall"]
    assert [e.outcome for e in failed] == ["failed_open"]
    # the wait is what was left of the 300 ms when the call started (the call starts a moment after t0)
    found = re.search(r"no reply within (\d+) ms \(bounded by the turn's remaining time\)", failed[0].detail)
    assert found is not None, failed[0].detail
    assert 250 <= int(found.group(1)) <= 300
