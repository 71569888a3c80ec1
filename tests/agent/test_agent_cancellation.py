"""Cancellation from every side: the caller's task (asyncio cancel), cancel_chat, abort_all_requests."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agent_helpers import Recorder


class Streaming(Recorder):
    """Sets self.streaming once the first text chunk arrived."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.streaming = asyncio.Event()
        self.responses: list[Any] = []

    def on_chunk(self, ctx):  # type: ignore[no-untyped-def]
        if ctx.chunk.type == "text-delta":
            self.streaming.set()

    def on_chat_response(self, result):  # type: ignore[no-untyped-def]
        self.responses.append(result)


def roles_and_text(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in messages]


async def test_cancelling_the_awaiting_task_ends_the_turn_as_aborted_and_keeps_the_partial() -> None:
    async with Streaming() as agent:
        task = asyncio.create_task(agent.chat("hello\n/stall 10000"))
        await asyncio.wait_for(agent.streaming.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        stored = await agent.messages()
        [response] = agent.responses
    assert roles_and_text(stored) == [("user", "hello\n/stall 10000"), ("assistant", "echo: ")]
    assert response.status == "aborted" and response.message["id"] == stored[-1]["id"]


async def test_after_a_cancelled_turn_the_next_turn_runs_and_roles_alternate() -> None:
    async with Streaming() as agent:
        task = asyncio.create_task(agent.chat("first\n/stall 10000"))
        await asyncio.wait_for(agent.streaming.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        result = await agent.chat("second")
        stored = await agent.messages()
    assert result.status == "completed"
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]
    assert stored[-1]["content"] == "echo: second"


async def test_a_turn_aborted_before_any_output_still_leaves_an_assistant_message() -> None:
    signal = asyncio.Event()
    signal.set()
    async with Streaming() as agent:
        result = await agent.chat("never answered", signal=signal)
        stored = await agent.messages()
    assert result.status == "aborted"
    assert roles_and_text(stored) == [("user", "never answered"), ("assistant", "")]


async def test_abort_all_requests_aborts_the_running_and_the_queued_turn() -> None:
    async with Streaming() as agent:
        first = asyncio.create_task(agent.chat("one\n/stall 10000"))
        second = asyncio.create_task(agent.chat("two\n/stall 10000"))
        await asyncio.wait_for(agent.streaming.wait(), 10)
        assert agent.abort_all_requests() == 2
        results = await asyncio.wait_for(asyncio.gather(first, second), 10)
        assert agent.abort_all_requests() == 0
    assert [r.status for r in results] == ["aborted", "aborted"]
    assert [r.status for r in agent.responses] == ["aborted", "aborted"]
