"""before_tool_call decisions and after_tool_call, on the scripted model through litellm streaming."""

from __future__ import annotations

from typing import Any

from agent_helpers import Recorder

from host import ToolCallDecision, tool

CALL = '/tool echo {"msg": "hi"}'


class Deciding(Recorder):
    def __init__(self, decision: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.decision = decision
        self.results: list[Any] = []

    def before_tool_call(self, ctx):  # type: ignore[no-untyped-def]
        if callable(self.decision):
            return self.decision(ctx)
        return self.decision

    def after_tool_call(self, ctx):  # type: ignore[no-untyped-def]
        self.results.append(ctx)


def tool_part(result: Any) -> dict[str, Any]:
    return next(p for p in result.message["parts"] if p.get("toolCallId"))


async def test_no_decision_runs_the_tool_with_the_models_input() -> None:
    async with Deciding(None) as agent:
        result = await agent.chat(CALL)
    assert agent.executions == [("echo", "hi")]
    assert tool_part(result)["output"] == "pong: hi"
    assert result.message["content"] == "Tool results: echo -> pong: hi."


async def test_allow_with_input_executes_the_substitute_but_after_tool_call_sees_the_models_input() -> None:
    async with Deciding({"action": "allow", "input": {"msg": "changed"}}) as agent:
        result = await agent.chat(CALL)
    assert agent.executions == [("echo", "changed")]
    after = agent.results[0]
    assert after.input == {"msg": "hi"}
    assert after.output == "pong: changed"
    assert tool_part(result)["output"] == "pong: changed"


async def test_substituted_input_is_not_revalidated() -> None:
    async with Deciding(ToolCallDecision(action="allow", input={"msg": 42})) as agent:
        await agent.chat(CALL)
    assert agent.executions == [("echo", 42)]


async def test_block_without_reason_gives_the_default_reason_and_skips_execute() -> None:
    async with Deciding({"action": "block"}) as agent:
        result = await agent.chat(CALL)
    assert agent.executions == []
    expected = 'Tool "echo" was blocked by beforeToolCall.'
    assert tool_part(result)["output"] == expected
    assert agent.results[0].success is True and agent.results[0].output == expected


async def test_block_with_reason_shows_the_reason_to_the_model() -> None:
    async with Deciding({"action": "block", "reason": "read-only"}) as agent:
        result = await agent.chat(CALL)
    assert agent.executions == []
    assert result.message["content"] == "Tool results: echo -> read-only."


async def test_substitute_skips_execute_and_the_model_sees_the_output() -> None:
    async with Deciding({"action": "substitute", "output": {"cached": True}}) as agent:
        result = await agent.chat(CALL)
    assert agent.executions == []
    assert tool_part(result)["output"] == {"cached": True}
    assert agent.results[0].success is True and agent.results[0].output == {"cached": True}


async def test_raising_before_tool_call_becomes_a_tool_error() -> None:
    def explode(ctx: Any) -> None:
        raise RuntimeError("policy engine down")

    async with Deciding(explode) as agent:
        result = await agent.chat(CALL)
    assert result.status == "completed"
    assert agent.executions == []
    after = agent.results[0]
    assert after.success is False and "policy engine down" in str(after.error)
    assert tool_part(result)["state"] == "output-error"


async def test_after_tool_call_fires_with_a_numeric_duration_for_a_failing_tool() -> None:
    @tool(description="fails")
    def broken() -> str:
        raise ValueError("nope")

    class Failing(Deciding):
        def get_tools(self):  # type: ignore[no-untyped-def]
            return {"broken": broken}

    async with Failing(None) as agent:
        result = await agent.chat("/tool broken {}")
    after = agent.results[0]
    assert after.success is False and isinstance(after.error, ValueError)
    assert isinstance(after.duration_ms, float) and after.duration_ms >= 0
    assert result.message["content"] == "Tool results: broken -> nope."


async def test_streaming_tool_sends_preliminary_results_to_on_chunk() -> None:
    @tool(description="counts", parameters={"type": "object", "properties": {"n": {"type": "integer"}}})
    async def count(n: int):  # type: ignore[no-untyped-def]
        for i in range(1, n + 1):
            yield i

    class Streaming(Deciding):
        chunks: list[Any]

        def get_tools(self):  # type: ignore[no-untyped-def]
            return {"count": count}

        def on_chunk(self, ctx):  # type: ignore[no-untyped-def]
            if ctx.chunk.type == "tool-result":
                self.chunks.append((ctx.chunk.output, ctx.chunk.preliminary))

    async with Streaming(None) as agent:
        agent.chunks = []
        result = await agent.chat('/tool count {"n": 3}')
    assert agent.chunks == [(1, True), (2, True), (3, True), (3, None)]
    assert tool_part(result)["output"] == 3


async def test_blocking_a_streaming_tool_surfaces_one_preliminary_chunk() -> None:
    @tool(description="counts")
    async def count(n: int):  # type: ignore[no-untyped-def]
        yield n

    class Streaming(Deciding):
        chunks: list[Any]

        def get_tools(self):  # type: ignore[no-untyped-def]
            return {"count": count}

        def on_chunk(self, ctx):  # type: ignore[no-untyped-def]
            if ctx.chunk.type == "tool-result":
                self.chunks.append((ctx.chunk.output, ctx.chunk.preliminary))

    async with Streaming({"action": "block", "reason": "no"}) as agent:
        agent.chunks = []
        await agent.chat('/tool count {"n": 3}')
    assert agent.chunks == [("no", True), ("no", None)]


async def test_invalid_model_input_is_a_tool_error_without_execute() -> None:
    async with Deciding(None) as agent:
        result = await agent.chat('/tool echo {"other": 1}')
    assert agent.executions == []
    assert tool_part(result)["state"] == "output-error"
    assert "missing required property" in tool_part(result)["errorText"]


async def test_async_tool_and_parallel_calls_in_one_step() -> None:
    @tool(description="adds")
    async def add(a: int, b: int) -> int:
        return a + b

    class Parallel(Deciding):
        def get_tools(self):  # type: ignore[no-untyped-def]
            return {"add": add}

    async with Parallel(None) as agent:
        result = await agent.chat('/tool add {"a": 1, "b": 2}\n/tool add {"a": 3, "b": 4}')
    assert result.message["content"] == "Tool results: add -> 3; add -> 7."
    assert sorted(r.output for r in agent.results) == [3, 7]


async def test_an_async_tool_returning_an_async_iterable_gives_its_last_value() -> None:
    async def countdown(n: int):  # type: ignore[no-untyped-def]
        for i in range(n, 0, -1):
            yield f"t-{i}"

    @tool(description="counts down")
    async def count(n: int):  # type: ignore[no-untyped-def]
        return countdown(n)

    class Counting(Deciding):
        def get_tools(self):  # type: ignore[no-untyped-def]
            return {"count": count}

    async with Counting(None) as agent:
        result = await agent.chat('/tool count {"n": 3}')
    assert tool_part(result)["output"] == "t-1"
    assert agent.results[0].output == "t-1"
    assert result.message["content"] == "Tool results: count -> t-1."
