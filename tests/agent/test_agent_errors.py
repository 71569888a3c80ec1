"""Turn errors: stages, partial persistence, context-overflow recovery, the stall watchdog, nested turns."""

from __future__ import annotations

import asyncio
from typing import Any

import litellm
import pytest
from litellm.exceptions import MidStreamFallbackError
from agent_helpers import Recorder, requests

from host import (
    ChatErrorContext,
    NestedTurnError,
    Session,
    TurnConfig,
    default_context_overflow_classifier,
)


class Failing(Recorder):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.errors: list[tuple[Any, ChatErrorContext]] = []
        self.persisted_at_error: list[dict[str, Any]] = []

    async def on_chat_error(self, error, ctx=None):  # type: ignore[no-untyped-def]
        self.errors.append((error, ctx))
        self.persisted_at_error = await self.messages()
        return error


class Recovering(Failing):
    """Overflow recovery on; the compaction keeps only a summary (or nothing, or keeps growing)."""

    mode = "summary"
    attempts = 1

    classify_chat_error = default_context_overflow_classifier

    def configure_session(self, session: Session) -> Session:
        self.compactions = 0

        def compact(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
            self.compactions += 1
            if self.mode == "noop":
                return messages
            if self.mode == "grow":  # changes the transcript but keeps the overflowing message last
                return [{"role": "user", "content": f"summary {self.compactions}"}, messages[-1]]
            return [{"role": "user", "content": "summary of earlier talk"}]

        return session.on_compaction(compact).with_context_overflow_recovery(max_attempts=self.attempts)


async def test_stream_error_persists_the_partial_message_before_on_chat_error() -> None:
    async with Failing() as agent:
        result = await agent.chat("/error rate_limit")
    assert result.status == "error" and "rate limit" in (result.error or "")
    error, ctx = agent.errors[0]
    assert ctx.stage == "stream" and ctx.messages_persisted is True and ctx.classification is None
    assert agent.persisted_at_error[-1]["role"] == "assistant"
    assert agent.persisted_at_error[-1]["content"] == "echo: /error "
    assert result.message is not None and result.message["content"] == "echo: /error "


async def test_on_chat_error_can_replace_the_error() -> None:
    class Friendly(Recorder):
        def on_chat_error(self, error, ctx=None):  # type: ignore[no-untyped-def]
            return RuntimeError("Something went wrong. Please try again.")

    async with Friendly() as agent:
        result = await agent.chat("/error rate_limit")
    assert result.error == "Something went wrong. Please try again."


async def test_before_turn_error_has_stage_turn() -> None:
    class Broken(Failing):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            raise ValueError("bad config")

    async with Broken() as agent:
        result = await agent.chat("hi")
    assert result.status == "error" and agent.errors[0][1].stage == "turn"
    assert agent.errors[0][1].messages_persisted is True


async def test_unparseable_message_has_stage_parse() -> None:
    async with Failing() as agent:
        result = await agent.chat({"role": "user"})
        assert await agent.messages() == []
    assert result.status == "error" and agent.errors[0][1].stage == "parse"
    assert agent.errors[0][1].messages_persisted is False


async def test_a_failed_turn_does_not_poison_the_next() -> None:
    async with Failing() as agent:
        first = await agent.chat("/error rate_limit")
        second = await agent.chat("hello again")
    assert first.status == "error" and second.status == "completed"
    assert second.message["content"] == "echo: hello again"


async def test_overflow_recovery_compacts_once_and_retries() -> None:
    async with Recovering() as agent:
        await agent.chat("earlier")
        requests_before = len(requests())
        result = await agent.chat("/error context_overflow")
    assert result.status == "completed"
    assert agent.compactions == 1 and len(requests()) - requests_before == 2
    assert result.message["content"] == "echo: summary of earlier talk"
    assert agent.errors == []


async def test_overflow_cancelled_while_classifying_skips_compaction_and_surfaces_the_error() -> None:
    class CancelledMidClassify(Recovering):
        def classify_chat_error(self, error, ctx=None):  # type: ignore[no-untyped-def,override]
            self.cancel_chat(ctx.request_id)
            return default_context_overflow_classifier(error, ctx)

    async with CancelledMidClassify() as agent:
        result = await agent.chat("/error context_overflow", request_id="req-overflow")
        stored = await agent.messages()
    assert agent.compactions == 0
    assert result.status == "error" and result.error and "context" in result.error.lower()
    assert agent.errors[0][1].classification == "context_overflow"
    assert [m["role"] for m in stored] == ["user", "assistant"]


async def test_overflow_recovery_disabled_by_default() -> None:
    class NoRecovery(Failing):
        classify_chat_error = default_context_overflow_classifier

        def configure_session(self, session: Session) -> Session:
            self.compactions = 0
            return session.on_compaction(lambda m: [{"role": "user", "content": "x"}])

    async with NoRecovery() as agent:
        result = await agent.chat("/error context_overflow")
    assert result.status == "error" and len(requests()) == 1
    assert agent.errors[0][1].classification is None


async def test_noop_compaction_ends_with_context_overflow_classification() -> None:
    class NoOp(Recovering):
        mode = "noop"

    async with NoOp() as agent:
        result = await agent.chat("/error context_overflow")
    assert result.status == "error" and agent.compactions == 1 and len(requests()) == 1
    assert agent.errors[0][1].classification == "context_overflow"
    assert agent.errors[0][1].stage == "stream"


async def test_overflow_retries_are_bounded() -> None:
    class Growing(Recovering):
        mode = "grow"
        attempts = 2

    async with Growing() as agent:
        result = await agent.chat("/error context_overflow")
    assert result.status == "error" and agent.compactions == 2 and len(requests()) == 3
    assert agent.errors[0][1].classification == "context_overflow"


async def test_failing_compaction_has_stage_recovery() -> None:
    class Raising(Recovering):
        def configure_session(self, session: Session) -> Session:
            def compact(messages: list[dict[str, Any]]) -> None:
                raise RuntimeError("summarizer down")

            return session.on_compaction(compact).with_context_overflow_recovery()

    async with Raising() as agent:
        result = await agent.chat("/error context_overflow")
    assert result.status == "error" and agent.errors[0][1].stage == "recovery"
    assert "summarizer down" in (result.error or "")


def test_default_classifier_recognises_wrapped_context_window_errors() -> None:
    inner = litellm.ContextWindowExceededError(message="too long", model="m", llm_provider="p")
    wrapped = MidStreamFallbackError(message="stream failed", model="m", llm_provider="p",
                                             original_exception=inner)
    assert default_context_overflow_classifier(inner) == "context_overflow"
    assert default_context_overflow_classifier(wrapped) == "context_overflow"
    assert default_context_overflow_classifier("context_length_exceeded: reduce") == "context_overflow"
    assert default_context_overflow_classifier(RuntimeError("rate limit")) is None


class Stalling(Failing):
    """A 300 ms watchdog; records each recovery it is asked about."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.recoveries: list[Any] = []

    def configure_session(self, session: Session) -> Session:
        return session.with_stream_stall_timeout(300)

    def on_chat_recovery(self, ctx):  # type: ignore[no-untyped-def]
        self.recoveries.append(ctx)


async def test_the_stall_watchdog_is_off_by_default_as_in_think() -> None:
    assert Failing.chat_stream_stall_timeout_ms == 0
    async with Failing() as agent:
        result = await agent.chat("hello\n/stall 400")
    assert result.status == "completed" and result.message["content"] == "echo: hello"


async def test_a_stalled_stream_goes_into_recovery_and_the_turn_completes() -> None:
    async with Stalling() as agent:
        result = await agent.chat("recover me\n/stall-once 5000")
        stored = await agent.messages()
    assert result.status == "completed" and result.message["content"] == "echo: recover me"
    assert [(c.kind, c.attempt, c.max_attempts) for c in agent.recoveries] == [("stream_stall", 1, 2)]
    assert "stalled" in agent.recoveries[0].error
    assert [(m["role"], m["content"]) for m in stored] == [("user", "recover me\n/stall-once 5000"),
                                                           ("assistant", "echo: recover me")]
    assert agent.errors == []


async def test_stall_recovery_is_bounded_then_the_turn_ends_with_the_stall_error() -> None:
    async with Stalling() as agent:
        result = await agent.chat("hello\n/stall 5000")
    assert result.status == "error" and "stalled" in (result.error or "")
    assert [c.attempt for c in agent.recoveries] == [1, 2]
    assert agent.errors[0][1].stage == "stream"
    assert result.message["content"] == "echo: "


async def test_on_chat_recovery_returning_false_ends_the_turn_at_the_first_stall() -> None:
    class GivingUp(Stalling):
        def on_chat_recovery(self, ctx):  # type: ignore[no-untyped-def]
            self.recoveries.append(ctx)
            return False

    async with GivingUp() as agent:
        result = await agent.chat("give up\n/stall-once 5000")
    assert result.status == "error" and len(agent.recoveries) == 1


async def test_per_turn_stall_override_disables_the_watchdog() -> None:
    class Patient(Failing):
        def configure_session(self, session: Session) -> Session:
            return session.with_stream_stall_timeout(100)

        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return TurnConfig(chat_stream_stall_timeout_ms=0)

    async with Patient() as agent:
        result = await agent.chat("hello\n/stall 400")
    assert result.status == "completed" and result.message["content"] == "echo: hello"


async def test_nested_turn_from_a_hook_is_refused() -> None:
    class Nested(Recorder):
        refused: list[str] = []

        async def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            if not self.refused:
                with pytest.raises(NestedTurnError, match="inside a running turn") as info:
                    await self.chat("inner")
                self.refused.append(str(info.value))

    async with Nested() as agent:
        agent.refused = []
        result = await agent.chat("outer")
    assert result.status == "completed" and len(agent.refused) == 1


async def test_turn_started_from_on_chat_response_is_allowed() -> None:
    class FollowUp(Recorder):
        async def on_chat_response(self, result):  # type: ignore[no-untyped-def]
            if result.message and result.message["content"] == "echo: first":
                await self.save_messages([{"role": "user", "content": "second"}])

    async with FollowUp() as agent:
        await agent.chat("first")
        texts = [m["content"] for m in await agent.messages()]
    assert texts == ["first", "echo: first", "second", "echo: second"]


async def test_proactive_guard_compacts_mid_turn_when_the_last_step_input_neared_the_limit() -> None:
    class Guarded(Recorder):
        def configure_session(self, session: Session) -> Session:
            self.compactions = 0

            def compact(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
                self.compactions += 1
                return [{"role": "user", "content": "summary"}, messages[-1]]

            return session.on_compaction(compact).with_proactive_compaction(40, threshold=0.5)

    async with Guarded() as agent:
        await agent.chat("a long first message " * 5)
        assert agent.compactions == 0
        result = await agent.chat('/tool echo {"msg": "x"}')
        stored = await agent.messages()
    assert agent.compactions == 1
    assert result.status == "completed" and result.message["content"] == "Tool results: echo -> pong: x."
    step1 = [(m["role"], m.get("content")) for m in requests()[-1]["messages"] if m["role"] != "system"]
    assert step1[:2] == [("user", "summary"), ("user", '/tool echo {"msg": "x"}')]
    assert [role for role, _ in step1[2:]] == ["assistant", "tool"]
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "summary"), ("user", '/tool echo {"msg": "x"}'), ("assistant", "Tool results: echo -> pong: x.")]


async def test_caller_cancel_while_classifying_keeps_the_partial_and_surfaces_the_error() -> None:
    classifying = asyncio.Event()

    class SlowClassifier(Recovering):
        async def classify_chat_error(self, error, ctx=None):  # type: ignore[no-untyped-def,override]
            classifying.set()
            await asyncio.sleep(30)
            return "context_overflow"

    async with SlowClassifier() as agent:
        task = asyncio.create_task(agent.chat("/error context_overflow"))
        await asyncio.wait_for(classifying.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        stored = await agent.messages()
    assert agent.compactions == 0 and len(agent.errors) == 1
    assert [m["role"] for m in stored] == ["user", "assistant"]
