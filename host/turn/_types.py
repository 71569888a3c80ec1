"""The typed contexts and results of a turn's hooks (Think's types, in Python naming).

Every model accepts and dumps the seed's camelCase names too (``toolCallId``, ``maxSteps``), so a hook may
return either a model instance or a plain dict in either spelling.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from ..extensions._snapshots import TraceEvent, UsageSnapshot
from ..extensions._turn_config_policy import TurnConfigDenial

ChatErrorClassification = Literal["context_overflow", "rate_limit", "transient", "fatal", "unknown"]
ChatErrorStage = Literal["parse", "persist", "turn", "stream", "recovery", "transcript"]
ChatStatus = Literal["completed", "error", "aborted", "skipped"]


class _Ctx(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, arbitrary_types_allowed=True, extra="ignore"
    )


# ----------------------------------------------------------------------------------------------- beforeTurn


class TurnContext(_Ctx):
    """What before_turn sees: the fully assembled context of the turn."""

    system: str = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)  # model (OpenAI-shaped) messages
    tools: dict[str, Any] = Field(default_factory=dict)  # name -> host.Tool (getTools + extensions)
    model: str = ""
    continuation: bool = False
    body: dict[str, Any] | None = None


class TurnConfig(_Ctx):
    """before_turn's return: only what you want to change. Callables are honoured from subclasses only."""

    model: str | None = None
    instructions: str | None = None  # Think's current name for `system` (preferred; wins when both are set)
    system: str | None = None
    messages: list[dict[str, Any]] | None = None
    tools: dict[str, Any] | None = None  # extra tools, merged additively (these win on a name collision)
    active_tools: list[str] | None = None
    tool_choice: str | dict[str, Any] | None = None
    max_steps: int | None = None
    stop_when: Any = None  # callable(steps: list[StepContext]) -> bool (sync or async), or a list of them
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
    timeout: float | dict[str, Any] | None = None  # ms, or {totalMs, chunkMs}
    chat_stream_stall_timeout_ms: int | None = None
    headers: dict[str, str] | None = None
    provider_options: dict[str, Any] | None = None
    experimental_transform: Any = None  # callable(chunk: dict) -> dict | None, or a list (applied in order)
    output: Any = None  # structured output: a JSON schema dict or a pydantic model class -> response_format
    # callable(ctx: ToolCallRepairContext) -> {toolName?, input} | None (sync or async): repair a tool call the model
    # got wrong (unknown tool, unparsable or invalid input) before it fails; None keeps the error (AI SDK's
    # experimental_repairToolCall)
    repair_tool_call: Any = None

    @model_validator(mode="after")
    def _instructions_are_the_system(self) -> "TurnConfig":
        if self.instructions is not None:
            self.system = self.instructions
        return self


class ToolCallRepairContext(_Ctx):
    """What TurnConfig.repair_tool_call sees: the failing call, why it failed, and the tools on offer."""

    tool_call_id: str
    tool_name: str
    input: str  # the arguments exactly as the model sent them (a JSON text, perhaps malformed)
    error: str
    tools: dict[str, Any] = Field(default_factory=dict)  # name -> JSON schema of its input
    messages: list[dict[str, Any]] = Field(default_factory=list)
    system: str = ""


# ----------------------------------------------------------------------------------------------- beforeStep


class PrepareStepContext(_Ctx):
    steps: list["StepContext"] = Field(default_factory=list)
    step_number: int = 0
    model: str = ""
    messages: list[dict[str, Any]] = Field(default_factory=list)
    experimental_context: Any = None


class StepConfig(_Ctx):
    model: str | None = None
    tool_choice: str | dict[str, Any] | None = None
    active_tools: list[str] | None = None
    system: str | dict[str, Any] | list[dict[str, Any]] | None = None
    messages: list[dict[str, Any]] | None = None
    experimental_context: Any = None
    provider_options: dict[str, Any] | None = None


# ----------------------------------------------------------------------------------------------- tool calls


class ToolCallContext(_Ctx):
    type: Literal["tool-call"] = "tool-call"
    tool_call_id: str
    tool_name: str
    input: Any = None
    dynamic: bool | None = None
    provider_metadata: dict[str, Any] | None = None
    step_number: int | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    abort_signal: asyncio.Event | None = None


class ToolCallDecision(_Ctx):
    """allow (optionally with a substituted input), block (optional reason) or substitute (an output)."""

    action: Literal["allow", "block", "substitute"] = "allow"
    input: Any = None
    reason: str | None = None
    output: Any = None
    has_input: bool = False  # set when "input" was given (None is a valid input)

    @model_validator(mode="before")
    @classmethod
    def _mark_input(cls, data: Any) -> Any:
        if isinstance(data, dict) and "input" in data and "has_input" not in data and "hasInput" not in data:
            data = {**data, "has_input": True}
        return data


class ToolCallResultContext(_Ctx):
    type: Literal["tool-call"] = "tool-call"
    tool_call_id: str
    tool_name: str
    input: Any = None
    dynamic: bool | None = None
    step_number: int | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    duration_ms: float = 0.0
    success: bool = True
    output: Any = None
    error: Any = None


# ----------------------------------------------------------------------------------------------- steps, chunks


#: Token usage of a step: the same model in StepContext and in the extensions' onStepFinish snapshot.
Usage = UsageSnapshot


class ToolCallRecord(_Ctx):
    tool_call_id: str
    tool_name: str
    input: Any = None
    dynamic: bool | None = None


class ToolResultRecord(_Ctx):
    tool_call_id: str
    tool_name: str
    input: Any = None
    output: Any = None
    error: Any = None
    success: bool = True
    dynamic: bool | None = None


class StepContext(_Ctx):
    """One finished step: the model produced text and/or tool calls, and the tools ran."""

    step_number: int
    text: str = ""
    reasoning: list[dict[str, Any]] = Field(default_factory=list)
    reasoning_text: str | None = None
    files: list[Any] = Field(default_factory=list)
    sources: list[Any] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    tool_results: list[ToolResultRecord] = Field(default_factory=list)
    finish_reason: str = "unknown"
    raw_finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    warnings: list[Any] | None = None
    request: dict[str, Any] = Field(default_factory=dict)
    response: dict[str, Any] = Field(default_factory=dict)
    provider_metadata: dict[str, Any] | None = None


ChunkType = Literal[
    "text-delta", "reasoning-delta", "source", "tool-call", "tool-input-start", "tool-input-delta", "tool-result", "raw"
]


class Chunk(_Ctx):
    type: ChunkType
    text: str | None = None
    id: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    input: Any = None
    output: Any = None
    preliminary: bool | None = None
    dynamic: bool | None = None
    raw_value: Any = None


class ChunkContext(_Ctx):
    chunk: Chunk


# ----------------------------------------------------------------------------------------------- results, errors


class ChatResponseResult(_Ctx):
    status: ChatStatus
    message: dict[str, Any] | None = None  # the persisted assistant message (UI shape)
    request_id: str
    continuation: bool = False
    error: str | None = None
    trace: list[TraceEvent] = Field(default_factory=list)
    failed_open: list[str] = Field(default_factory=list)  # extensions whose hook failed and was skipped
    # why, per extension in failed_open: "timeout", "error", "restarting", "quarantined" (host/turn/_attribution.py)
    failed_open_reasons: dict[str, list[str]] = Field(default_factory=dict)
    # which extension set which TurnConfig field in beforeTurn (camelCase; "headers.<key>" for merged maps), and
    # "toolInput.<toolCallId>": the beforeToolCall mutators whose input change stands ("a, b": in that order)
    provenance: dict[str, str] = Field(default_factory=dict)
    # what extensions returned from beforeTurn that the host refused: {extension, hook, field, reason} each
    denied: list[TurnConfigDenial] = Field(default_factory=list)


class ChatRecoveryContext(_Ctx):
    """What on_chat_recovery sees before a stalled turn is run again."""

    request_id: str
    kind: Literal["stream_stall"] = "stream_stall"
    attempt: int  # 1 for the first recovery
    max_attempts: int
    error: str


class ChatErrorContext(_Ctx):
    request_id: str | None = None
    stage: ChatErrorStage
    messages_persisted: bool = False
    classification: ChatErrorClassification | None = None


PrepareStepContext.model_rebuild()
