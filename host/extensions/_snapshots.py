"""What crosses between the turn engine and the extension manager.

Snapshots are the JSON-safe views of hook contexts that extensions receive (camelCase on the wire,
snake_case in Python). `TurnPatch` is the extension-settable subset of TurnConfig; `MergedTurnPatch`
is the beforeTurn merge result with its provenance. `ExtensionDecision` is the merged beforeToolCall
decision of the extensions that opted in to decisions. `TraceEvent` records what each hook of each
extension did, for the CLI's hook trace and ChatResponseResult.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from ._turn_config_policy import TurnConfigDenial


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class CallContext(_Wire):
    session_id: str = ""
    request_id: str = ""
    traceparent: str = ""  # W3C trace context of the host's span (host/_telemetry.py); empty when not tracing
    tracestate: str = ""


class TurnSnapshot(_Wire):
    system: str = ""
    tool_names: list[str] = Field(default_factory=list)
    message_count: int = 0
    continuation: bool = False
    body: dict[str, Any] | None = None
    model_id: str = ""


class ToolCallSnapshot(_Wire):
    tool_name: str
    tool_call_id: str
    input: Any = None
    step_number: int | None = None
    dynamic: bool | None = None


class ToolResultSnapshot(_Wire):
    tool_name: str
    tool_call_id: str
    input: Any = None
    step_number: int | None = None
    duration_ms: float = 0.0
    success: bool = True
    output: Any = None
    error: dict[str, Any] | None = None  # {name, message, stack}
    dynamic: bool | None = None


class UsageSnapshot(_Wire):
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_input_tokens: int | None = None


class StepSnapshot(_Wire):
    step_number: int
    finish_reason: str = ""
    text: str = ""
    reasoning_text: str | None = None
    tool_call_count: int = 0
    tool_result_count: int = 0
    usage: UsageSnapshot = Field(default_factory=UsageSnapshot)
    provider_metadata: dict[str, Any] | None = None


class ChunkSnapshot(_Wire):
    type: str
    text: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None


_S = TypeVar("_S", bound=BaseModel)


def as_snapshot(model: type[_S], value: _S | Mapping[str, Any], what: str) -> _S:
    """`value` if it is already a `model`, else one validated from its dict (camelCase, or snake_case, keys).

    Raises TypeError for anything else and ValueError naming `what` and the field for an invalid dict."""
    if isinstance(value, model):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"{what}: expected a {model.__name__} or its dict, got {type(value).__name__}")
    try:
        return model.model_validate(dict(value))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ValueError(f"{what}: field {field}: {first['msg']}") from None


def as_context(value: CallContext | Mapping[str, Any] | None) -> CallContext | None:
    return None if value is None else as_snapshot(CallContext, value, "context")


class TurnPatch(_Wire):
    """The TurnConfig fields an extension may set (None: not set)."""

    system: str | None = None
    messages: list[dict[str, Any]] | None = None
    active_tools: list[str] | None = None
    tool_choice: str | dict[str, Any] | None = None
    max_steps: int | None = None
    send_reasoning: bool | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    stop_sequences: list[str] | None = None
    seed: int | None = None
    max_retries: int | None = None
    timeout: float | dict[str, Any] | None = None
    headers: dict[str, str] | None = None
    provider_options: dict[str, Any] | None = None

    def set_fields(self) -> dict[str, Any]:
        """Only the fields that are set, snake_case."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


class MergedTurnPatch(_Wire):
    """The beforeTurn merge across extensions: the patch and which extension set which field.

    provenance maps a camelCase field name to the extension that set its final value; for `headers`
    and `providerOptions` (merged key by key) it maps `headers.<key>` / `providerOptions.<provider>.<option>`
    to the extension that set that key. `denied`: what the trust boundary refused (host/extensions/_turn_config_policy.py).
    """

    patch: TurnPatch = Field(default_factory=TurnPatch)
    provenance: dict[str, str] = Field(default_factory=dict)
    denied: list[TurnConfigDenial] = Field(default_factory=list)


class ExtensionDecision(_Wire):
    """The extensions' merged beforeToolCall decision (deny wins, then the first substitute)."""

    action: Literal["allow", "block", "substitute"]
    input: Any = None
    has_input: bool = False
    reason: str | None = None
    output: Any = None
    extension: str  # who decided
    failed_closed: bool = False  # the block comes from a fail-closed extension that failed
    input_changed_by: list[str] = Field(default_factory=list)  # the mutators whose input change stands, in order


FailureReason = Literal["timeout", "error", "restarting", "quarantined"]


class TraceEvent(_Wire):
    """One hook (or tool) of one extension during a turn."""

    hook: str
    extension: str
    outcome: Literal["ok", "error", "timeout", "skipped", "denied", "failed_open", "failed_closed"]
    latency_ms: float = 0.0
    detail: str = ""
    request_id: str = ""  # the turn it belongs to; "" for events of no turn (lifecycle, egress outside a call)
    at: float = Field(default_factory=time.time)
    # why a failed or skipped hook/tool call of a turn failed: timeout, error, restarting, quarantined ("" if ok)
    reason: FailureReason | Literal[""] = ""
    # enforce: what the hook returned was applied; shadow: nothing was (the detail says what it would have done)
    mode: Literal["enforce", "shadow"] = "enforce"
    phase: Literal["mutate", "validate", ""] = ""  # a beforeToolCall decider's phase ("" for other hooks)


class SessionServices(Protocol):
    """What the HostBridge needs from the host for one session (implemented by host.Agent)."""

    @property
    def workspace_root(self) -> Any: ...  # a pathlib.Path, or None when the session has no workspace

    async def bridge_get_messages(self, limit: int) -> list[dict[str, Any]]: ...

    async def bridge_get_context(self, label: str) -> str | None: ...

    async def bridge_set_context(self, label: str, content: str, *, extension: str) -> None: ...

    async def bridge_send_message(self, text: str, role: str) -> str: ...

    async def bridge_session_info(self) -> dict[str, Any]: ...
