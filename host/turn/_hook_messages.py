"""The turn's model messages in a hook's context: not validated message by message, copied only for code that reads
them (issue 19 item 5: the host's own work per turn independent of the history's length).

A context model (TurnContext, PrepareStepContext, ToolCallContext, ToolCallResultContext, ToolCallRepairContext)
declares `messages: list[dict[str, Any]]`; validating that field rebuilds every message dict in Python (~0.3 µs per
message per context: at 500 messages ~0.15 ms, eight contexts in a 3-step turn with two tool calls). The messages are
the host's own dicts, so they are set on the built context instead:

- `sharing(ctx, messages)`: the loop's contexts carry a new list of the loop's own dicts (a C-level list copy);
- `for_hook(agent, name, ctx)`: before the Agent subclass's hook `name` gets the context, its messages become
  copies (each message dict and its tool calls: changing one in place changes nothing the turn sends) — only when
  the subclass (or the instance) overrides the hook: Agent's own hooks do nothing and read nothing;
- `copied(ctx, messages)`: copies at once, for a context that always goes to outside code
  (TurnConfig.repair_tool_call);
- `owned(ctx, messages)`: a list that is already the caller's own (TurnContext's history, fresh from
  ModelMessageMemo), handed over as it is.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from ._ui_messages import fresh_tool_calls

M = TypeVar("M", bound=BaseModel)


def _copies(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = list(map(dict.copy, messages))
    for m in out:
        if m.get("tool_calls"):
            fresh_tool_calls(m)
    return out


def sharing(ctx: M, messages: list[dict[str, Any]]) -> M:
    """`ctx` carrying a new list of `messages`' own dicts (copy them before outside code sees them: `for_hook`)."""
    ctx.messages = list(messages)  # type: ignore[attr-defined]
    return ctx


def copied(ctx: M, messages: list[dict[str, Any]]) -> M:
    """`ctx` carrying copies of `messages`: each dict (as validating the field made) and its tool calls."""
    ctx.messages = _copies(messages)  # type: ignore[attr-defined]
    return ctx


def owned(ctx: M, messages: list[dict[str, Any]]) -> M:
    """`ctx` carrying `messages` itself: a list of dicts nobody else holds (the caller hands them over)."""
    ctx.messages = messages  # type: ignore[attr-defined]
    return ctx


def overrides(agent: Any, name: str) -> bool:
    """Whether `agent`'s hook `name` is not Agent's own (which does nothing)."""
    from ._agent import Agent

    return getattr(getattr(agent, name), "__func__", None) is not getattr(Agent, name)


def for_hook(agent: Any, name: str, ctx: M) -> M:
    """`ctx` as the subclass's hook `name` may see it: its messages copied when that hook is overridden."""
    if overrides(agent, name):
        copied(ctx, ctx.messages)  # type: ignore[attr-defined]
    return ctx
