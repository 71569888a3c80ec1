"""TurnConfig as current Think names it: `instructions`, `repairToolCall`, and the agent-level send_reasoning."""

from __future__ import annotations

from typing import Any

from agent_helpers import Recorder, requests

from host import ToolCallRepairContext, tool


def tool_part(result: Any) -> dict[str, Any]:
    return next(p for p in result.message["parts"] if p.get("toolCallId"))


async def test_instructions_become_the_system_prompt_sent_to_the_model() -> None:
    class Instructing(Recorder):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return {"instructions": "Answer in French."}

    async with Instructing() as agent:
        await agent.chat("hi")
    assert requests()[0]["messages"][0] == {"role": "system", "content": "Answer in French."}


async def test_instructions_win_over_system_when_both_are_set() -> None:
    class Both(Recorder):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return {"system": "old name", "instructions": "new name"}

    async with Both() as agent:
        await agent.chat("hi")
    assert requests()[0]["messages"][0]["content"] == "new name"


async def test_send_reasoning_false_as_a_class_attribute_keeps_reasoning_out_of_the_message() -> None:
    class Quiet(Recorder):
        send_reasoning = False

    async with Quiet() as agent:
        result = await agent.chat("/reason think hard\nanswer")
        stored = await agent.messages()
    assert [p["type"] for p in result.message["parts"]] == ["step-start", "text"]
    assert not any(p["type"] == "reasoning" for p in stored[-1]["parts"])
    assert ("on_chunk", "reasoning-delta") in agent.events  # still streamed to on_chunk, as with TurnConfig


async def test_turn_config_send_reasoning_overrides_the_agent_default() -> None:
    class QuietButThisTurn(Recorder):
        send_reasoning = False

        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return {"sendReasoning": True}

    async with QuietButThisTurn() as agent:
        result = await agent.chat("/reason think hard\nanswer")
    assert {"type": "reasoning", "text": "think hard"} in result.message["parts"]


async def test_repair_tool_call_can_redirect_a_failing_call_to_another_tool() -> None:
    seen: list[ToolCallRepairContext] = []

    @tool(description="Shouts", parameters={"type": "object", "properties": {"text": {"type": "string"}},
                                            "required": ["text"]})
    def shout(args):  # type: ignore[no-untyped-def]
        return args["text"].upper()

    def repair(ctx: ToolCallRepairContext) -> dict[str, Any] | None:
        seen.append(ctx)
        return {"toolName": "shout", "input": '{"text": "hi"}'}

    class Repairing(Recorder):
        def get_tools(self):  # type: ignore[no-untyped-def]
            return {**super().get_tools(), "shout": shout}

        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return {"repairToolCall": repair}

    async with Repairing() as agent:
        result = await agent.chat('/tool echo {"message": "hi"}')
    assert agent.executions == []
    part = tool_part(result)
    assert (part["toolName"], part["state"], part["output"]) == ("shout", "output-available", "HI")
    [ctx] = seen
    assert (ctx.tool_name, ctx.input) == ("echo", '{"message":"hi"}')
    assert "msg" in ctx.error and sorted(ctx.tools) == ["echo", "shout"]


async def test_repair_tool_call_fixes_invalid_input_and_async_repairs_work() -> None:
    async def repair(ctx: ToolCallRepairContext) -> dict[str, Any]:
        return {"input": {"msg": "fixed"}}

    class Repairing(Recorder):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return {"repair_tool_call": repair}

    async with Repairing() as agent:
        result = await agent.chat('/tool echo {"message": "hi"}')
    assert agent.executions == [("echo", "fixed")]
    assert tool_part(result)["input"] == {"msg": "fixed"}
    assert result.message["content"] == "Tool results: echo -> pong: fixed."


async def test_repair_tool_call_returning_none_keeps_the_tool_error() -> None:
    class Giving(Recorder):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return {"repairToolCall": lambda ctx: None}

    async with Giving() as agent:
        result = await agent.chat('/tool echo {"message": "hi"}')
    assert agent.executions == []
    part = tool_part(result)
    assert part["state"] == "output-error" and "missing required property" in part["errorText"]
