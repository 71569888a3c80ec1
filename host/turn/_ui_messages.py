"""Our persisted message shape (Think's UIMessage) and its conversion to litellm/OpenAI messages.

A message is ``{"id", "role", "parts": [...], "createdAt"}``. Parts:
``{"type": "text", "text"}``, ``{"type": "reasoning", "text"}``, ``{"type": "step-start"}`` and tool parts
``{"type": "tool-<name>" | "dynamic-tool", "toolName", "toolCallId", "state", "input", "output"?, "errorText"?}``
with state ``input-available`` (a client-side call waiting for its result), ``output-available`` or
``output-error``. Each message also carries ``content`` (its text), for readers that only want text.
"""

from __future__ import annotations

import bisect
import json
import operator
import time
import uuid
from typing import Any

TOOL_STATES = ("input-available", "output-available", "output-error")


class MessageParseError(ValueError):
    """An incoming message could not be understood."""


def new_id(prefix: str = "msg") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def text_of(message: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message.get("parts", []) if p.get("type") == "text")


def is_tool_part(part: dict[str, Any]) -> bool:
    t = part.get("type", "")
    return isinstance(t, str) and (t.startswith("tool-") or t == "dynamic-tool")


def tool_part(
    *, tool_name: str, tool_call_id: str, input: Any, dynamic: bool = False, state: str = "input-available"
) -> dict[str, Any]:
    return {
        "type": "dynamic-tool" if dynamic else f"tool-{tool_name}",
        "toolName": tool_name,
        "toolCallId": tool_call_id,
        "state": state,
        "input": input,
    }


def finalize(message: dict[str, Any]) -> dict[str, Any]:
    """Refresh the derived ``content`` field."""
    message["content"] = text_of(message)
    return message


def normalize_incoming(message: Any, default_role: str = "user") -> dict[str, Any]:
    """A string, a UI message ({role, parts}) or an OpenAI-style message ({role, content}) -> a UI message."""
    if isinstance(message, str):
        return finalize({"id": new_id(), "role": default_role, "parts": [{"type": "text", "text": message}],
                         "createdAt": time.time()})
    if not isinstance(message, dict):
        raise MessageParseError(f"a message must be a str or a dict, got {type(message).__name__}")
    role = message.get("role", default_role)
    if role not in ("user", "assistant", "system"):
        raise MessageParseError(f"message role must be user, assistant or system, got {role!r}")
    if "parts" in message:
        parts = message["parts"]
        if not isinstance(parts, list) or not all(isinstance(p, dict) and "type" in p for p in parts):
            raise MessageParseError("message 'parts' must be a list of objects with a 'type'")
        parts = [dict(p) for p in parts]
    elif "content" in message:
        content = message["content"]
        if isinstance(content, str):
            parts = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            parts = []
            for item in content:
                if isinstance(item, dict) and isinstance(item.get("text"), str):
                    parts.append({"type": "text", "text": item["text"]})
                elif isinstance(item, str):
                    parts.append({"type": "text", "text": item})
                else:
                    raise MessageParseError(f"unsupported content part: {item!r}")
        else:
            raise MessageParseError(f"message 'content' must be a str or a list, got {type(content).__name__}")
    else:
        raise MessageParseError("a message needs 'parts' or 'content'")
    out = {k: v for k, v in message.items() if k not in ("parts", "content")}
    out.update({"id": message.get("id") or new_id(), "role": role, "parts": parts})
    out.setdefault("createdAt", time.time())
    return finalize(out)


def _result_content(part: dict[str, Any]) -> str:
    if part.get("state") == "output-error":
        return str(part.get("errorText", "error"))
    output = part.get("output")
    return output if isinstance(output, str) else json.dumps(output, default=str)


def _assistant_step(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    text = "".join(p.get("text", "") for p in parts if p.get("type") == "text")
    done = [p for p in parts if is_tool_part(p) and p.get("state") in ("output-available", "output-error")]
    if not text and not done:
        return []
    msg: dict[str, Any] = {"role": "assistant", "content": text or None}
    if done:
        msg["tool_calls"] = [
            {
                "id": p["toolCallId"],
                "type": "function",
                "function": {"name": p.get("toolName", ""), "arguments": json.dumps(p.get("input"), default=str)},
            }
            for p in done
        ]
    out = [msg]
    for p in done:
        out.append({"role": "tool", "tool_call_id": p["toolCallId"], "name": p.get("toolName", ""),
                    "content": _result_content(p)})
    return out


def to_model_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """UI messages -> OpenAI chat messages (an assistant message becomes one message per step + tool results)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        parts = m.get("parts", [])
        if role == "assistant":
            step: list[dict[str, Any]] = []
            for p in parts:
                if p.get("type") == "step-start":
                    out.extend(_assistant_step(step))
                    step = []
                else:
                    step.append(p)
            out.extend(_assistant_step(step))
        elif role in ("user", "system"):
            out.append({"role": role, "content": text_of(m)})
    return out


def fresh_tool_calls(message: dict[str, Any]) -> None:
    """Give a copied model message tool calls of its own (their functions copied too)."""
    message["tool_calls"] = [{**call, "function": dict(call["function"])} for call in message["tool_calls"]]


class ModelMessageMemo:
    """`to_model_messages` for a transcript of READ-ONLY dicts (MessageStore.transcript), converting only what changed.

    The transcript cache hands a turn the same dict objects as the turn before, plus the new ones (and a new object
    where a message was replaced). The memo keeps the transcript it converted last and the model messages it made,
    in order; a turn converts only the messages after the longest unchanged prefix (found by identity, at C speed),
    so its Python work does not grow with the history. A turn gets copies of the kept model messages, never the kept
    ones (a hook or litellm may change what it was given): one C-level `dict.copy` each, plus new lists for the tool
    calls of the messages that have them. Only for dicts nobody changes in place; a store without read-only
    transcripts goes through `to_model_messages`.
    """

    def __init__(self) -> None:
        # the transcript converted last: the same objects (held, so an identity cannot be reused by a new dict)
        self._ui: list[dict[str, Any]] = []
        self._ends: list[int] = []  # _ends[i]: len(_flat) after _ui[i]'s model messages
        self._flat: list[dict[str, Any]] = []  # the model messages of _ui, in order (never handed out)
        self._nested: list[int] = []  # positions in _flat of the messages that have tool calls (ascending)

    def convert(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ui, flat, nested = self._ui, self._flat, self._nested
        keep = min(len(ui), len(messages))
        if not all(map(operator.is_, ui, messages)):  # something before the end changed: find the first change
            keep = next(i for i, (a, b) in enumerate(zip(ui, messages)) if a is not b)
        if keep < len(ui):
            cut = self._ends[keep - 1] if keep else 0
            del ui[keep:], self._ends[keep:], flat[cut:], nested[bisect.bisect_left(nested, cut):]
        for m in messages[keep:]:
            for d in to_model_messages([m]):
                if d.get("tool_calls"):
                    nested.append(len(flat))
                flat.append(d)
            ui.append(m)
            self._ends.append(len(flat))
        out = list(map(dict.copy, flat))
        for i in nested:
            fresh_tool_calls(out[i])
        return out


def pending_tool_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message.get("parts", []) if is_tool_part(p) and p.get("state") == "input-available"]


def for_bridge(message: dict[str, Any]) -> dict[str, Any]:
    """The JSON-safe view an extension receives from getMessages: {id, role, content, parts, createdAt}."""
    return json.loads(json.dumps(finalize(dict(message)), default=str))
