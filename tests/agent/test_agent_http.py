"""The real HTTP path: litellm's OpenAI provider against the OpenAI-compatible SSE test server."""

from __future__ import annotations

from typing import Any

from agent_helpers import Recorder
from fixtures.openai_sse_server import OpenAISSEServer

from host import Session, default_context_overflow_classifier


class OverHttp(Recorder):
    model = "openai/gpt-x"
    base_url = ""

    def before_turn(self, ctx):  # type: ignore[no-untyped-def]
        super().before_turn(ctx)
        return {"providerOptions": {"openai": {"api_base": self.base_url, "api_key": "test"}}, "temperature": 0.5}


async def test_turn_with_a_tool_over_http() -> None:
    server = OpenAISSEServer()
    async with server as base_url:
        async with OverHttp() as agent:
            agent.base_url = base_url
            result = await agent.chat('/tool echo {"msg": "net"}')
    assert result.status == "completed"
    assert result.message["content"] == "Tool results: echo -> pong: net."
    assert agent.executions == [("echo", "net")]
    assert len(server.requests) == 2 and server.requests[0]["temperature"] == 0.5
    assert server.requests[0]["tools"][0]["function"]["name"] == "echo"


async def test_http_context_overflow_is_classified_by_the_default_classifier() -> None:
    class Overflowing(OverHttp):
        classify_chat_error = default_context_overflow_classifier
        seen: list[Any] = []

        def configure_session(self, session: Session) -> Session:
            return session.on_compaction(lambda m: None).with_context_overflow_recovery()

        def on_chat_error(self, error, ctx=None):  # type: ignore[no-untyped-def]
            self.seen.append(ctx)
            return error

    async with OpenAISSEServer() as base_url:
        async with Overflowing() as agent:
            agent.base_url, agent.seen = base_url, []
            result = await agent.chat("/error context_overflow")
    assert result.status == "error" and agent.seen[0].classification == "context_overflow"
