"""litellm's per-call cost calculation and success logging: off for the host's model calls unless someone asked
(host/turn/_litellm_work.py). What is pinned: whether litellm's cost calculator runs, and that a host app's own
litellm callbacks still fire for every model call of a turn."""

from __future__ import annotations

import asyncio
import os
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
import pytest
from litellm.integrations.custom_logger import CustomLogger

from agent_helpers import Lookup

from host import SCRIPTED_MODEL, register_scripted_model

#: Two model calls: the tool call, then the answer.
TOOL_TURN = '/tool lookup {"key": "a"}\n/next\ndone'

_CALLBACK_LISTS = ("callbacks", "input_callback", "success_callback", "failure_callback", "service_callback",
                   "_async_input_callback", "_async_success_callback", "_async_failure_callback")


class CostSpy:
    """Counts litellm's own cost calculations (its module-level calculator, which every pricing path ends in)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = litellm.response_cost_calculator

        def spy(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(litellm, "response_cost_calculator", spy)


class SuccessLogger(CustomLogger):
    def __init__(self) -> None:
        super().__init__()
        self.models: list[str] = []
        self.done = asyncio.Event()

    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self.models.append(str(kwargs.get("model")))
        if len(self.models) >= 2:
            self.done.set()


@pytest.fixture(autouse=True)
def _clean_callbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no litellm callback registered, and leaves none behind."""
    for name in _CALLBACK_LISTS:
        monkeypatch.setattr(litellm, name, [])
    monkeypatch.delenv("HOOKWIRE_LITELLM_BOOKKEEPING", raising=False)


async def run_turn(**options: Any) -> str:
    async with Lookup(**options) as agent:
        result = await agent.chat(TOOL_TURN)
    await asyncio.sleep(0.05)  # litellm's success logging runs in a task after the stream ends
    return str(result.message["content"] if result.message else result.error)


async def test_a_turn_skips_litellms_cost_calculation_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = CostSpy(monkeypatch)
    content = await run_turn()
    assert content == "echo: done"
    assert spy.calls == 0


async def test_litellm_bookkeeping_true_prices_every_model_call(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = CostSpy(monkeypatch)
    await run_turn(litellm_bookkeeping=True)
    assert spy.calls >= 2  # at least once per model call of the turn


async def test_the_environment_variable_turns_bookkeeping_back_on(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = CostSpy(monkeypatch)
    monkeypatch.setenv("HOOKWIRE_LITELLM_BOOKKEEPING", "1")
    await run_turn()
    assert spy.calls >= 2


async def test_a_host_apps_litellm_callback_fires_for_each_model_call_of_a_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logger = SuccessLogger()
    monkeypatch.setattr(litellm, "callbacks", [logger])
    await run_turn()
    await asyncio.wait_for(logger.done.wait(), 10)
    assert logger.models == ["scripted", "scripted"]


async def test_the_host_apps_own_litellm_calls_keep_their_bookkeeping(monkeypatch: pytest.MonkeyPatch) -> None:
    await run_turn()  # the host's quiet mode is installed by now
    spy = CostSpy(monkeypatch)
    register_scripted_model()
    stream = await litellm.acompletion(model=SCRIPTED_MODEL, messages=[{"role": "user", "content": "hi"}], stream=True)
    async for _ in stream:
        pass
    await asyncio.sleep(0.05)
    assert spy.calls >= 1
