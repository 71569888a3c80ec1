"""The embedded default model ``hookwire/scripted``: offline, deterministic, streaming, with tool calls.

A litellm ``CustomLLM`` registered for the provider ``hookwire``. It reads the LAST user message as a script:

- ``/tool NAME {json}`` lines: call those tools in one step (several lines = parallel calls, ids ``call_<n>``).
- blocks separated by a ``/next`` line: block k is played where k = assistant tool-call rounds since the last
  user message; after the last block's tool results it answers ``Tool results: a -> 7; b -> "hi".``
- ``/error context_overflow`` | ``/error rate_limit``: raise litellm's error mid-stream (after two tokens).
- ``/stall MS``: emit a token, pause MS milliseconds, continue.
- ``/stall-once MS``: the same, for the first request with this script only (to test stall recovery).
- ``/chunks N``: stream exactly N small text chunks.
- ``/reason TEXT``: stream TEXT as ``reasoning_content`` deltas before the answer.
- anything else: ``echo: <text>``.

Request parameters are honoured where they mean something here (``tools``, ``tool_choice``, ``max_tokens`` ->
finish_reason "length", ``stop``) and every request is recorded in :data:`last_requests` for tests.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
from litellm.llms.custom_llm import CustomLLM  # noqa: E402
from litellm.types.utils import (  # noqa: E402
    ChatCompletionMessageToolCall,
    Choices,
    Delta,
    Function,
    GenericStreamingChunk,
    Message,
    ModelResponse,
    ModelResponseStream,
    StreamingChoices,
    Usage,
)

PROVIDER = "hookwire"
SCRIPTED_MODEL = "hookwire/scripted"

#: The most recent requests the scripted model received, newest last (bounded). Each entry is a dict with
#: ``model``, ``messages``, ``optional_params``, ``litellm_params``, ``headers``, ``api_base``, ``stream`` and the
#: OpenAI parameters lifted out of ``optional_params`` (``tools``, ``tool_choice``, ``temperature``, ...).
last_requests: deque[dict[str, Any]] = deque(maxlen=16)

_LIFTED_PARAMS = (
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "stop",
    "max_tokens",
    "max_completion_tokens",
    "presence_penalty",
    "frequency_penalty",
    "parallel_tool_calls",
    "reasoning_effort",
    "response_format",
    "user",
    "n",
    "stream_options",
)

_ERROR_TOKENS_BEFORE_RAISE = 2


class ScriptError(ValueError):
    """A malformed script line (for example ``/tool name {not json}``)."""


@dataclass
class _ToolCall:
    id: str
    name: str
    arguments: str  # JSON text


_stalled_once: set[str] = set()  # scripts whose `/stall-once` already stalled a request


@dataclass
class _Plan:
    """What one model step will produce, computed from the request before anything streams."""

    reasoning: list[str] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    tool_calls: list[_ToolCall] = field(default_factory=list)
    stall_ms: int | None = None
    error: str | None = None
    finish_reason: Literal["stop", "tool_calls", "length"] = "stop"
    prompt_tokens: int = 0


# --------------------------------------------------------------------------- request parsing


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return str(content)


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _tokenize(text: str) -> list[str]:
    """Split into tokens: a word with its following whitespace (joining the tokens gives back ``text``)."""
    tokens: list[str] = []
    current = ""
    for ch in text:
        if ch.isspace():
            current += ch
        else:
            if current and current[-1].isspace():
                tokens.append(current)
                current = ""
            current += ch
    if current:
        tokens.append(current)
    return tokens


def _tool_names(tools: Any) -> list[str] | None:
    if not tools:
        return None
    names: list[str] = []
    for tool in tools:
        fn = _get(tool, "function")
        name = _get(fn, "name") if fn is not None else _get(tool, "name")
        if isinstance(name, str):
            names.append(name)
    return names


def _forced_tool(tool_choice: Any) -> str | None:
    if isinstance(tool_choice, dict):
        fn = tool_choice.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return fn["name"]
    return None


def _parse_tool_line(line: str) -> tuple[str, str]:
    rest = line[len("/tool") :].strip()
    if not rest:
        raise ScriptError(f"scripted model: '/tool' needs a tool name: {line!r}")
    name, _, raw_args = rest.partition(" ")
    raw_args = raw_args.strip() or "{}"
    try:
        args = json.loads(raw_args)
    except json.JSONDecodeError as exc:
        raise ScriptError(f"scripted model: arguments of tool {name!r} are not JSON: {raw_args!r} ({exc})") from exc
    return name, json.dumps(args, separators=(",", ":"))


def _plan(messages: list[Any], optional_params: dict[str, Any]) -> _Plan:
    plan = _Plan()
    plan.prompt_tokens = sum(len(_content_text(_get(m, "content")).split()) for m in messages)

    last_user = max((i for i, m in enumerate(messages) if _get(m, "role") == "user"), default=-1)
    script = _content_text(_get(messages[last_user], "content")) if last_user >= 0 else ""
    since_user = messages[last_user + 1 :]
    rounds = sum(1 for m in since_user if _get(m, "role") == "assistant" and _get(m, "tool_calls"))
    prior_calls = sum(len(_get(m, "tool_calls") or []) for m in messages if _get(m, "role") == "assistant")
    call_names: dict[str, str] = {}
    for m in since_user:
        for tc in _get(m, "tool_calls") or []:
            call_names[str(_get(tc, "id"))] = str(_get(_get(tc, "function"), "name"))
    results = [
        (
            str(_get(m, "name") or call_names.get(str(_get(m, "tool_call_id"))) or _get(m, "tool_call_id") or "tool"),
            _content_text(_get(m, "content")),
        )
        for m in since_user
        if _get(m, "role") == "tool"
    ]

    blocks: list[list[str]] = [[]]
    for line in script.splitlines():
        if line.strip() == "/next":
            blocks.append([])
        else:
            blocks[-1].append(line)
    block = blocks[rounds] if rounds < len(blocks) else None

    text_lines: list[str] = []
    calls: list[tuple[str, str]] = []
    chunks: int | None = None
    for line in block or []:
        stripped = line.strip()
        head = stripped.split(" ", 1)[0]
        arg = stripped[len(head) :].strip()
        if head == "/tool":
            calls.append(_parse_tool_line(stripped))
        elif head == "/error":
            plan.error = arg or "context_overflow"
        elif head == "/stall":
            plan.stall_ms = int(arg or "0")
        elif head == "/stall-once":  # stall only the first request carrying this script (a retry streams on)
            if script not in _stalled_once:
                _stalled_once.add(script)
                plan.stall_ms = int(arg or "0")
        elif head == "/chunks":
            chunks = int(arg or "0")
        elif head == "/reason":
            plan.reasoning = _tokenize(arg)
        else:
            text_lines.append(line)
    plain = "\n".join(text_lines).strip()

    tool_choice = optional_params.get("tool_choice")
    available = _tool_names(optional_params.get("tools"))
    forced = _forced_tool(tool_choice)
    if tool_choice == "none":
        calls = []
    elif forced is not None:
        calls = [c for c in calls if c[0] == forced] or [(forced, "{}")]
    elif tool_choice == "required" and not calls and available:
        calls = [(available[0], "{}")]

    text: str
    missing = [name for name, _ in calls if available is None or name not in available]
    if missing:
        offered = ", ".join(available or []) or "none"
        text = f"cannot call {', '.join(missing)}: not among the request's tools (offered: {offered})"
        calls = []
    elif calls:
        text = plain
    elif chunks is not None:
        text = ""
        plan.tokens = [f"c{i} " for i in range(chunks)]
    elif results and (block is None or not plain):
        text = "Tool results: " + "; ".join(f"{name} -> {content}" for name, content in results)
        text += "" if text.endswith((".", "!", "?")) else "."
    elif plain:
        text = f"echo: {plain}"
    elif block is None:
        text = "done."
    else:
        text = f"echo: {script.strip()}"

    if text:
        plan.tokens = _tokenize(text)
    plan.tool_calls = [
        _ToolCall(id=f"call_{prior_calls + i + 1}", name=name, arguments=args) for i, (name, args) in enumerate(calls)
    ]
    if plan.tool_calls:
        plan.finish_reason = "tool_calls"

    stop = optional_params.get("stop")
    stops = [stop] if isinstance(stop, str) else [s for s in (stop or []) if isinstance(s, str) and s]
    if stops and plan.tokens:
        joined = "".join(plan.tokens)
        cut = min((joined.find(s) for s in stops if s in joined), default=-1)
        if cut >= 0:
            plan.tokens = _tokenize(joined[:cut])

    max_tokens = optional_params.get("max_tokens") or optional_params.get("max_completion_tokens")
    if isinstance(max_tokens, int) and len(plan.tokens) + len(plan.tool_calls) > max_tokens:
        plan.tokens = plan.tokens[:max_tokens]
        plan.tool_calls = []
        plan.finish_reason = "length"
    return plan


def _record(model: str, messages: list[Any], optional_params: dict[str, Any], kwargs: dict[str, Any]) -> None:
    def safe(value: Any) -> Any:
        try:
            return copy.deepcopy(value)
        except Exception:
            return value

    def messages_copy(items: list[Any]) -> list[Any]:
        # one level: the request's list and each message dict (the host builds them anew per request); a deep copy
        # of a long history per request made the scripted model's cost grow with it (issue 19 item 5)
        return [dict(m) if isinstance(m, dict) else m for m in items]

    entry: dict[str, Any] = {
        "model": model,
        "messages": messages_copy(messages),
        "optional_params": safe(dict(optional_params)),
        "litellm_params": dict(kwargs.get("litellm_params") or {}),
        "headers": dict(kwargs.get("headers") or {}),
        "api_base": kwargs.get("api_base"),
        "timeout": kwargs.get("timeout"),
        "stream": kwargs.get("stream", False),
    }
    for name in _LIFTED_PARAMS:
        if name in optional_params:
            entry[name] = safe(optional_params[name])
    extra_body = optional_params.get("extra_body")
    if isinstance(extra_body, dict):
        entry["extra_body"] = safe(extra_body)
    with _record_lock:
        last_requests.append(entry)


_record_lock = threading.Lock()


def _raise_error(kind: str, model: str) -> None:
    if kind == "rate_limit":
        raise litellm.RateLimitError(
            message="scripted model: rate limit (scripted by /error rate_limit)", llm_provider=PROVIDER, model=model
        )
    if kind == "context_overflow":
        raise litellm.ContextWindowExceededError(
            message="scripted model: context window exceeded (scripted by /error context_overflow)",
            model=model,
            llm_provider=PROVIDER,
        )
    raise litellm.APIConnectionError(
        message=f"scripted model: unknown /error kind {kind!r} (use context_overflow or rate_limit)",
        llm_provider=PROVIDER,
        model=model,
    )


# --------------------------------------------------------------------------- streaming


def _chunk(text: str = "", *, tool_use: dict[str, Any] | None = None) -> GenericStreamingChunk:
    return GenericStreamingChunk(
        text=text, tool_use=tool_use, is_finished=False, finish_reason="", usage=None, index=0  # type: ignore[typeddict-item]
    )


def _reason_chunk(text: str) -> ModelResponseStream:
    return ModelResponseStream(choices=[StreamingChoices(index=0, delta=Delta(reasoning_content=text))])


def _events(plan: _Plan, model: str) -> Iterator[tuple[str, Any]]:
    """The stream as ('chunk', chunk) and ('sleep', seconds) events; raises the scripted error in place."""
    emitted = 0
    for piece in plan.reasoning:
        emitted += 1
        yield "chunk", _reason_chunk(piece)
    for i, token in enumerate(plan.tokens):
        if plan.error is not None and i == _ERROR_TOKENS_BEFORE_RAISE:
            _raise_error(plan.error, model)
        emitted += 1
        yield "chunk", _chunk(token)
        if i == 0 and plan.stall_ms:
            yield "sleep", plan.stall_ms / 1000
    if plan.error is not None:
        _raise_error(plan.error, model)
    for index, call in enumerate(plan.tool_calls):
        emitted += 1
        half = len(call.arguments) // 2
        yield "chunk", _chunk(
            tool_use={
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments[:half]},
                "index": index,
            }
        )
        yield "chunk", _chunk(
            tool_use={
                "id": None,
                "type": "function",
                "function": {"name": None, "arguments": call.arguments[half:]},
                "index": index,
            }
        )
    yield "chunk", GenericStreamingChunk(
        text="",
        tool_use=None,
        is_finished=True,
        finish_reason=plan.finish_reason,
        usage={
            "prompt_tokens": plan.prompt_tokens,
            "completion_tokens": emitted,
            "total_tokens": plan.prompt_tokens + emitted,
        },
        index=0,
    )


def _response(plan: _Plan, model: str) -> ModelResponse:
    if plan.error is not None:
        _raise_error(plan.error, model)
    tool_calls = [
        ChatCompletionMessageToolCall(id=c.id, type="function", function=Function(name=c.name, arguments=c.arguments))
        for c in plan.tool_calls
    ]
    message = Message(
        content="".join(plan.tokens) or None,
        role="assistant",
        tool_calls=tool_calls or None,
        reasoning_content="".join(plan.reasoning) or None,
    )
    completion = len(plan.tokens) + len(plan.reasoning) + len(plan.tool_calls)
    return ModelResponse(
        model=model,
        choices=[Choices(index=0, finish_reason=plan.finish_reason, message=message)],
        usage=Usage(
            prompt_tokens=plan.prompt_tokens,
            completion_tokens=completion,
            total_tokens=plan.prompt_tokens + completion,
        ),
    )


class ScriptedModel(CustomLLM):
    """litellm custom provider behind ``hookwire/scripted`` (see the module docstring for the script language)."""

    def _prepare(self, model: str, messages: list[Any], optional_params: dict[str, Any], **kwargs: Any) -> _Plan:
        _record(model, messages, optional_params, kwargs)
        return _plan(messages, optional_params)

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:  # type: ignore[override]
        plan = self._prepare(model, messages, kwargs.pop("optional_params", {}) or {}, stream=False, **kwargs)
        return _response(plan, model)

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:  # type: ignore[override]
        return self.completion(model, messages, *args, **kwargs)

    def streaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Iterator[GenericStreamingChunk]:  # type: ignore[override]
        plan = self._prepare(model, messages, kwargs.pop("optional_params", {}) or {}, stream=True, **kwargs)
        for kind, value in _events(plan, model):
            if kind == "sleep":
                time.sleep(value)
            else:
                yield value

    async def astreaming(  # type: ignore[override]
        self, model: str, messages: list, *args: Any, **kwargs: Any
    ) -> AsyncIterator[GenericStreamingChunk]:
        plan = self._prepare(model, messages, kwargs.pop("optional_params", {}) or {}, stream=True, **kwargs)
        for kind, value in _events(plan, model):
            if kind == "sleep":
                await asyncio.sleep(value)
            else:
                yield value


_handler: ScriptedModel | None = None
_register_lock = threading.Lock()


def register_scripted_model() -> str:
    """Register the ``hookwire`` provider with litellm (idempotent); returns the model id ``hookwire/scripted``."""
    global _handler
    with _register_lock:
        if _handler is None:
            _handler = ScriptedModel()
        if not any(item.get("provider") == PROVIDER for item in litellm.custom_provider_map):
            litellm.custom_provider_map.append({"provider": PROVIDER, "custom_handler": _handler})
    return SCRIPTED_MODEL
