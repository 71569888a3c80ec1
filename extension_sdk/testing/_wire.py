"""What the harness sends and reads: snapshot dicts (camelCase, as a handler receives them; snake_case accepted)
into the host's snapshot messages, and the extension's replies (TurnConfigPatch, ToolCallDecision) back into the
camelCase dicts the handler returned — as far as the host would take them."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .._convert import _camel, encode_json
from ..proto import extension_pb2 as pb


def _fields(hook: str, given: Mapping[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in given.items():
        name = _camel(key)
        if name not in allowed:
            raise TypeError(f"{hook} snapshot: unknown field {key!r}; its fields are {', '.join(allowed)}")
        out[name] = value
    return out


def _json(value: Any) -> str:
    return encode_json(value)


_TURN = ("system", "toolNames", "messageCount", "continuation", "body", "modelId")
_TOOL_CALL = ("toolName", "toolCallId", "input", "stepNumber", "dynamic")
_TOOL_RESULT = ("toolName", "toolCallId", "input", "stepNumber", "durationMs", "success", "output", "error", "dynamic")
_STEP = ("stepNumber", "finishReason", "text", "reasoningText", "toolCallCount", "toolResultCount", "usage",
         "providerMetadata")
_CHUNK = ("type", "text", "toolName", "toolCallId")
_USAGE = {"inputTokens": "input_tokens", "outputTokens": "output_tokens", "totalTokens": "total_tokens",
          "reasoningTokens": "reasoning_tokens", "cachedInputTokens": "cached_input_tokens"}


def turn_snapshot(given: Mapping[str, Any]) -> pb.TurnSnapshot:
    f = _fields("beforeTurn", given, _TURN)
    s = pb.TurnSnapshot(
        system=f.get("system", ""), tool_names=list(f.get("toolNames", [])),
        message_count=int(f.get("messageCount", 0)), continuation=bool(f.get("continuation", False)),
        model_id=f.get("modelId", "hookwire/scripted"),
    )
    if "body" in f:
        s.body_json = _json(f["body"])
    return s


def tool_call_snapshot(given: Mapping[str, Any]) -> pb.ToolCallSnapshot:
    f = _fields("beforeToolCall", given, _TOOL_CALL)
    s = pb.ToolCallSnapshot(tool_name=f.get("toolName", "tool"), tool_call_id=f.get("toolCallId", "call-1"),
                            input_json=_json(f.get("input", {})), step_number=int(f.get("stepNumber", 0)))
    if "dynamic" in f:
        s.dynamic = bool(f["dynamic"])
    return s


def tool_result_snapshot(given: Mapping[str, Any]) -> pb.ToolResultSnapshot:
    f = _fields("afterToolCall", given, _TOOL_RESULT)
    success = bool(f.get("success", "error" not in f))
    s = pb.ToolResultSnapshot(
        tool_name=f.get("toolName", "tool"), tool_call_id=f.get("toolCallId", "call-1"),
        input_json=_json(f.get("input", {})), step_number=int(f.get("stepNumber", 0)),
        duration_ms=float(f.get("durationMs", 1.0)), success=success,
    )
    if "output" in f:
        s.output_json = _json(f["output"])
    if "error" in f:
        error = f["error"]
        s.error_json = _json({"name": "Error", "message": error} if isinstance(error, str) else error)
    if "dynamic" in f:
        s.dynamic = bool(f["dynamic"])
    return s


def step_snapshot(given: Mapping[str, Any]) -> pb.StepSnapshot:
    f = _fields("onStepFinish", given, _STEP)
    s = pb.StepSnapshot(
        step_number=int(f.get("stepNumber", 0)), finish_reason=f.get("finishReason", "stop"), text=f.get("text", ""),
        tool_call_count=int(f.get("toolCallCount", 0)), tool_result_count=int(f.get("toolResultCount", 0)),
    )
    if "reasoningText" in f:
        s.reasoning_text = f["reasoningText"]
    for key, value in dict(f.get("usage") or {}).items():
        name = _USAGE.get(_camel(key))
        if name is None:
            raise TypeError(f"onStepFinish snapshot: unknown usage field {key!r}; they are {', '.join(_USAGE)}")
        setattr(s.usage, name, int(value))
    if "providerMetadata" in f:
        s.provider_metadata_json = _json(f["providerMetadata"])
    return s


def chunk_snapshot(given: Mapping[str, Any]) -> pb.ChunkSnapshot:
    f = _fields("onChunk", given, _CHUNK)
    s = pb.ChunkSnapshot(type=f.get("type", "text-delta"))
    for key, name in (("text", "text"), ("toolName", "tool_name"), ("toolCallId", "tool_call_id")):
        if key in f:
            setattr(s, name, f[key])
    return s


# hook name -> (Observation oneof field, snapshot builder)
OBSERVATIONS: dict[str, tuple[str, Callable[[Mapping[str, Any]], Any]]] = {
    "beforeToolCall": ("before_tool_call", tool_call_snapshot),
    "afterToolCall": ("after_tool_call", tool_result_snapshot),
    "onStepFinish": ("step_finish", step_snapshot),
    "onChunk": ("chunk", chunk_snapshot),
}


# ------------------------------------------------------------------------------------------------ replies

_SCALARS = (("system", "system"), ("max_steps", "maxSteps"), ("send_reasoning", "sendReasoning"),
            ("max_output_tokens", "maxOutputTokens"), ("temperature", "temperature"), ("top_p", "topP"),
            ("top_k", "topK"), ("presence_penalty", "presencePenalty"), ("frequency_penalty", "frequencyPenalty"),
            ("seed", "seed"), ("max_retries", "maxRetries"))
_JSON = (("messages_json", "messages"), ("tool_choice_json", "toolChoice"), ("timeout_json", "timeout"),
         ("provider_options_json", "providerOptions"))


def patch_dict(patch: pb.TurnConfigPatch) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the TurnConfig fields set, camelCase; the fields the host would refuse as untyped: `extra_json`)."""
    out: dict[str, Any] = {}
    for field, name in _SCALARS:
        if patch.HasField(field):
            out[name] = getattr(patch, field)
    for field, name in _JSON:
        if patch.HasField(field):
            out[name] = json.loads(getattr(patch, field))
    if patch.HasField("active_tools"):
        out["activeTools"] = list(patch.active_tools.values)
    if patch.HasField("stop_sequences"):
        out["stopSequences"] = list(patch.stop_sequences.values)
    if patch.HasField("headers"):
        out["headers"] = dict(patch.headers.values)
    extra = json.loads(patch.extra_json) if patch.HasField("extra_json") else {}
    return out, extra


_ACTIONS = {pb.ToolCallDecision.ALLOW: "allow", pb.ToolCallDecision.BLOCK: "block",
            pb.ToolCallDecision.SUBSTITUTE: "substitute"}


def decision_dict(decision: pb.ToolCallDecision) -> dict[str, Any] | None:
    action = _ACTIONS.get(decision.action)
    if action is None:
        return None
    out: dict[str, Any] = {"action": action}
    if decision.HasField("input_json"):
        out["input"] = json.loads(decision.input_json)
    if decision.HasField("reason"):
        out["reason"] = decision.reason
    if decision.HasField("output_json"):
        out["output"] = json.loads(decision.output_json)
    return out
