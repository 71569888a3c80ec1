"""Entry paths, ordering, abort, continuation, client-side tools and durability across a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent_helpers import Lookup, Recorder, requests

from host import Agent, Tool


class ChunkSignal(Recorder):
    """Sets self.streaming once the first text chunk arrived."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.streaming = asyncio.Event()

    def on_chunk(self, ctx):  # type: ignore[no-untyped-def]
        if ctx.chunk.type == "text-delta":
            self.streaming.set()


async def test_abort_signal_keeps_the_partial_message() -> None:
    async with ChunkSignal() as agent:
        signal = asyncio.Event()
        task = asyncio.create_task(agent.chat("hello\n/stall 10000", signal=signal))
        await asyncio.wait_for(agent.streaming.wait(), 10)
        signal.set()
        result = await asyncio.wait_for(task, 10)
        stored = await agent.messages()
    assert result.status == "aborted" and result.message["content"] == "echo: "
    assert stored[-1]["id"] == result.message["id"] and stored[-1]["content"] == "echo: "
    assert agent.names()[-1] == "on_chat_response"


async def test_a_long_streamed_answer_is_persisted_piece_for_piece() -> None:
    async with Lookup() as agent:  # no on_chunk: the unobserved path writes the deltas straight into the message
        result = await agent.chat("/chunks 3000")
        stored = await agent.messages()
    expected = "".join(f"c{i} " for i in range(3000))
    assert [p for p in stored[-1]["parts"] if p["type"] == "text"] == [{"type": "text", "text": expected}]
    assert stored[-1]["content"] == result.message["content"] == expected


async def test_an_abort_mid_answer_persists_exactly_the_pieces_that_streamed() -> None:
    class AbortAfter(Agent):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.seen: list[str] = []
            self.signal = asyncio.Event()

        def on_chunk(self, ctx):  # type: ignore[no-untyped-def]
            if ctx.chunk.type == "text-delta":
                self.seen.append(ctx.chunk.text)
                if len(self.seen) == 300:
                    self.signal.set()

    async with AbortAfter() as agent:
        result = await agent.chat("/chunks 3000", signal=agent.signal)
        stored = await agent.messages()
    assert result.status == "aborted" and 300 <= len(agent.seen) < 3000
    assert stored[-1]["content"] == result.message["content"] == "".join(agent.seen)
    assert [p["text"] for p in stored[-1]["parts"] if p["type"] == "text"] == ["".join(agent.seen)]


async def test_another_task_can_abort_a_stream_that_never_waits() -> None:
    # the scripted model's chunks are all ready, so the stream never suspends: the turn loop must still let the
    # loop run, or the task that aborts (a UI's stop button) would only run once the answer was complete
    async with ChunkSignal() as agent:
        signal = asyncio.Event()

        async def stop_when_streaming() -> None:
            await agent.streaming.wait()
            signal.set()

        stopper = asyncio.create_task(stop_when_streaming())
        result = await agent.chat("/chunks 5000", signal=signal)
        await stopper
        stored = await agent.messages()
    whole = "".join(f"c{i} " for i in range(5000))
    kept = result.message["content"]
    assert result.status == "aborted" and stored[-1]["content"] == kept
    assert 0 < len(kept) < len(whole) and whole.startswith(kept)  # what streamed, in order, and far from all of it


async def test_cancel_chat_aborts_by_request_id() -> None:
    async with ChunkSignal() as agent:
        task = asyncio.create_task(agent.chat("hello\n/stall 10000", request_id="req-1"))
        await asyncio.wait_for(agent.streaming.wait(), 10)
        assert agent.cancel_chat("req-1") is True
        result = await asyncio.wait_for(task, 10)
    assert result.status == "aborted" and result.request_id == "req-1"
    assert agent.cancel_chat("req-1") is False


async def test_continue_last_turn_without_an_assistant_message_is_skipped() -> None:
    async with Recorder() as agent:
        result = await agent.continue_last_turn()
    assert result.status == "skipped" and result.continuation is True and result.request_id == ""
    assert agent.events == [] and requests() == []


async def test_continue_last_turn_saves_a_new_assistant_message() -> None:
    async with Recorder() as agent:
        first = await agent.chat("hi")
        cont = await agent.continue_last_turn()
        stored = await agent.messages()
    assert cont.status == "completed" and cont.continuation is True and cont.request_id.startswith("req")
    assert cont.message["id"] != first.message["id"]
    assert [(m["role"], m["id"]) for m in stored] == [
        ("user", stored[0]["id"]), ("assistant", first.message["id"]), ("assistant", cont.message["id"])]
    assert stored[1]["content"] == "echo: hi" and stored[1]["parts"].count({"type": "step-start"}) == 1
    assert stored[2]["content"] == cont.message["content"] != ""


async def test_three_rapid_turns_run_one_at_a_time_in_order() -> None:
    async with Recorder() as agent:
        results = await asyncio.gather(agent.chat("one\n/stall 150"), agent.chat("two"), agent.chat("three"))
        stored = [m["content"] for m in await agent.messages()]
    assert [r.message["content"] for r in results] == ["echo: one", "echo: two", "echo: three"]
    assert stored == ["one\n/stall 150", "echo: one", "two", "echo: two", "three", "echo: three"]
    starts = [e for e in agent.names() if e in ("before_turn", "on_chat_response")]
    assert starts == ["before_turn", "on_chat_response"] * 3


async def test_client_tool_result_auto_continues_the_turn() -> None:
    class Client(Recorder):
        def get_tools(self):  # type: ignore[no-untyped-def]
            return {"ask_user": Tool(description="Ask the user", parameters={"type": "object"})}

    async with Client() as agent:
        first = await agent.chat('/tool ask_user {"q": "name?"}')
        part = next(p for p in first.message["parts"] if p.get("toolCallId"))
        assert part["state"] == "input-available" and len(requests()) == 1
        agent.events.clear()
        cont = await agent.add_tool_result(part["toolCallId"], "Alice")
    assert cont is not None and cont.continuation is True
    assert cont.message["id"] == first.message["id"]
    assert cont.message["content"] == "Tool results: ask_user -> Alice."
    assert agent.events[0] == ("before_turn", True) and agent.names()[-1] == "on_chat_response"


async def test_store_file_keeps_the_transcript_across_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    async with Recorder(session_id="s1", store=db) as agent:
        await agent.chat("remember me")
    async with Recorder(session_id="s1", store=db) as agent:
        stored = [m["content"] for m in await agent.messages()]
        await agent.chat("again")
    assert stored == ["remember me", "echo: remember me"]
    assert "remember me" in str(requests()[-1]["messages"])


async def test_pending_submission_is_finished_after_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    agent = Recorder(session_id="s1", store=db)
    await agent.start()
    await agent.chat("before")
    blocker = asyncio.create_task(agent.chat("slow\n/stall 10000"))
    await asyncio.sleep(0.2)
    sid = await agent.submit_messages("durable work")
    await asyncio.sleep(0.1)
    blocker.cancel()
    await asyncio.gather(blocker, return_exceptions=True)
    await agent.close()  # the "crash": the submission never ran to completion

    async with Recorder(session_id="s1", store=db) as revived:
        result = await revived.wait_for_submission(sid)
        stored = [m["content"] for m in await revived.messages()]
        pending = await revived.store.pending_submissions()
    assert result.status == "completed" and result.message["content"] == "echo: durable work"
    assert stored[:2] == ["before", "echo: before"]
    assert stored.count("durable work") == 1 and stored[-1] == "echo: durable work"
    assert pending == []


async def test_a_submission_interrupted_mid_turn_by_close_is_answered_in_full_on_resume(tmp_path: Path) -> None:
    db = tmp_path / "agent.db"
    agent = ChunkSignal(session_id="s1", store=db)
    await agent.start()
    sid = await agent.submit_messages("interrupted work\n/stall-once 10000")
    await asyncio.wait_for(agent.streaming.wait(), 10)  # mid-turn: "echo: " streamed, then the model stalls
    await agent.close()

    async with Recorder(session_id="s1", store=db) as revived:
        result = await asyncio.wait_for(revived.wait_for_submission(sid), 10)
        stored = [(m["role"], m["content"]) for m in await revived.messages()]
    assert result.status == "completed" and result.message["content"] == "echo: interrupted work"
    assert stored == [("user", "interrupted work\n/stall-once 10000"), ("assistant", "echo: interrupted work")]


async def test_save_messages_function_form_gets_the_transcript_and_appends_what_it_returns() -> None:
    seen: list[list[str]] = []

    def add_question(current):  # type: ignore[no-untyped-def]
        seen.append([m["content"] for m in current])
        return [*current, {"role": "user", "content": "and now?"}]

    async with Recorder() as agent:
        await agent.chat("hi")
        result = await agent.save_messages(add_question)
        stored = await agent.messages()
    assert seen == [["hi", "echo: hi"]]
    assert result.status == "completed"
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "hi"), ("assistant", "echo: hi"), ("user", "and now?"), ("assistant", "echo: and now?")]


async def test_save_messages_async_function_that_drops_messages_replaces_the_transcript() -> None:
    async def keep_last_question(current):  # type: ignore[no-untyped-def]
        return [{"role": "user", "content": "fresh start"}]

    async with Recorder() as agent:
        await agent.chat("hi")
        await agent.save_messages(keep_last_question)
        stored = await agent.messages()
    assert [(m["role"], m["content"]) for m in stored] == [("user", "fresh start"), ("assistant", "echo: fresh start")]
