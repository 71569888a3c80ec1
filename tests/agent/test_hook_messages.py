"""The turn's messages in the subclass's hook contexts (host/turn/_hook_messages.py): each hook sees the messages the
model is sent, and a hook that edits them in place changes neither this turn's requests nor the next turn's."""

from __future__ import annotations

from typing import Any

import pytest

from host import Agent

from agent_helpers import Recorder, requests

TOOL_TURN = '/tool echo {"msg": "a"}\n/next\ndone'


def _plain(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if v is not None}  # litellm leaves out an assistant's content None


def _sent(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [_plain(m) for m in request["messages"] if m["role"] != "system"]


async def test_each_hook_sees_the_messages_the_model_is_sent() -> None:
    seen: dict[str, list[list[dict[str, Any]]]] = {"step": [], "tool": [], "result": []}

    class Looking(Recorder):
        def before_step(self, ctx):  # type: ignore[no-untyped-def]
            seen["step"].append([_plain(m) for m in ctx.messages])

        def before_tool_call(self, ctx):  # type: ignore[no-untyped-def]
            seen["tool"].append([_plain(m) for m in ctx.messages])

        def after_tool_call(self, ctx):  # type: ignore[no-untyped-def]
            seen["result"].append([_plain(m) for m in ctx.messages])

    async with Looking() as agent:
        await agent.chat("hello")
        await agent.chat(TOOL_TURN)
    sent = [_sent(r) for r in requests()]
    assert seen["step"] == sent  # one per step: 1 in the first turn, 2 in the second
    assert seen["tool"] == seen["result"] == [sent[1]]  # the tool ran between the second turn's two steps
    assert [m["content"] for m in sent[1]] == ["hello", "echo: hello", TOOL_TURN]


def _tamper(ctx: Any) -> None:
    for m in ctx.messages:
        m["content"] = "tampered"
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = "{}"


class Tampering(Recorder):
    def before_step(self, ctx):  # type: ignore[no-untyped-def]
        _tamper(ctx)

    def before_tool_call(self, ctx):  # type: ignore[no-untyped-def]
        _tamper(ctx)

    def after_tool_call(self, ctx):  # type: ignore[no-untyped-def]
        _tamper(ctx)


class TamperingOnTheInstance(Recorder):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.before_step = self.before_tool_call = self.after_tool_call = _tamper  # type: ignore[method-assign]


@pytest.mark.parametrize("cls", [Tampering, TamperingOnTheInstance], ids=["subclass", "instance"])
async def test_a_hook_editing_its_messages_in_place_changes_no_request(cls: type[Agent]) -> None:
    async with cls() as agent:
        await agent.chat(TOOL_TURN)
        await agent.chat(TOOL_TURN)  # the history, with a tool call in it, comes back from the memo
    sent = [m for r in requests() for m in _sent(r)]
    assert len(requests()) == 4
    assert "tampered" not in [m.get("content") for m in sent]
    assert {c["function"]["arguments"] for m in sent for c in m.get("tool_calls") or []} == {'{"msg": "a"}'}
