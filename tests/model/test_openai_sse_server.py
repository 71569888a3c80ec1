"""litellm's OpenAI provider against the OpenAI-compatible SSE test server."""

from __future__ import annotations

import json
import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
import pytest
from fixtures.openai_sse_server import OpenAISSEServer

litellm.suppress_debug_info = True


async def stream(base_url: str, messages: list[dict[str, Any]], **kwargs: Any) -> list[Any]:
    response = await litellm.acompletion(
        model="openai/gpt-x", api_base=base_url, api_key="test", messages=messages, stream=True, **kwargs
    )
    return [chunk async for chunk in response]


def text_of(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


async def test_litellm_streams_text_from_the_server() -> None:
    async with OpenAISSEServer() as base_url:
        chunks = await stream(base_url, [{"role": "user", "content": "hello over http"}])
    assert text_of(chunks) == "echo: hello over http"
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) == 4


async def test_server_records_request_bodies() -> None:
    server = OpenAISSEServer()
    async with server as base_url:
        await stream(base_url, [{"role": "user", "content": "x"}], temperature=0.25)
    assert server.requests[0]["temperature"] == 0.25
    assert server.requests[0]["stream"] is True
    assert server.requests[0]["messages"][-1]["content"] == "x"


async def test_litellm_streams_tool_calls_from_the_server() -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    async with OpenAISSEServer() as base_url:
        chunks = await stream(base_url, [{"role": "user", "content": '/tool lookup {"q": 1}'}], tools=tools)
    message = litellm.stream_chunk_builder(chunks).choices[0].message
    assert [(tc.id, tc.function.name, json.loads(tc.function.arguments)) for tc in message.tool_calls] == [
        ("call_1", "lookup", {"q": 1})
    ]


async def test_server_answers_tool_results() -> None:
    messages = [
        {"role": "user", "content": "/tool lookup {}"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
    ]
    async with OpenAISSEServer() as base_url:
        chunks = await stream(base_url, messages)
    assert text_of(chunks) == "Tool results: lookup -> 42."


async def test_usage_chunk_is_sent_when_requested() -> None:
    async with OpenAISSEServer() as base_url:
        chunks = await stream(
            base_url, [{"role": "user", "content": "a b"}], stream_options={"include_usage": True}
        )
    usages = [c.usage for c in chunks if getattr(c, "usage", None) is not None]
    assert usages[-1].completion_tokens == 3


async def test_context_overflow_400_becomes_context_window_exceeded_error() -> None:
    async with OpenAISSEServer() as base_url:
        with pytest.raises(litellm.ContextWindowExceededError):
            await stream(base_url, [{"role": "user", "content": "/error context_overflow"}])


async def test_rate_limit_429_becomes_rate_limit_error() -> None:
    async with OpenAISSEServer() as base_url:
        with pytest.raises(litellm.RateLimitError):
            await stream(base_url, [{"role": "user", "content": "/error rate_limit"}], max_retries=0)
