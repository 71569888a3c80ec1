"""Proto <-> dict conversions on the hot path, built by hand (no MessageToDict).

Snapshot dicts are camelCase with `_json` fields decoded and absent optionals omitted, as agreed in
the interface contract. Return values of handlers are turned into `TurnConfigPatch`,
`ToolCallDecision` and `HookError` messages here.
"""

from __future__ import annotations

import json
import math
import traceback
from typing import Any, Callable

from .proto import extension_pb2 as pb

_loads = json.loads
# The C scanner json.loads ends in, called directly: compact JSON (what a host sends) skips loads' three Python frames
# and two whitespace regex matches. Anything else (surrounding whitespace, a BOM, bad JSON) goes the json.loads way.
_scan_once = json.decoder.JSONDecoder().scan_once


def _decode(text: str) -> Any:
    """JSON-decode a `_json` field; an empty string is None, undecodable text is passed through as is."""
    if not text:
        return None
    try:
        value, end = _scan_once(text, 0)
        if end == len(text):
            return value
    except (StopIteration, ValueError):
        pass
    try:
        return _loads(text)
    except ValueError:
        return text


class UnconvertibleValue(TypeError):
    """A handler returned a value that has no JSON form (named in the message)."""


def _fallback(value: Any) -> Any:
    """A JSON-able form of a value `json` can't encode, by pydantic's JSON mode: pydantic models (camelCase),
    datetime/date/time (ISO 8601), Decimal and UUID (strings), bytes (UTF-8 text), sets and tuples (lists),
    dataclasses (dicts), enums (their values). Anything else is an `UnconvertibleValue`, never a placeholder."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return dump(mode="json", by_alias=True)
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        return to_jsonable_python(value, by_alias=True)
    except UnicodeDecodeError as exc:
        raise UnconvertibleValue(
            f"bytes that are not UTF-8 text have no JSON form ({exc.reason} at byte {exc.start}); "
            f"return them base64- or hex-encoded as a str"
        ) from None
    except PydanticSerializationError as exc:
        raise UnconvertibleValue(f"a {type(value).__module__}.{type(value).__qualname__} value has no JSON form "
                                 f"({exc}); return a dict, list, str, number, bool or None") from None


def _as_plain(value: Any) -> Any:
    """A handler's return value with a pydantic model dumped to its camelCase dict (unset fields left out)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, dict):
        return dump(by_alias=True, exclude_none=True)
    return value


def encode_json(value: Any) -> str:
    """JSON-encode a handler's value (see `_fallback` for what beyond plain JSON converts); raises
    `UnconvertibleValue` naming what has no JSON form.

    A value holding lone surrogates ("\\udcff", which no UTF-8 protobuf string can carry) is sent with them escaped
    (ASCII JSON); the host decides what to make of them."""
    text = json.dumps(value, default=_fallback, ensure_ascii=False)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(value, default=_fallback, ensure_ascii=True)
    return text


# ------------------------------------------------------------------------------------------------
# Snapshots -> dicts
# ------------------------------------------------------------------------------------------------


def turn_snapshot(s: pb.TurnSnapshot) -> dict[str, Any]:
    d: dict[str, Any] = {
        "system": s.system,
        "toolNames": list(s.tool_names),
        "messageCount": s.message_count,
        "continuation": s.continuation,
        "modelId": s.model_id,
    }
    if s.HasField("body_json"):
        d["body"] = _decode(s.body_json)
    return d


def tool_call_snapshot(s: pb.ToolCallSnapshot) -> dict[str, Any]:
    d: dict[str, Any] = {"toolName": s.tool_name, "toolCallId": s.tool_call_id, "input": _decode(s.input_json)}
    if s.HasField("step_number"):
        d["stepNumber"] = s.step_number
    if s.HasField("dynamic"):
        d["dynamic"] = s.dynamic
    return d


def tool_result_snapshot(s: pb.ToolResultSnapshot) -> dict[str, Any]:
    d: dict[str, Any] = {"toolName": s.tool_name, "toolCallId": s.tool_call_id, "input": _decode(s.input_json)}
    if s.HasField("step_number"):
        d["stepNumber"] = s.step_number
    d["durationMs"] = s.duration_ms
    d["success"] = s.success
    if s.HasField("output_json"):
        d["output"] = _decode(s.output_json)
    if s.HasField("error_json"):
        d["error"] = _decode(s.error_json)
    if s.HasField("dynamic"):
        d["dynamic"] = s.dynamic
    return d


_USAGE_FIELDS = (
    ("input_tokens", "inputTokens"),
    ("output_tokens", "outputTokens"),
    ("total_tokens", "totalTokens"),
    ("reasoning_tokens", "reasoningTokens"),
    ("cached_input_tokens", "cachedInputTokens"),
)


def step_snapshot(s: pb.StepSnapshot) -> dict[str, Any]:
    d: dict[str, Any] = {"stepNumber": s.step_number, "finishReason": s.finish_reason, "text": s.text}
    if s.HasField("reasoning_text"):
        d["reasoningText"] = s.reasoning_text
    d["toolCallCount"] = s.tool_call_count
    d["toolResultCount"] = s.tool_result_count
    u = s.usage
    d["usage"] = {camel: getattr(u, snake) for snake, camel in _USAGE_FIELDS if u.HasField(snake)}
    if s.HasField("provider_metadata_json"):
        d["providerMetadata"] = _decode(s.provider_metadata_json)
    return d


def chunk_snapshot(s: pb.ChunkSnapshot) -> dict[str, Any]:
    d: dict[str, Any] = {"type": s.type}
    if s.HasField("text"):
        d["text"] = s.text
    if s.HasField("tool_name"):
        d["toolName"] = s.tool_name
    if s.HasField("tool_call_id"):
        d["toolCallId"] = s.tool_call_id
    return d


# Observation oneof field -> (hook name, snapshot builder)
OBSERVATION_KINDS: dict[str, tuple[str, Callable[[Any], dict[str, Any]]]] = {
    "before_tool_call": ("beforeToolCall", tool_call_snapshot),
    "after_tool_call": ("afterToolCall", tool_result_snapshot),
    "step_finish": ("onStepFinish", step_snapshot),
    "chunk": ("onChunk", chunk_snapshot),
}


# ------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------


def hook_error(hook: str, exc: BaseException) -> pb.HookError:
    return pb.HookError(
        hook=hook,
        name=type(exc).__name__,
        message=str(exc) or type(exc).__name__,
        stack="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    )


# ------------------------------------------------------------------------------------------------
# beforeTurn return -> TurnConfigPatch
# ------------------------------------------------------------------------------------------------

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def _is_int(v: Any, bounds: tuple[int, int]) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and bounds[0] <= v <= bounds[1]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_str_list(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)


def _set_scalar(field: str) -> Callable[[pb.TurnConfigPatch, Any], None]:
    def put(patch: pb.TurnConfigPatch, v: Any) -> None:
        setattr(patch, field, v)

    return put


def _set_json(field: str) -> Callable[[pb.TurnConfigPatch, Any], None]:
    def put(patch: pb.TurnConfigPatch, v: Any) -> None:
        setattr(patch, field, encode_json(v))

    return put


def _set_list(field: str) -> Callable[[pb.TurnConfigPatch, Any], None]:
    def put(patch: pb.TurnConfigPatch, v: Any) -> None:
        getattr(patch, field).values.extend(v)

    return put


def _put_headers(patch: pb.TurnConfigPatch, v: dict[str, str]) -> None:
    patch.headers.values.update(v)


def _put_float(field: str) -> Callable[[pb.TurnConfigPatch, Any], None]:
    def put(patch: pb.TurnConfigPatch, v: Any) -> None:
        setattr(patch, field, float(v))

    return put


# camelCase name -> (accepts value?, writes it into the patch)
_TURN_FIELDS: dict[str, tuple[Callable[[Any], bool], Callable[[pb.TurnConfigPatch, Any], None]]] = {
    "system": (lambda v: isinstance(v, str), _set_scalar("system")),
    "messages": (lambda v: isinstance(v, list), _set_json("messages_json")),
    "activeTools": (_is_str_list, _set_list("active_tools")),
    "toolChoice": (lambda v: isinstance(v, (str, dict)), _set_json("tool_choice_json")),
    "maxSteps": (lambda v: _is_int(v, _INT32), _set_scalar("max_steps")),
    "sendReasoning": (lambda v: isinstance(v, bool), _set_scalar("send_reasoning")),
    "maxOutputTokens": (lambda v: _is_int(v, _INT32), _set_scalar("max_output_tokens")),
    "temperature": (_is_number, _put_float("temperature")),
    "topP": (_is_number, _put_float("top_p")),
    "topK": (_is_number, _put_float("top_k")),
    "presencePenalty": (_is_number, _put_float("presence_penalty")),
    "frequencyPenalty": (_is_number, _put_float("frequency_penalty")),
    "stopSequences": (_is_str_list, _set_list("stop_sequences")),
    "seed": (lambda v: _is_int(v, _INT64), _set_scalar("seed")),
    "maxRetries": (lambda v: _is_int(v, _INT32), _set_scalar("max_retries")),
    "timeout": (lambda v: _is_number(v) or isinstance(v, dict), _set_json("timeout_json")),
    "headers": (
        lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()),
        _put_headers,
    ),
    "providerOptions": (lambda v: isinstance(v, dict), _set_json("provider_options_json")),
}


def _camel(name: str) -> str:
    if "_" not in name:
        return name
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def turn_patch(value: Any) -> pb.TurnConfigPatch | None:
    """A beforeTurn handler's return value as a TurnConfigPatch (None: no change).

    Fields that fit a typed field go there; anything else (unknown names, wrong types, `model`,
    `tools`, `stopWhen`) goes into `extra_json` untouched, for the host to reject field by field.
    """
    if value is None:
        return None
    value = _as_plain(value)
    if not isinstance(value, dict):
        raise TypeError(f"beforeTurn must return None or a dict of TurnConfig fields, got {type(value).__name__}")
    patch = pb.TurnConfigPatch()
    extra: dict[str, Any] = {}
    for key, v in value.items():
        if v is None:
            continue
        name = _camel(key) if isinstance(key, str) else key
        spec = _TURN_FIELDS.get(name)
        if spec is not None and spec[0](v):
            spec[1](patch, v)
        else:
            extra[str(key)] = v
    if extra:
        patch.extra_json = encode_json(extra)
    return patch


# ------------------------------------------------------------------------------------------------
# beforeToolCall return -> ToolCallDecision
# ------------------------------------------------------------------------------------------------

_ACTIONS = {
    "allow": pb.ToolCallDecision.ALLOW,
    "block": pb.ToolCallDecision.BLOCK,
    "substitute": pb.ToolCallDecision.SUBSTITUTE,
}


def tool_decision(value: Any) -> pb.ToolCallDecision | None:
    """A beforeToolCall handler's return value as a ToolCallDecision (None: no decision)."""
    if value is None:
        return None
    value = _as_plain(value)
    if not isinstance(value, dict):
        raise TypeError(
            f"beforeToolCall must return None or a dict {{'action': 'allow'|'block'|'substitute', ...}}, "
            f"got {type(value).__name__}"
        )
    action = value.get("action")
    if action not in _ACTIONS:
        raise ValueError(
            f"beforeToolCall returned action {action!r}; expected one of {', '.join(map(repr, _ACTIONS))}"
        )
    decision = pb.ToolCallDecision(action=_ACTIONS[action])
    if "input" in value:
        decision.input_json = encode_json(value["input"])
    reason = value.get("reason")
    if reason is not None:
        decision.reason = str(reason)
    if "output" in value:
        decision.output_json = encode_json(value["output"])
    elif action == "substitute":
        raise ValueError("beforeToolCall returned action 'substitute' without an 'output'")
    return decision
