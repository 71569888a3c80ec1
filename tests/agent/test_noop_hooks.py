"""Agent's own no-op hooks are not called at all (host/turn/_agent.py noop_hooks, checked once per turn); a hook the
subclass overrides, or one set on the instance or patched on the class, still is."""

from __future__ import annotations

from typing import Any

from agent_helpers import Lookup

from host import Agent
from host.turn._agent import noop_hooks

ALL = {"before_turn", "before_step", "before_tool_call", "after_tool_call", "on_step_finish", "on_chunk",
       "on_chat_response"}


def test_a_plain_agent_has_only_no_op_hooks_and_an_override_is_not_one() -> None:
    class Stepping(Agent):
        def before_step(self, ctx: Any) -> None:
            return None

    assert noop_hooks(Agent()) == ALL
    assert noop_hooks(Stepping()) == ALL - {"before_step"}


async def test_hooks_set_on_the_instance_are_called_in_the_turn() -> None:
    seen: list[str] = []
    async with Lookup() as agent:
        agent.before_step = lambda ctx: seen.append(f"step {ctx.step_number}")  # type: ignore[method-assign]
        agent.after_tool_call = lambda ctx: seen.append(  # type: ignore[method-assign]
            f"result {ctx.tool_name} {ctx.output}")
        agent.on_chat_response = lambda result: seen.append(f"response {result.status}")  # type: ignore[method-assign]
        await agent.chat('/tool lookup {"key": "alpha"}')
    assert seen == ["step 0", "result lookup ALPHA", "step 1", "response completed"]


async def test_a_hook_patched_on_the_agent_class_is_called() -> None:
    seen: list[int] = []
    original = Agent.on_step_finish
    Agent.on_step_finish = lambda self, ctx: seen.append(ctx.step_number)  # type: ignore[method-assign]
    try:
        async with Agent() as agent:
            await agent.chat("hello")
    finally:
        Agent.on_step_finish = original  # type: ignore[method-assign]
    assert seen == [0]
