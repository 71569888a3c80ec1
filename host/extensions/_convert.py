"""Conversion between the host's pydantic snapshots (host/extensions/_snapshots.py) and the hookwire.v1 protos.

Outbound (host -> extension) conversions build proto objects directly (no pydantic validation: the
per-chunk path must stay cheap). Inbound values (TurnConfigPatch, ToolCallDecision) are untrusted:
they are validated field by field; an invalid field is reported and dropped, the valid ones are kept.
"""

from __future__ import annotations

import json
import json.encoder
import math
from typing import Any

from google.protobuf import unknown_fields

from extension_sdk.proto import extension_pb2 as pb

from ._snapshots import (
    CallContext,
    ChunkSnapshot,
    StepSnapshot,
    ToolCallSnapshot,
    ToolResultSnapshot,
    TurnPatch,
    TurnSnapshot,
)

_c_make_encoder = json.encoder.c_make_encoder  # type: ignore[attr-defined]

MAX_JSON_CHARS = 4 * 1024 * 1024  # the largest JSON value accepted from an extension (and a tool input sent to one)
MAX_VALUE_BYTES = 1024 * 1024  # one free-form JSON value of a snapshot (tool input/output, body, providerMetadata)
MAX_TEXT_BYTES = 256 * 1024  # one text field of a snapshot (system, step text, reasoning, chunk text)
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024  # all free-form fields of one snapshot together
PREVIEW_BYTES = 2048  # what a truncated JSON value keeps of its JSON text
MAX_INBOUND_TEXT = 1024 * 1024  # the longest string field (system, reason) accepted from an extension
MAX_INBOUND_DEPTH = 64  # the deepest JSON value accepted from an extension

# Fields that are never taken from an extension (non-serializable or host-owned).
FORBIDDEN_FIELDS: frozenset[str] = frozenset({"model", "tools", "stopWhen", "stop_when", "prepareStep", "onFinish"})


def _default(value: Any) -> Any:
    if isinstance(value, BaseException):
        return {"name": type(value).__name__, "message": str(value), "stack": ""}
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if callable(value):
        return None
    return repr(value)


def _cut_utf8(data: bytes, limit: int) -> str:
    """The first `limit` bytes of UTF-8 `data` as text, never splitting a character."""
    return data[:limit].decode("utf-8", "ignore")


# What json.dumps(value, default=_default, ensure_ascii=..., allow_nan=False) runs, without its Python layers
# (a JSONEncoder built per call, then encode/iterencode: two thirds of a small value's cost): the C encoder, made per
# call with fresh cycle markers (so a cycle is still "Circular reference detected"), the same text.
_ESCAPES = {False: json.encoder.encode_basestring, True: json.encoder.encode_basestring_ascii}


def _dumps(value: Any, ascii_only: bool) -> str:
    try:
        if _c_make_encoder is None:  # pragma: no cover - CPython always has _json
            return json.dumps(value, default=_default, ensure_ascii=ascii_only, allow_nan=False)
        return "".join(_c_make_encoder({}, _default, _ESCAPES[ascii_only], None, ": ", ", ", False, False, False)(
            value, 0))
    except (ValueError, TypeError, RecursionError):  # NaN/Infinity, cycles, absurd depth: send its repr
        return json.dumps(repr(value)[:MAX_VALUE_BYTES], ensure_ascii=ascii_only)


def json_text_and_size(value: Any) -> tuple[str, int]:
    """(JSON text, its size in UTF-8 bytes); a value with lone surrogates is escaped to ASCII instead."""
    text = _dumps(value, False)
    if text.isascii():  # one byte per character: no encoded copy to measure it
        return text, len(text)
    try:
        return text, len(text.encode("utf-8"))
    except UnicodeEncodeError:
        text = _dumps(value, True)
        return text, len(text)


def truncation_marker(text: str, size: int) -> dict[str, Any]:
    """What stands for a JSON value over its byte cap: {"$truncated": true, "bytes": <its size>, "preview": <the
    first PREVIEW_BYTES of its JSON text>}. Only the preview's characters are encoded, never the whole text."""
    return {"$truncated": True, "bytes": size,
            "preview": _cut_utf8(text[:PREVIEW_BYTES].encode("utf-8", "replace"), PREVIEW_BYTES)}


class Budget:
    """The free-form byte budget of one outbound snapshot: each field gets min(its own cap, what is left).

    Over its share, a JSON value becomes {"$truncated": true, "bytes": N, "preview": "<its first 2 KiB>"} and a
    text field is cut and ends with "…[truncated N bytes]". Lone surrogates (which protobuf string fields
    refuse) are escaped in JSON and replaced by U+FFFD in text.
    """

    __slots__ = ("left",)

    def __init__(self, total: int = MAX_SNAPSHOT_BYTES) -> None:
        self.left = total

    def json(self, value: Any, cap: int = MAX_VALUE_BYTES) -> str:
        text, size = json_text_and_size(value)
        limit = min(cap, self.left)
        if size > limit:
            text = json.dumps(truncation_marker(text, size), ensure_ascii=False)
            size = len(text.encode("utf-8"))
        self.left = max(self.left - size, 0)
        return text

    def text(self, value: str, cap: int = MAX_TEXT_BYTES) -> str:
        limit = min(cap, self.left)
        if value.isascii():  # one byte per character: cut without encoding (no copy of a huge text)
            size = len(value)
            if size > limit:
                value = f"{value[:limit]}…[truncated {size - limit} bytes]"
            self.left = max(self.left - min(size, limit), 0)
            return value
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            data = value.encode("utf-8", "replace")
            value = data.decode("utf-8")
        limit = min(cap, self.left)
        if len(data) > limit:
            kept = _cut_utf8(data, limit)
            value = f"{kept}…[truncated {len(data) - len(kept.encode('utf-8'))} bytes]"
        self.left = max(self.left - min(len(data), limit), 0)
        return value


def to_json(value: Any, cap: int = MAX_VALUE_BYTES) -> str:
    """JSON text for one free-form value, bounded by `cap` bytes (see Budget)."""
    return Budget(cap).json(value, cap)


def json_size_error(value: Any, cap: int = MAX_JSON_CHARS) -> tuple[str, int | None]:
    """(JSON text, None) for a value sent as is (a tool input), or (text, its size) when it is over `cap` bytes."""
    text, size = json_text_and_size(value)
    return text, (size if size > cap else None)


def context_to_proto(context: CallContext | None) -> pb.CallContext:
    if context is None:
        return pb.CallContext()
    return pb.CallContext(session_id=context.session_id, request_id=context.request_id,
                          traceparent=context.traceparent, tracestate=context.tracestate)


def turn_to_proto(snapshot: TurnSnapshot, system: str, tool_names: list[str]) -> pb.TurnSnapshot:
    budget = Budget()
    msg = pb.TurnSnapshot(
        system=budget.text(system),
        tool_names=[budget.text(t, 1024) for t in tool_names],
        message_count=snapshot.message_count,
        continuation=snapshot.continuation,
        model_id=snapshot.model_id,
    )
    if snapshot.body is not None:
        msg.body_json = budget.json(snapshot.body)
    return msg


def tool_call_to_proto(s: ToolCallSnapshot) -> pb.ToolCallSnapshot:
    msg = pb.ToolCallSnapshot()
    fill_tool_call(msg, s)
    return msg


def fill_tool_call(msg: pb.ToolCallSnapshot, s: ToolCallSnapshot) -> None:
    """Set an empty ToolCallSnapshot message's fields from `s` (what `tool_call_to_proto` returns, in place: the
    snapshot inside a frame is filled without a message built and copied into it)."""
    name, call_id = s.tool_name, s.tool_call_id
    text, size = json_text_and_size(s.input)
    if size <= MAX_VALUE_BYTES and len(name) <= 1024 and len(call_id) <= 1024 and name.isascii() and call_id.isascii():
        # the common case, within every cap (2 KiB of names leave the input its whole MAX_VALUE_BYTES): no Budget,
        # the input encoded once
        msg.tool_name = name
        msg.tool_call_id = call_id
        msg.input_json = text
    else:
        budget = Budget()
        msg.tool_name = budget.text(name, 1024)
        msg.tool_call_id = budget.text(call_id, 1024)
        msg.input_json = budget.json(s.input)
    if s.step_number is not None:
        msg.step_number = s.step_number
    if s.dynamic is not None:
        msg.dynamic = s.dynamic


def fill_context(msg: pb.CallContext, context: CallContext) -> None:
    """Set an empty CallContext message's fields from `context` (what `context_to_proto` returns, in place); the
    message is set in its parent even when every field is empty, as a copied-in context is."""
    msg.SetInParent()
    if context.session_id:  # an empty (or None) field is left unset, as the keyword constructor leaves it
        msg.session_id = context.session_id
    if context.request_id:
        msg.request_id = context.request_id
    if context.traceparent:
        msg.traceparent = context.traceparent
    if context.tracestate:
        msg.tracestate = context.tracestate


def tool_result_to_proto(s: ToolResultSnapshot) -> pb.ToolResultSnapshot:
    budget = Budget()
    msg = pb.ToolResultSnapshot(
        tool_name=budget.text(s.tool_name, 1024),
        tool_call_id=budget.text(s.tool_call_id, 1024),
        input_json=budget.json(s.input),
        duration_ms=s.duration_ms,
        success=s.success,
    )
    if s.step_number is not None:
        msg.step_number = s.step_number
    if s.success or s.output is not None:
        msg.output_json = budget.json(s.output)
    if s.error is not None:
        msg.error_json = budget.json(s.error)
    if s.dynamic is not None:
        msg.dynamic = s.dynamic
    return msg


def step_to_proto(s: StepSnapshot) -> pb.StepSnapshot:
    u = s.usage
    usage = pb.Usage()
    for field in ("input_tokens", "output_tokens", "total_tokens", "reasoning_tokens", "cached_input_tokens"):
        v = getattr(u, field)
        if v is not None:
            setattr(usage, field, v)
    budget = Budget()
    msg = pb.StepSnapshot(
        step_number=s.step_number,
        finish_reason=s.finish_reason,
        text=budget.text(s.text),
        tool_call_count=s.tool_call_count,
        tool_result_count=s.tool_result_count,
        usage=usage,
    )
    if s.reasoning_text is not None:
        msg.reasoning_text = budget.text(s.reasoning_text)
    if s.provider_metadata is not None:
        msg.provider_metadata_json = budget.json(s.provider_metadata)
    return msg


def chunk_to_observation(s: ChunkSnapshot) -> pb.Observation:
    """The per-chunk path: plain attribute reads, the proto filled in place (bounded only when it must be)."""
    try:
        obs = pb.Observation()
        chunk = obs.chunk
        chunk.type = s.type
        text = s.text
        if text is not None:
            chunk.text = text if len(text) <= MAX_TEXT_BYTES // 4 else Budget().text(text)
        if s.tool_name is not None:
            chunk.tool_name = s.tool_name
        if s.tool_call_id is not None:
            chunk.tool_call_id = s.tool_call_id
        return obs
    except UnicodeEncodeError:  # lone surrogates: protobuf refuses them
        budget = Budget()
        chunk = pb.ChunkSnapshot(type=budget.text(s.type, 64))
        for field in ("text", "tool_name", "tool_call_id"):
            value = getattr(s, field)
            if value is not None:
                setattr(chunk, field, budget.text(value))
    return pb.Observation(chunk=chunk)


# ---------------------------------------------------------------------------------------------
# Inbound: TurnConfigPatch -> TurnPatch, validated field by field
# ---------------------------------------------------------------------------------------------


class FieldProblem(Exception):
    """One invalid field of an extension's reply (camelCase field name and why)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _num(field: str, v: Any, *, lo: float | None = None, hi: float | None = None) -> float:
    if not (isinstance(v, (int, float)) and not isinstance(v, bool)):
        raise FieldProblem(field, f"expected a number, got {_short(v)}")
    if not math.isfinite(v):
        raise FieldProblem(field, f"expected a finite number, got {_short(v)}")
    if lo is not None and v < lo:
        raise FieldProblem(field, f"must be >= {lo}, got {_short(v)}")
    if hi is not None and v > hi:
        raise FieldProblem(field, f"must be <= {hi}, got {_short(v)}")
    return float(v)


def _int(field: str, v: Any, *, lo: int | None = None) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not _is_int(v):
        raise FieldProblem(field, f"expected an integer, got {_short(v)}")
    if lo is not None and v < lo:
        raise FieldProblem(field, f"must be >= {lo}, got {_short(v)}")
    return int(v)


def _str(field: str, v: Any) -> str:
    if not isinstance(v, str):
        raise FieldProblem(field, f"expected a string, got {_short(v)}")
    if len(v) > MAX_INBOUND_TEXT:
        raise FieldProblem(field, f"is {len(v)} characters long, over the {MAX_INBOUND_TEXT} limit")
    return v


def _short(v: Any) -> str:
    """A bounded repr of an untrusted value for a log line."""
    text = repr(v)
    return text if len(text) <= 200 else f"{text[:200]}…[{len(text)} chars]"


def _check_value(field: str, value: Any) -> None:
    """Refuse a decoded JSON value nesting deeper than MAX_INBOUND_DEPTH or holding NaN/Infinity (iterative:
    no recursion on hostile input)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, float):
            if not math.isfinite(v):
                raise FieldProblem(field, f"holds {v!r}, which is not JSON")
            continue
        if isinstance(v, dict):
            children: Any = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        if d > MAX_INBOUND_DEPTH:
            raise FieldProblem(field, f"nests deeper than {MAX_INBOUND_DEPTH} levels")
        stack.extend((c, d + 1) for c in children)


def _bool(field: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise FieldProblem(field, f"expected a boolean, got {_short(v)}")
    return v


def _str_list(field: str, v: Any) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise FieldProblem(field, f"expected a list of strings, got {_short(v)}")
    return list(v)


def _tool_choice(field: str, v: Any) -> str | dict[str, Any]:
    if v in ("auto", "none", "required"):
        return v  # type: ignore[return-value]
    if isinstance(v, dict) and v.get("type") == "tool" and isinstance(v.get("toolName"), str):
        return {"type": "tool", "toolName": v["toolName"]}
    raise FieldProblem(field, f'expected "auto", "none", "required" or {{"type": "tool", "toolName": ...}}, got {_short(v)}')


def _messages(field: str, v: Any) -> list[dict[str, Any]]:
    if not isinstance(v, list) or not all(isinstance(m, dict) for m in v):
        raise FieldProblem(field, "expected a list of message objects")
    return v


def _timeout(field: str, v: Any) -> float | dict[str, Any]:
    if isinstance(v, dict):
        out: dict[str, Any] = {}
        for k, x in v.items():
            if k not in ("totalMs", "chunkMs", "stepMs"):
                raise FieldProblem(field, f"unknown key {_short(k)} (expected totalMs, chunkMs, stepMs)")
            out[k] = _num(f"{field}.{k}", x, lo=1)
        return out
    return _num(field, v, lo=1)


def _object(field: str, v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise FieldProblem(field, f"expected an object, got {type(v).__name__}")
    return v


def _headers(field: str, v: Any) -> dict[str, str]:
    if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
        raise FieldProblem(field, "expected an object of string values")
    return dict(v)


# camelCase wire name -> (snake_case TurnPatch field, validator of a JSON-decoded value)
_VALIDATORS: dict[str, tuple[str, Any]] = {
    "system": ("system", _str),
    "messages": ("messages", _messages),
    "activeTools": ("active_tools", _str_list),
    "toolChoice": ("tool_choice", _tool_choice),
    "maxSteps": ("max_steps", lambda f, v: _int(f, v, lo=1)),
    "sendReasoning": ("send_reasoning", _bool),
    "maxOutputTokens": ("max_output_tokens", lambda f, v: _int(f, v, lo=1)),
    "temperature": ("temperature", lambda f, v: _num(f, v, lo=0, hi=2)),
    "topP": ("top_p", lambda f, v: _num(f, v, lo=0, hi=1)),
    "topK": ("top_k", lambda f, v: _num(f, v, lo=0)),
    "presencePenalty": ("presence_penalty", lambda f, v: _num(f, v, lo=-2, hi=2)),
    "frequencyPenalty": ("frequency_penalty", lambda f, v: _num(f, v, lo=-2, hi=2)),
    "stopSequences": ("stop_sequences", _str_list),
    "seed": ("seed", lambda f, v: _int(f, v)),
    "maxRetries": ("max_retries", lambda f, v: _int(f, v, lo=0)),
    "timeout": ("timeout", _timeout),
    "headers": ("headers", _headers),
    "providerOptions": ("provider_options", _object),
}

_SNAKE_TO_CAMEL = {snake: camel for camel, (snake, _) in _VALIDATORS.items()}


def camel(field: str) -> str:
    return _SNAKE_TO_CAMEL.get(field, field)


def _decode_json(field: str, text: str, *, check: bool = True) -> Any:
    """A JSON value from an extension: bounded size and depth; NaN/Infinity refused (unless check=False)."""
    if len(text) > MAX_JSON_CHARS:
        raise FieldProblem(field, f"is {len(text)} characters of JSON, over the {MAX_JSON_CHARS} limit")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise FieldProblem(field, f"not valid JSON: {str(exc)[:200]}") from None
    if check:
        _check_value(field, value)
    return value


def _unknown_fields(msg: Any) -> list[FieldProblem]:
    """Fields of a newer (or hostile) sender this host does not know: reported, ignored."""
    try:
        numbers = sorted({f.field_number for f in unknown_fields.UnknownFieldSet(msg)})
    except Exception:  # noqa: BLE001 - reporting only
        return []
    kind = type(msg).__name__
    return [FieldProblem(f"#{n}", f"unknown field number {n} of {kind} (ignored)") for n in numbers]


def patch_from_proto(msg: pb.TurnConfigPatch) -> tuple[dict[str, Any], list[FieldProblem]]:
    """The valid fields of an extension's TurnConfigPatch (snake_case -> value) and the rejected ones."""
    values: dict[str, Any] = {}
    problems: list[FieldProblem] = _unknown_fields(msg)

    def take(camel_name: str, raw: Any) -> None:
        snake, validate = _VALIDATORS[camel_name]
        try:
            values[snake] = validate(camel_name, raw)
        except FieldProblem as exc:
            problems.append(exc)

    scalar = {
        "system": "system", "max_steps": "maxSteps", "send_reasoning": "sendReasoning",
        "max_output_tokens": "maxOutputTokens", "temperature": "temperature", "top_p": "topP", "top_k": "topK",
        "presence_penalty": "presencePenalty", "frequency_penalty": "frequencyPenalty", "seed": "seed",
        "max_retries": "maxRetries",
    }
    for proto_field, camel_name in scalar.items():
        if msg.HasField(proto_field):
            take(camel_name, getattr(msg, proto_field))
    json_fields = {
        "messages_json": "messages", "tool_choice_json": "toolChoice", "timeout_json": "timeout",
        "provider_options_json": "providerOptions",
    }
    for proto_field, camel_name in json_fields.items():
        if msg.HasField(proto_field):
            try:
                take(camel_name, _decode_json(camel_name, getattr(msg, proto_field)))
            except FieldProblem as exc:
                problems.append(exc)
    if msg.HasField("active_tools"):
        take("activeTools", list(msg.active_tools.values))
    if msg.HasField("stop_sequences"):
        take("stopSequences", list(msg.stop_sequences.values))
    if msg.HasField("headers"):
        take("headers", dict(sorted(msg.headers.values.items())))  # a protobuf map has no order: make one
    if msg.HasField("extra_json"):
        try:
            extra = _decode_json("extra", msg.extra_json, check=False)  # checked field by field below
            if not isinstance(extra, dict):
                raise FieldProblem("extra", "expected an object")
        except FieldProblem as exc:
            problems.append(exc)
            extra = {}
        for key, raw in extra.items():
            try:
                _check_value(key, raw)
            except FieldProblem as exc:
                problems.append(exc)
                continue
            if key in FORBIDDEN_FIELDS:
                problems.append(FieldProblem(key, "cannot be set by an extension (host-owned or not serializable)"))
            elif key in _VALIDATORS:
                take(key, raw)
            elif key in _SNAKE_TO_CAMEL:
                take(_SNAKE_TO_CAMEL[key], raw)
            else:
                problems.append(FieldProblem(key, "unknown TurnConfig field"))
    return values, problems


def turn_patch(values: dict[str, Any]) -> TurnPatch:
    return TurnPatch.model_construct(**values)


# ---------------------------------------------------------------------------------------------
# Inbound: ToolCallDecision
# ---------------------------------------------------------------------------------------------


def decision_from_proto(msg: pb.ToolCallDecision) -> tuple[str | None, dict[str, Any], list[FieldProblem]]:
    """(action or None, {input?, reason?, output?}, problems) of an extension's decision."""
    problems: list[FieldProblem] = _unknown_fields(msg)
    out: dict[str, Any] = {}
    action = {pb.ToolCallDecision.ALLOW: "allow", pb.ToolCallDecision.BLOCK: "block",
              pb.ToolCallDecision.SUBSTITUTE: "substitute"}.get(msg.action)
    if action is None and msg.action != pb.ToolCallDecision.ACTION_UNSPECIFIED:
        problems.append(FieldProblem("action", f"unknown value {msg.action}"))
    if msg.HasField("reason"):
        try:
            out["reason"] = _str("reason", msg.reason)
        except FieldProblem as exc:
            problems.append(exc)
    if msg.HasField("input_json"):
        try:
            out["input"] = _decode_json("input", msg.input_json)
        except FieldProblem as exc:
            problems.append(exc)
    if msg.HasField("output_json"):
        try:
            out["output"] = _decode_json("output", msg.output_json)
        except FieldProblem as exc:
            problems.append(exc)
    if action == "substitute" and "output" not in out:
        problems.append(FieldProblem("output", "a substitute decision needs an output"))
        action = None
    return action, out, problems
