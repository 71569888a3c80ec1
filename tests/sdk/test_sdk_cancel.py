"""The SDK's frame loop stops an awaited hook the host gave up on (a `cancel` frame naming it): the async handler's
task is cancelled, no reply is sent, and the extension's log says so with the hook's name. In process, no socket:
the same through a real host and turn is tests/agent/test_agent_guards.py."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from extension_sdk import Extension
from extension_sdk._extension_server import ExtensionServicer
from extension_sdk.proto import extension_pb2 as pb

DEADLINE_MS = 1_796_290_000_123  # 2026-12-03T09:26:40.123Z


def call_frame(fid: int) -> pb.HostFrame:
    return pb.HostFrame(id=fid, before_tool_call=pb.BeforeToolCallRequest(
        context=pb.CallContext(session_id="s", request_id="r1", deadline_unix_ms=DEADLINE_MS),
        snapshot=pb.ToolCallSnapshot(tool_name="echo", tool_call_id="c1", input_json="{}"), want_decision=True))


async def serve_then_cancel(ext: Extension) -> list[Any]:
    """Send an awaited beforeToolCall (id 7), then a cancel naming it; what the extension sent back."""

    async def frames() -> AsyncIterator[pb.HostFrame]:
        yield call_frame(7)
        await asyncio.sleep(0.05)
        yield pb.HostFrame(cancel=pb.CancelCall(id=7))

    out: asyncio.Queue[pb.ExtensionFrame | None] = asyncio.Queue()
    with ThreadPoolExecutor(1) as pool:
        await ExtensionServicer(ext, None, lambda grace: None, pool)._read_frames(frames(), out)
    return [out.get_nowait() for _ in range(out.qsize())]


async def test_a_cancelled_async_hook_stops_at_its_await_and_sends_no_reply(caplog: pytest.LogCaptureFixture) -> None:
    ext = Extension("c", "1.0.0")
    after_await: list[bool] = []

    @ext.hook("beforeToolCall")
    async def slow(snapshot: dict[str, Any]) -> None:
        await asyncio.sleep(0.3)
        after_await.append(True)

    caplog.set_level(logging.WARNING, logger="extension_sdk")
    assert await serve_then_cancel(ext) == [None]  # the stream's end, and no reply for frame 7
    await asyncio.sleep(0.35)
    assert after_await == []
    assert [r.getMessage() for r in caplog.records if r.name == "extension_sdk"] == [
        "beforeToolCall handler cancelled: the host gave up on it (deadline 2026-12-03T09:26:40.123Z, request 'r1')"]


async def test_a_cancelled_sync_hook_is_logged_as_running_on_and_sends_no_reply(
        caplog: pytest.LogCaptureFixture) -> None:
    ext = Extension("c", "1.0.0")

    @ext.hook("beforeToolCall")
    def slow(snapshot: dict[str, Any]) -> dict[str, Any]:
        time.sleep(0.2)
        return {"action": "block", "reason": "too late"}

    caplog.set_level(logging.WARNING, logger="extension_sdk")
    assert await serve_then_cancel(ext) == [None]
    (message,) = [r.getMessage() for r in caplog.records if r.name == "extension_sdk"]
    assert message.endswith("; a sync handler's thread cannot be stopped: it runs on, its answer is discarded")
