"""The turn's own paths around its model calls (issue 16 item 2): a tool batch awaited in the turn's task (abort and
caller cancel still end it), chunks made only when someone observes them, and the history read with the incoming
messages' store round trip (a proactive compaction reads it again)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_helpers import Lookup

from host import Agent, Session, tool
from host.turn import _scripted_model

TWO_STEPS = '/tool lookup {"key": "alpha"}\n/next\ndone'


class Waiting(Agent):
    """One async tool, `wait`, that blocks until cancelled and records what happened to it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.started = asyncio.Event()
        self.tool_outcome: list[str] = []
        self.responses: list[str] = []

    def get_tools(self) -> dict[str, Any]:
        @tool(description="Waits", parameters={"type": "object", "properties": {}})
        async def wait() -> str:
            self.started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.tool_outcome.append("cancelled")
                raise
            return "woke"

        return {"wait": wait}

    def on_chat_response(self, result):  # type: ignore[no-untyped-def]
        self.responses.append(result.status)


async def test_aborting_while_a_tool_runs_ends_the_turn_as_aborted_and_cancels_the_tool() -> None:
    signal = asyncio.Event()
    async with Waiting() as agent:
        turn = asyncio.create_task(agent.chat("/tool wait {}", signal=signal))
        await asyncio.wait_for(agent.started.wait(), 10)
        signal.set()
        result = await asyncio.wait_for(turn, 10)
    assert result.status == "aborted"
    assert agent.tool_outcome == ["cancelled"]
    assert agent.responses == ["aborted"]


async def test_cancelling_the_caller_while_a_tool_runs_raises_cancelled_and_cancels_the_tool() -> None:
    async with Waiting() as agent:
        turn = asyncio.create_task(agent.chat("/tool wait {}"))
        await asyncio.wait_for(agent.started.wait(), 10)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(turn, 10)
    assert agent.tool_outcome == ["cancelled"]
    assert agent.responses == ["aborted"]


async def test_an_on_chunk_set_on_the_instance_sees_the_turns_chunks() -> None:
    seen: list[tuple[str, str | None]] = []
    async with Lookup() as agent:
        agent.on_chunk = lambda ctx: seen.append((ctx.chunk.type, ctx.chunk.text))  # type: ignore[method-assign]
        result = await agent.chat(TWO_STEPS)
    assert result.status == "completed"
    assert [t for t, _ in seen if t in ("tool-call", "tool-result")] == ["tool-call", "tool-result"]
    assert "".join(text or "" for t, text in seen if t == "text-delta") == "echo: done"


async def test_without_a_chunk_listener_the_stored_message_is_the_one_a_listener_gets() -> None:
    class Listening(Lookup):
        def on_chunk(self, ctx):  # type: ignore[no-untyped-def]
            return None

    def shape(message: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in part.items() if k != "toolCallId"} for part in message["parts"]]

    stored = []
    for cls in (Lookup, Listening):
        async with cls() as agent:
            result = await agent.chat(TWO_STEPS)
            assert result.status == "completed"
            stored.append((await agent.messages())[-1])
    assert shape(stored[0]) == shape(stored[1])
    assert stored[0]["content"] == stored[1]["content"] == "echo: done"
    assert [p.get("output") for p in stored[0]["parts"] if p["type"].startswith("tool-")] == ["ALPHA"]


async def test_a_chunk_transform_rewrites_the_text_without_an_on_chunk() -> None:
    class Shouting(Agent):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            def upper(chunk: Any) -> Any:
                if chunk.type == "text-delta":
                    return {"type": "text-delta", "text": chunk.text.upper()}
                return chunk

            return {"experimental_transform": upper}

    async with Shouting() as agent:
        result = await agent.chat("hi")
    assert result.status == "completed"
    assert result.message is not None and result.message["content"] == "ECHO: HI"


async def test_a_proactive_compaction_before_the_turn_is_the_history_the_model_gets() -> None:
    class Compacting(Agent):
        def configure_session(self, session: Session) -> Session:
            # keep only the newest message (the turn's own user message) once the transcript holds earlier turns
            return session.on_compaction(lambda messages: messages[-1:]).compact_after(1)

    async with Compacting() as agent:
        await agent.chat("first")
        await agent.chat("second")
        stored = await agent.messages()
    sent = [(m["role"], m["content"]) for m in _scripted_model.last_requests[-1]["messages"]]
    assert sent[1:] == [("user", "second")]
    assert [(m["role"], m["content"]) for m in stored] == [("user", "second"), ("assistant", "echo: second")]
