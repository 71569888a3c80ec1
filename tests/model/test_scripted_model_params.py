"""Which request parameters reach the scripted model (a litellm CustomLLM) in this litellm version.

Each test sends one parameter through ``litellm.acompletion(stream=True)`` and reads what the model recorded in
``host.turn._scripted_model.last_requests``.
"""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
import pytest

from host import SCRIPTED_MODEL, register_scripted_model
from host.turn._scripted_model import last_requests

register_scripted_model()
litellm.suppress_debug_info = True

TOOLS = [{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {}}}}]


async def send(**kwargs: Any) -> dict[str, Any]:
    marker = f"probe {len(last_requests)} {sorted(kwargs)}"
    response = await litellm.acompletion(
        model=SCRIPTED_MODEL, messages=[{"role": "user", "content": marker}], stream=True, **kwargs
    )
    async for _ in response:
        pass
    entry = last_requests[-1]
    assert entry["messages"][-1]["content"] == marker
    return entry


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("temperature", 0.3),
        ("top_p", 0.5),
        ("top_k", 7),
        ("seed", 42),
        ("stop", ["zz"]),
        ("max_tokens", 50),
        ("presence_penalty", 0.1),
        ("frequency_penalty", 0.2),
        ("tools", TOOLS),
        ("parallel_tool_calls", False),
        ("response_format", {"type": "json_object"}),
    ],
)
async def test_openai_param_reaches_model(param: str, value: Any) -> None:
    entry = await send(**{param: value})
    assert entry[param] == value
    assert entry["optional_params"][param] == value


async def test_tool_choice_reaches_model() -> None:
    choice = {"type": "function", "function": {"name": "a"}}
    entry = await send(tools=TOOLS, tool_choice=choice)
    assert entry["tool_choice"] == choice


async def test_max_completion_tokens_arrives_as_max_tokens() -> None:
    entry = await send(max_completion_tokens=9)
    assert entry["max_tokens"] == 9


async def test_extra_headers_reach_model_as_headers() -> None:
    entry = await send(extra_headers={"X-Hookwire-Test": "1"})
    assert entry["headers"]["X-Hookwire-Test"] == "1"


async def test_extra_body_reaches_model() -> None:
    entry = await send(extra_body={"provider_flag": True})
    assert entry["extra_body"] == {"provider_flag": True}


async def test_unknown_provider_option_reaches_model_in_optional_params() -> None:
    entry = await send(hookwire_option="x")
    assert entry["optional_params"]["hookwire_option"] == "x"


async def test_metadata_reaches_model_in_litellm_params() -> None:
    entry = await send(metadata={"session": "s1"})
    assert entry["litellm_params"]["metadata"]["session"] == "s1"


async def test_timeout_reaches_model() -> None:
    entry = await send(timeout=7)
    assert entry["timeout"] == 7


async def test_stream_options_reach_model() -> None:
    entry = await send(stream_options={"include_usage": True})
    assert entry["stream_options"] == {"include_usage": True}


async def test_user_param_does_not_reach_model() -> None:
    entry = await send(user="u1")
    assert "user" not in entry["optional_params"]


async def test_reasoning_effort_is_refused_unless_allowed() -> None:
    with pytest.raises(litellm.UnsupportedParamsError):
        await send(reasoning_effort="low")


async def test_reasoning_effort_reaches_model_when_allowed() -> None:
    entry = await send(reasoning_effort="low", allowed_openai_params=["reasoning_effort"])
    assert entry["optional_params"]["reasoning_effort"] == "low"


async def test_messages_reach_model_unchanged() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    response = await litellm.acompletion(model=SCRIPTED_MODEL, messages=messages, stream=True)
    async for _ in response:
        pass
    assert last_requests[-1]["messages"] == messages
    assert last_requests[-1]["model"] == "scripted"
