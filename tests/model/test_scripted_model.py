"""The embedded model ``hookwire/scripted``, driven through real ``litellm.acompletion``."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
import pytest
from litellm.exceptions import MidStreamFallbackError

from host import SCRIPTED_MODEL, register_scripted_model
from host.turn import _scripted_model

register_scripted_model()
litellm.suppress_debug_info = True

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
    for name in ("a", "b", "search")
]


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


async def stream(messages: list[dict[str, Any]], **kwargs: Any) -> list[Any]:
    response = await litellm.acompletion(model=SCRIPTED_MODEL, messages=messages, stream=True, **kwargs)
    return [chunk async for chunk in response]


def text_of(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def finish_of(chunks: list[Any]) -> str | None:
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    return reasons[-1] if reasons else None


def tool_calls_of(chunks: list[Any]) -> list[dict[str, Any]]:
    message = litellm.stream_chunk_builder(chunks).choices[0].message
    return [
        {"id": tc.id, "name": tc.function.name, "arguments": json.loads(tc.function.arguments)}
        for tc in message.tool_calls or []
    ]


def after_tools(script: str, rounds: list[list[tuple[str, str, Any]]]) -> list[dict[str, Any]]:
    """A transcript: the user script, then per round an assistant tool-call message and its tool results."""
    messages: list[dict[str, Any]] = user(script)
    n = 0
    for round_ in rounds:
        calls = []
        results = []
        for name, _args, result in round_:
            n += 1
            calls.append({"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": "{}"}})
            results.append({"role": "tool", "tool_call_id": f"call_{n}", "name": name, "content": json.dumps(result)})
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages.extend(results)
    return messages


# --------------------------------------------------------------------------- text


async def test_plain_text_is_echoed() -> None:
    chunks = await stream(user("hello there world"))
    assert text_of(chunks) == "echo: hello there world"
    assert finish_of(chunks) == "stop"


async def test_text_streams_one_word_per_chunk() -> None:
    chunks = await stream(user("one two three"))
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert pieces == ["echo: ", "one ", "two ", "three"]


async def test_usage_arrives_in_final_chunk_with_include_usage() -> None:
    chunks = await stream(user("one two three"), stream_options={"include_usage": True})
    usages = [getattr(c, "usage", None) for c in chunks if getattr(c, "usage", None) is not None]
    assert usages, "no chunk carried usage"
    usage = usages[-1]
    assert usage.completion_tokens == 4  # "echo: " "one " "two " "three"
    assert usage.prompt_tokens == 3
    assert usage.total_tokens == 7


async def test_non_streaming_completion_returns_the_same_answer() -> None:
    response = await litellm.acompletion(model=SCRIPTED_MODEL, messages=user("hi you"))
    assert response.choices[0].message.content == "echo: hi you"
    assert response.choices[0].finish_reason == "stop"
    assert response.usage.completion_tokens == 3


async def test_content_parts_are_read_as_text() -> None:
    chunks = await stream([{"role": "user", "content": [{"type": "text", "text": "parts work"}]}])
    assert text_of(chunks) == "echo: parts work"


async def test_model_reads_the_last_user_message() -> None:
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "echo: first"},
        {"role": "user", "content": "second"},
    ]
    assert text_of(await stream(messages)) == "echo: second"


# --------------------------------------------------------------------------- tool calls


async def test_tool_line_makes_a_streamed_tool_call() -> None:
    chunks = await stream(user('/tool search {"q": "cats"}'), tools=TOOLS)
    assert tool_calls_of(chunks) == [{"id": "call_1", "name": "search", "arguments": {"q": "cats"}}]
    assert finish_of(chunks) == "tool_calls"


async def test_several_tool_lines_are_parallel_calls_with_sequential_ids() -> None:
    chunks = await stream(user('/tool a {"x": 1}\n/tool b {}'), tools=TOOLS)
    calls = tool_calls_of(chunks)
    assert [(c["id"], c["name"], c["arguments"]) for c in calls] == [("call_1", "a", {"x": 1}), ("call_2", "b", {})]


async def test_tool_call_arguments_stream_in_several_deltas() -> None:
    chunks = await stream(user('/tool a {"long": "argument value"}'), tools=TOOLS)
    deltas = [c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert len(deltas) >= 2


async def test_next_block_is_played_after_one_tool_round() -> None:
    script = "/tool a {}\n/next\n/tool b {}"
    chunks = await stream(after_tools(script, [[("a", "{}", 7)]]), tools=TOOLS)
    assert [(c["id"], c["name"]) for c in tool_calls_of(chunks)] == [("call_2", "b")]


async def test_after_last_block_model_answers_naming_each_result() -> None:
    script = "/tool a {}\n/next\n/tool b {}"
    chunks = await stream(after_tools(script, [[("a", "{}", 7)], [("b", "{}", "hi")]]), tools=TOOLS)
    assert text_of(chunks) == 'Tool results: a -> 7; b -> "hi".'
    assert finish_of(chunks) == "stop"


async def test_answer_adds_no_second_period_after_a_result_that_ends_a_sentence() -> None:
    messages = after_tools("/tool a {}", [[("a", "{}", None)]])
    messages[-1]["content"] = "blocked. Ask the user."
    chunks = await stream(messages, tools=TOOLS)
    assert text_of(chunks) == "Tool results: a -> blocked. Ask the user."
    chunks = await stream(after_tools("/tool a {}", [[("a", "{}", 7)]]), tools=TOOLS)
    assert text_of(chunks) == "Tool results: a -> 7."


async def test_tool_calls_work_without_streaming() -> None:
    response = await litellm.acompletion(model=SCRIPTED_MODEL, messages=user("/tool a {}"), tools=TOOLS)
    message = response.choices[0].message
    assert [tc.function.name for tc in message.tool_calls] == ["a"]
    assert response.choices[0].finish_reason == "tool_calls"


async def test_tool_not_in_request_is_not_called() -> None:
    chunks = await stream(user("/tool nope {}"), tools=TOOLS)
    assert tool_calls_of(chunks) == []
    assert "cannot call nope" in text_of(chunks)


async def test_no_tools_in_request_means_no_tool_call() -> None:
    chunks = await stream(user("/tool a {}"))
    assert tool_calls_of(chunks) == []
    assert "cannot call a" in text_of(chunks)


async def test_tool_choice_none_never_calls_tools() -> None:
    chunks = await stream(user("/tool a {}\nplease"), tools=TOOLS, tool_choice="none")
    assert tool_calls_of(chunks) == []
    assert text_of(chunks) == "echo: please"


async def test_forced_tool_choice_calls_that_tool() -> None:
    chunks = await stream(user("just chat"), tools=TOOLS, tool_choice={"type": "function", "function": {"name": "b"}})
    assert [(c["name"], c["arguments"]) for c in tool_calls_of(chunks)] == [("b", {})]


async def test_forced_tool_choice_keeps_scripted_arguments() -> None:
    chunks = await stream(
        user('/tool a {}\n/tool b {"k": 2}'), tools=TOOLS, tool_choice={"type": "function", "function": {"name": "b"}}
    )
    assert [(c["name"], c["arguments"]) for c in tool_calls_of(chunks)] == [("b", {"k": 2})]


async def test_malformed_tool_arguments_raise_a_clear_error() -> None:
    with pytest.raises(Exception, match="arguments of tool 'a' are not JSON"):
        await stream(user("/tool a {oops"), tools=TOOLS)


# --------------------------------------------------------------------------- errors, stalls, chunks, reasoning


async def test_context_overflow_raises_context_window_exceeded_after_tokens() -> None:
    received: list[Any] = []
    with pytest.raises(litellm.ContextWindowExceededError):
        response = await litellm.acompletion(
            model=SCRIPTED_MODEL, messages=user("/error context_overflow\nsome words here"), stream=True
        )
        async for chunk in response:
            received.append(chunk)
    assert text_of(received) == "echo: some "


async def test_rate_limit_reaches_caller_wrapped_in_mid_stream_fallback_error() -> None:
    with pytest.raises(MidStreamFallbackError) as info:
        await stream(user("/error rate_limit"))
    assert isinstance(info.value.original_exception, litellm.RateLimitError)


async def test_error_without_streaming_raises_directly() -> None:
    with pytest.raises(litellm.ContextWindowExceededError):
        await litellm.acompletion(model=SCRIPTED_MODEL, messages=user("/error context_overflow"))


async def test_error_in_a_later_block_fires_after_the_tool_round() -> None:
    script = "/tool a {}\n/next\n/error rate_limit"
    first = await stream(user(script), tools=TOOLS)
    assert tool_calls_of(first)
    with pytest.raises(MidStreamFallbackError):
        await stream(after_tools(script, [[("a", "{}", 1)]]), tools=TOOLS)


async def test_stall_pauses_after_the_first_token() -> None:
    response = await litellm.acompletion(model=SCRIPTED_MODEL, messages=user("/stall 5000\nslow reply"), stream=True)
    iterator = response.__aiter__()
    first = await iterator.__anext__()
    assert first.choices[0].delta.content == "echo: "
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(iterator.__anext__(), timeout=0.5)


async def test_stall_then_continues() -> None:
    chunks = await stream(user("/stall 50\nslow reply"))
    assert text_of(chunks) == "echo: slow reply"


async def test_chunks_streams_exactly_n_text_chunks() -> None:
    chunks = await stream(user("/chunks 25"))
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) == 25


async def test_reason_streams_reasoning_before_the_answer() -> None:
    chunks = await stream(user("/reason think hard\nanswer"))
    reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices)
    assert reasoning == "think hard"
    assert text_of(chunks) == "echo: answer"
    first_reason = next(i for i, c in enumerate(chunks) if getattr(c.choices[0].delta, "reasoning_content", None))
    first_text = next(i for i, c in enumerate(chunks) if c.choices and c.choices[0].delta.content)
    assert first_reason < first_text


async def test_reason_without_streaming_sets_reasoning_content() -> None:
    response = await litellm.acompletion(model=SCRIPTED_MODEL, messages=user("/reason because\nok"))
    assert response.choices[0].message.reasoning_content == "because"


# --------------------------------------------------------------------------- honoured params


async def test_max_tokens_truncates_with_finish_reason_length() -> None:
    chunks = await stream(user("a b c d e f"), max_tokens=3)
    assert text_of(chunks) == "echo: a b "
    assert finish_of(chunks) == "length"


async def test_stop_sequence_cuts_the_answer() -> None:
    chunks = await stream(user("alpha beta STOP gamma"), stop=["STOP"])
    assert text_of(chunks) == "echo: alpha beta "


async def test_register_is_idempotent() -> None:
    register_scripted_model()
    register_scripted_model()
    assert sum(1 for item in litellm.custom_provider_map if item["provider"] == "hookwire") == 1


async def test_tool_result_without_name_is_named_from_its_call() -> None:
    messages = after_tools("/tool a {}", [[("a", "{}", 5)]])
    del messages[-1]["name"]
    chunks = await stream(messages, tools=TOOLS)
    assert text_of(chunks) == "Tool results: a -> 5."


async def test_tool_choice_required_calls_the_first_tool_when_script_has_none() -> None:
    chunks = await stream(user("just chat"), tools=TOOLS, tool_choice="required")
    assert [(c["name"], c["arguments"]) for c in tool_calls_of(chunks)] == [("a", {})]


async def test_last_requests_records_the_stream_flag_and_messages() -> None:
    await stream(user("recorded"))
    entry = _scripted_model.last_requests[-1]
    assert entry["stream"] is True
    assert entry["messages"] == user("recorded")
