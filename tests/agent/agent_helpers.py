"""Helpers for the turn-engine tests: a recording agent and simple tools."""

from __future__ import annotations

from typing import Any

from host import Agent, tool
from host.turn import _scripted_model


@tool(description="Echoes a message back", parameters={
    "type": "object", "properties": {"msg": {"type": "string"}}, "required": ["msg"]})
def echo(msg: str) -> str:
    return f"pong: {msg}"


class Lookup(Agent):
    """One host tool, `lookup` (the key upper-cased), and not one hook overridden."""

    def get_tools(self) -> dict[str, Any]:
        @tool(description="Looks up a key", parameters={
            "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]})
        def lookup(key: str) -> str:
            return key.upper()

        return {"lookup": lookup}


def requests() -> list[dict[str, Any]]:
    return list(_scripted_model.last_requests)


class Recorder(Agent):
    """Records every hook call as (hook, detail) in self.events."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.events: list[tuple[str, Any]] = []
        self.executions: list[Any] = []

    def get_tools(self) -> dict[str, Any]:
        executions = self.executions

        @tool(description="Echoes a message back", parameters={
            "type": "object", "properties": {"msg": {"type": "string"}}, "required": ["msg"]})
        def echo(msg: str) -> str:
            executions.append(("echo", msg))
            return f"pong: {msg}"

        return {"echo": echo}

    def before_turn(self, ctx):  # type: ignore[no-untyped-def]
        self.events.append(("before_turn", ctx.continuation))

    def before_step(self, ctx):  # type: ignore[no-untyped-def]
        self.events.append(("before_step", ctx.step_number))

    def before_tool_call(self, ctx):  # type: ignore[no-untyped-def]
        self.events.append(("before_tool_call", ctx.tool_name))

    def after_tool_call(self, ctx):  # type: ignore[no-untyped-def]
        self.events.append(("after_tool_call", ctx.tool_name))

    def on_step_finish(self, ctx):  # type: ignore[no-untyped-def]
        self.events.append(("on_step_finish", ctx.step_number))

    def on_chunk(self, ctx):  # type: ignore[no-untyped-def]
        self.events.append(("on_chunk", ctx.chunk.type))

    def on_chat_response(self, result):  # type: ignore[no-untyped-def]
        self.events.append(("on_chat_response", result.status))

    def names(self, collapse_chunks: bool = True) -> list[str]:
        out: list[str] = []
        for name, _ in self.events:
            if collapse_chunks and name == "on_chunk" and out and out[-1] == "on_chunk":
                continue
            out.append(name)
        return out
