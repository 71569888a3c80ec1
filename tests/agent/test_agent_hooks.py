"""Hook order, per-step hooks, and TurnConfig/StepConfig reaching the model (asserted on what litellm sent)."""

from __future__ import annotations

from typing import Any

from agent_helpers import Recorder, requests

from host import Session, StepConfig, TurnConfig

TWO_TOOLS = '/tool echo {"msg": "a"}\n/next\n/tool echo {"msg": "b"}'


async def test_two_tool_turn_fires_hooks_in_the_reference_order() -> None:
    class Ordered(Recorder):
        def configure_session(self, session: Session) -> Session:
            self.events.append(("configure_session", None))
            return session

    async with Ordered() as agent:
        await agent.chat(TWO_TOOLS)
    step_with_tool = ["before_step", "on_chunk", "before_tool_call", "on_chunk", "after_tool_call", "on_step_finish"]
    assert agent.names() == [
        "configure_session",
        "before_turn",
        *step_with_tool,
        *step_with_tool,
        "before_step", "on_chunk", "on_step_finish",  # the final answer
        "on_chat_response",
    ]


async def test_configure_session_runs_once_per_start_not_per_turn() -> None:
    class Counting(Recorder):
        def configure_session(self, session: Session) -> Session:
            self.events.append(("configure_session", None))
            return session

    async with Counting() as agent:
        await agent.chat("one")
        await agent.chat("two")
    assert agent.names().count("configure_session") == 1


async def test_before_step_sees_step_numbers_and_previous_steps() -> None:
    class Steps(Recorder):
        seen: list[tuple[int, list[int], int]] = []

        def before_step(self, ctx):  # type: ignore[no-untyped-def]
            self.seen.append((ctx.step_number, [s.step_number for s in ctx.steps],
                              sum(len(s.tool_results) for s in ctx.steps)))

    async with Steps() as agent:
        agent.seen = []
        await agent.chat(TWO_TOOLS)
    assert agent.seen == [(0, [], 0), (1, [0], 1), (2, [0, 1], 2)]


async def test_on_step_finish_reports_usage_and_finish_reasons() -> None:
    class Usage(Recorder):
        steps: list[Any] = []

        def on_step_finish(self, ctx):  # type: ignore[no-untyped-def]
            self.steps.append(ctx)

    async with Usage() as agent:
        agent.steps = []
        await agent.chat('/tool echo {"msg": "hi"}')
    first, last = agent.steps
    assert first.finish_reason == "tool-calls" and last.finish_reason == "stop"
    assert [c.tool_name for c in first.tool_calls] == ["echo"]
    assert first.tool_results[0].output == "pong: hi"
    assert last.text == "Tool results: echo -> pong: hi."
    for step in agent.steps:
        u = step.usage
        assert u.input_tokens > 0 and u.output_tokens > 0 and u.total_tokens == u.input_tokens + u.output_tokens


async def test_before_turn_model_settings_reach_litellm() -> None:
    class Tuned(Recorder):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return TurnConfig(
                system="be terse", temperature=0.3, top_p=0.8, top_k=5, seed=7, stop_sequences=["zzz"],
                max_output_tokens=50, presence_penalty=0.1, frequency_penalty=0.2, headers={"x-trace": "1"},
                provider_options={"hookwire": {"trace_level": 3}}, tool_choice="none", max_retries=0, timeout=30_000,
            )

    async with Tuned() as agent:
        await agent.chat("hello")
    req = requests()[-1]
    assert req["messages"][0] == {"role": "system", "content": "be terse"}
    assert (req["temperature"], req["top_p"], req["top_k"], req["seed"]) == (0.3, 0.8, 5, 7)
    assert req["stop"] == ["zzz"] and req["max_tokens"] == 50
    assert (req["presence_penalty"], req["frequency_penalty"]) == (0.1, 0.2)
    assert req["tool_choice"] == "none" and req["optional_params"]["trace_level"] == 3
    assert req["litellm_params"]["max_retries"] == 0
    assert req["headers"].get("x-trace") == "1"
    assert req["timeout"] == 30.0


async def test_before_turn_dict_with_camel_case_and_active_tools() -> None:
    class Limited(Recorder):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            assert "echo" in ctx.tools
            return {"activeTools": [], "system": ctx.system + " (extra)"}

    async with Limited() as agent:
        result = await agent.chat('/tool echo {"msg": "x"}')
    req = requests()[-1]
    assert "tools" not in req
    assert req["messages"][0]["content"].endswith("(extra)")
    assert agent.executions == [] and "cannot call echo" in result.message["content"]


async def test_max_steps_bounds_the_loop() -> None:
    class OneStep(Recorder):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return {"maxSteps": 1}

    async with OneStep() as agent:
        result = await agent.chat('/tool echo {"msg": "a"}')
    assert len(requests()) == 1
    assert agent.executions == [("echo", "a")]
    assert result.status == "completed"


async def test_stop_when_is_additive_to_max_steps() -> None:
    class StopAfterTool(Recorder):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return TurnConfig(stop_when=lambda steps: any(s.tool_calls for s in steps))

    async with StopAfterTool() as agent:
        await agent.chat(TWO_TOOLS)
    assert len(requests()) == 1 and agent.executions == [("echo", "a")]


async def test_before_step_overrides_apply_to_that_step_only() -> None:
    class PerStep(Recorder):
        def before_step(self, ctx):  # type: ignore[no-untyped-def]
            if ctx.step_number == 1:
                return StepConfig(system="step-one system", tool_choice="none",
                                  messages=ctx.messages[-2:], model="hookwire/scripted-b")
            return None

    async with PerStep() as agent:
        await agent.chat('/tool echo {"msg": "a"}')
    first, second = requests()
    assert first["model"] == "scripted" and "tools" in first
    assert second["model"] == "scripted-b"
    assert second["messages"][0] == {"role": "system", "content": "step-one system"}
    assert second["tool_choice"] == "none"
    assert [m["role"] for m in second["messages"][1:]] == ["assistant", "tool"]


async def test_before_turn_model_override() -> None:
    class Switch(Recorder):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            assert ctx.model == "hookwire/scripted"
            return {"model": "hookwire/cheap"}

    async with Switch() as agent:
        await agent.chat("hi")
    assert requests()[-1]["model"] == "cheap"


async def test_context_blocks_build_the_system_prompt() -> None:
    class Blocks(Recorder):
        def configure_session(self, session: Session) -> Session:
            return session.with_context("soul", provider=lambda: "You are kind.").with_context(
                "memory", description="Learned facts", initial="likes tea")

    async with Blocks() as agent:
        await agent.chat("hi")
        await agent.set_context("memory", "likes coffee")
        await agent.chat("again")
    first, second = requests()
    assert first["messages"][0]["content"] == "## soul\nYou are kind.\n\n## memory\nLearned facts\nlikes tea"
    assert second["messages"][0]["content"].endswith("likes coffee")


async def test_hooks_fire_on_every_entry_path() -> None:
    expected = ["before_turn", "before_step", "on_chunk", "on_step_finish", "on_chat_response"]
    async with Recorder() as agent:
        await agent.chat("a")
        assert agent.names() == expected
        agent.events.clear()
        await agent.save_messages([{"role": "user", "content": "b"}])
        assert agent.names() == expected
        agent.events.clear()
        sid = await agent.submit_messages("c")
        await agent.wait_for_submission(sid)
        assert agent.names() == expected
        agent.events.clear()
        result = await agent.continue_last_turn()
        assert result.continuation is True and agent.names() == expected
        assert agent.events[0] == ("before_turn", True)


async def test_reasoning_is_streamed_and_persisted_unless_send_reasoning_is_off() -> None:
    class Reasoning(Recorder):
        send = True

        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return {"sendReasoning": self.send}

    async with Reasoning() as agent:
        shown = await agent.chat("/reason think hard\nanswer")
        agent.send = False
        hidden = await agent.chat("/reason think hard\nanswer")
    assert {"type": "reasoning", "text": "think hard"} in shown.message["parts"]
    assert not any(p["type"] == "reasoning" for p in hidden.message["parts"])
    assert ("on_chunk", "reasoning-delta") in agent.events


async def test_experimental_transform_rewrites_chunks_before_on_chunk_and_persistence() -> None:
    from host import Chunk

    class Shouting(Recorder):
        texts: list[str] = []

        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            def upper(chunk: Chunk) -> Chunk:
                if chunk.type == "text-delta" and chunk.text:
                    return chunk.model_copy(update={"text": chunk.text.upper()})
                return chunk

            return TurnConfig(experimental_transform=[upper])

        def on_chunk(self, ctx):  # type: ignore[no-untyped-def]
            if ctx.chunk.type == "text-delta":
                self.texts.append(ctx.chunk.text)

    async with Shouting() as agent:
        agent.texts = []
        result = await agent.chat("quiet")
    assert result.message["content"] == "ECHO: QUIET" and "".join(agent.texts) == "ECHO: QUIET"


async def test_tool_choice_for_a_named_tool_is_sent_in_openai_form() -> None:
    class Forced(Recorder):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return {"toolChoice": {"type": "tool", "toolName": "echo"}, "maxSteps": 1}

    async with Forced() as agent:
        result = await agent.chat("anything")
    assert requests()[0]["tool_choice"] == {"type": "function", "function": {"name": "echo"}}
    part = next(p for p in result.message["parts"] if p.get("toolCallId"))
    assert part["toolName"] == "echo" and "missing required property" in part["errorText"]  # forced with {}
