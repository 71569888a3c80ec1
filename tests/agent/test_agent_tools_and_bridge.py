"""The tool decorator's schemas, and the agent's SessionServices (what the HostBridge calls)."""

from __future__ import annotations

from pathlib import Path

from agent_helpers import Recorder, requests
from pydantic import BaseModel

from host import Session, tool
from host.turn._session_bridge import AgentSessionServices


class Query(BaseModel):
    text: str
    limit: int = 10


def test_tool_schema_from_a_pydantic_model_and_the_function_gets_the_instance() -> None:
    @tool(description="search", parameters=Query)
    def search(q: Query) -> str:
        return f"{q.text}:{q.limit}"

    assert search.parameters["properties"]["text"]["type"] == "string"
    assert search.parameters["required"] == ["text"]
    assert search._call({"text": "cats"}) == "cats:10"


def test_tool_schema_from_the_signature_and_docstring() -> None:
    @tool
    def add(a: int, b: float = 1.0) -> float:
        """Adds numbers."""
        return a + b

    assert add.description == "Adds numbers."
    assert add.parameters == {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "number"}},
                              "required": ["a"]}


async def test_bridge_send_message_from_inside_a_turn_appends_for_the_next_turn_without_running_one() -> None:
    class Queuing(Recorder):
        queued: list[str] = []

        async def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            if not self.queued:
                self.queued.append(await AgentSessionServices(self).bridge_send_message("follow-up", "user"))

    async with Queuing() as agent:
        agent.queued = []
        await agent.chat("first")
        await agent.wait_idle()
        after_first = [m["content"] for m in await agent.messages()]
        turns_after_first = agent.names().count("on_chat_response")
        await agent.chat("second")
        stored = await agent.messages()
    assert after_first == ["first", "echo: first", "follow-up"] and turns_after_first == 1
    assert stored[2]["id"] == agent.queued[0]
    assert [m["content"] for m in stored] == ["first", "echo: first", "follow-up", "second", "echo: second"]
    sent = [(m["role"], m["content"]) for m in requests()[-1]["messages"] if m["role"] != "system"]
    assert sent[-2:] == [("user", "follow-up"), ("user", "second")]


async def test_bridge_messages_context_and_session_info(tmp_path: Path) -> None:
    class WithMemory(Recorder):
        def configure_session(self, session: Session) -> Session:
            return session.with_context("memory", initial="empty")

    async with WithMemory(session_id="s9", workspace=tmp_path / "ws") as agent:
        await agent.chat("hello")
        assert agent.workspace_root == (tmp_path / "ws").resolve()
        services = AgentSessionServices(agent)
        assert await services.bridge_get_context("memory") == "empty"
        await services.bridge_set_context("memory", "likes tea", extension="notes")
        assert await services.bridge_get_context("memory") == "likes tea"
        assert await agent.get_context("memory") == "likes tea"
        last = await services.bridge_get_messages(1)
        info = await services.bridge_session_info()
    assert last[0]["role"] == "assistant" and last[0]["content"] == "echo: hello"
    assert info["sessionId"] == "s9" and info["messageCount"] == 2 and info["modelId"] == "hookwire/scripted"


async def test_a_tool_declared_with_a_schema_and_one_parameter_gets_the_input_dict() -> None:
    @tool(description="Echo text back", parameters={"type": "object", "properties": {"text": {"type": "string"}}})
    def echo(args):  # type: ignore[no-untyped-def]
        return args["text"].upper()

    class WithEcho(Recorder):
        def get_tools(self):  # type: ignore[no-untyped-def]
            return {"echo": echo}

    async with WithEcho() as agent:
        result = await agent.chat('/tool echo {"text": "hi"}')
    outputs = [p.get("output") for p in result.message["parts"] if p.get("type") == "tool-echo"]
    assert (result.status, outputs) == ("completed", ["HI"])


def test_a_tool_whose_signature_cannot_receive_the_input_is_refused_when_declared() -> None:
    import pytest

    with pytest.raises(TypeError) as info:
        @tool(parameters={"type": "object", "properties": {"text": {"type": "string"}}})
        def broken(a, b):  # type: ignore[no-untyped-def]
            return a

    assert str(info.value) == ("tool 'broken': the function's parameters (a, b) cannot receive the input: take one "
                               "parameter for the input dict (def broken(args)), or one keyword parameter per "
                               "property (text)")


async def test_bridge_semantics_as_think_missing_file_none_limit_zero_empty_delete_true_then_false(
        tmp_path: Path) -> None:
    import yaml

    fixture = Path(__file__).parent / "fixtures" / "bridge_probe_ext.py"
    manifest = tmp_path / "probe.yaml"
    manifest.write_text(yaml.safe_dump({
        "name": "probe-ext", "version": "1.0.0", "command": ["python", str(fixture)],
        "permissions": {"workspace": "read-write", "messages": "read"},
    }))
    async with Recorder(extensions=[manifest], workspace=tmp_path / "ws", sandbox="off") as agent:
        await agent.chat("hello")
        result = await agent.chat("/tool probe_ext_probe {}")
    part = next(p for p in result.message["parts"] if p.get("toolCallId"))
    assert part["state"] == "output-available", part
    assert part["output"] == {
        "missing": None, "limitZero": [], "limitNegative": [], "lastOne": ["user"],
        "all": ["user", "assistant", "user"], "deleteFirst": True, "deleteAgain": False,
    }
    assert not (tmp_path / "ws" / "doomed.txt").exists()
