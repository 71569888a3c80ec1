from . import host_bridge_pb2 as _host_bridge_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DescribeRequest(_message.Message):
    __slots__ = ("protocol_version", "granted")
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    protocol_version: str
    granted: Grants
    def __init__(self, protocol_version: _Optional[str] = ..., granted: _Optional[_Union[Grants, _Mapping]] = ...) -> None: ...

class Grants(_message.Message):
    __slots__ = ("workspace", "messages", "context_read", "context_write", "send_message", "session_metadata", "network", "turn_config", "decisions", "host_bridge", "tool_phase", "shadow_hooks")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_READ_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_WRITE_FIELD_NUMBER: _ClassVar[int]
    SEND_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SESSION_METADATA_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    TURN_CONFIG_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    HOST_BRIDGE_FIELD_NUMBER: _ClassVar[int]
    TOOL_PHASE_FIELD_NUMBER: _ClassVar[int]
    SHADOW_HOOKS_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    messages: str
    context_read: _containers.RepeatedScalarFieldContainer[str]
    context_write: _containers.RepeatedScalarFieldContainer[str]
    send_message: bool
    session_metadata: bool
    network: _containers.RepeatedScalarFieldContainer[str]
    turn_config: _containers.RepeatedScalarFieldContainer[str]
    decisions: bool
    host_bridge: bool
    tool_phase: str
    shadow_hooks: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, workspace: _Optional[str] = ..., messages: _Optional[str] = ..., context_read: _Optional[_Iterable[str]] = ..., context_write: _Optional[_Iterable[str]] = ..., send_message: _Optional[bool] = ..., session_metadata: _Optional[bool] = ..., network: _Optional[_Iterable[str]] = ..., turn_config: _Optional[_Iterable[str]] = ..., decisions: _Optional[bool] = ..., host_bridge: _Optional[bool] = ..., tool_phase: _Optional[str] = ..., shadow_hooks: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("name", "version", "protocol_version", "hooks", "tools", "features", "description", "sdk")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    HOOKS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SDK_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    protocol_version: str
    hooks: _containers.RepeatedScalarFieldContainer[str]
    tools: _containers.RepeatedCompositeFieldContainer[ToolSpec]
    features: _containers.RepeatedScalarFieldContainer[str]
    description: str
    sdk: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., protocol_version: _Optional[str] = ..., hooks: _Optional[_Iterable[str]] = ..., tools: _Optional[_Iterable[_Union[ToolSpec, _Mapping]]] = ..., features: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., sdk: _Optional[str] = ...) -> None: ...

class ToolSpec(_message.Message):
    __slots__ = ("name", "description", "input_schema_json", "streaming")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    STREAMING_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    input_schema_json: str
    streaming: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema_json: _Optional[str] = ..., streaming: _Optional[bool] = ...) -> None: ...

class CallContext(_message.Message):
    __slots__ = ("session_id", "request_id", "traceparent", "tracestate", "deadline_unix_ms")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    request_id: str
    traceparent: str
    tracestate: str
    deadline_unix_ms: int
    def __init__(self, session_id: _Optional[str] = ..., request_id: _Optional[str] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ..., deadline_unix_ms: _Optional[int] = ...) -> None: ...

class TurnSnapshot(_message.Message):
    __slots__ = ("system", "tool_names", "message_count", "continuation", "body_json", "model_id")
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAMES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    CONTINUATION_FIELD_NUMBER: _ClassVar[int]
    BODY_JSON_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    system: str
    tool_names: _containers.RepeatedScalarFieldContainer[str]
    message_count: int
    continuation: bool
    body_json: str
    model_id: str
    def __init__(self, system: _Optional[str] = ..., tool_names: _Optional[_Iterable[str]] = ..., message_count: _Optional[int] = ..., continuation: _Optional[bool] = ..., body_json: _Optional[str] = ..., model_id: _Optional[str] = ...) -> None: ...

class ToolCallSnapshot(_message.Message):
    __slots__ = ("tool_name", "tool_call_id", "input_json", "step_number", "dynamic")
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    STEP_NUMBER_FIELD_NUMBER: _ClassVar[int]
    DYNAMIC_FIELD_NUMBER: _ClassVar[int]
    tool_name: str
    tool_call_id: str
    input_json: str
    step_number: int
    dynamic: bool
    def __init__(self, tool_name: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., input_json: _Optional[str] = ..., step_number: _Optional[int] = ..., dynamic: _Optional[bool] = ...) -> None: ...

class ToolResultSnapshot(_message.Message):
    __slots__ = ("tool_name", "tool_call_id", "input_json", "step_number", "duration_ms", "success", "output_json", "error_json", "dynamic")
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    STEP_NUMBER_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_JSON_FIELD_NUMBER: _ClassVar[int]
    DYNAMIC_FIELD_NUMBER: _ClassVar[int]
    tool_name: str
    tool_call_id: str
    input_json: str
    step_number: int
    duration_ms: float
    success: bool
    output_json: str
    error_json: str
    dynamic: bool
    def __init__(self, tool_name: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., input_json: _Optional[str] = ..., step_number: _Optional[int] = ..., duration_ms: _Optional[float] = ..., success: _Optional[bool] = ..., output_json: _Optional[str] = ..., error_json: _Optional[str] = ..., dynamic: _Optional[bool] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "total_tokens", "reasoning_tokens", "cached_input_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    total_tokens: int
    reasoning_tokens: int
    cached_input_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ...) -> None: ...

class StepSnapshot(_message.Message):
    __slots__ = ("step_number", "finish_reason", "text", "reasoning_text", "tool_call_count", "tool_result_count", "usage", "provider_metadata_json")
    STEP_NUMBER_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    REASONING_TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_COUNT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_METADATA_JSON_FIELD_NUMBER: _ClassVar[int]
    step_number: int
    finish_reason: str
    text: str
    reasoning_text: str
    tool_call_count: int
    tool_result_count: int
    usage: Usage
    provider_metadata_json: str
    def __init__(self, step_number: _Optional[int] = ..., finish_reason: _Optional[str] = ..., text: _Optional[str] = ..., reasoning_text: _Optional[str] = ..., tool_call_count: _Optional[int] = ..., tool_result_count: _Optional[int] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., provider_metadata_json: _Optional[str] = ...) -> None: ...

class ChunkSnapshot(_message.Message):
    __slots__ = ("type", "text", "tool_name", "tool_call_id")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    type: str
    text: str
    tool_name: str
    tool_call_id: str
    def __init__(self, type: _Optional[str] = ..., text: _Optional[str] = ..., tool_name: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class StringList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class StringMap(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.ScalarMap[str, str]
    def __init__(self, values: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TurnConfigPatch(_message.Message):
    __slots__ = ("system", "messages_json", "active_tools", "tool_choice_json", "max_steps", "send_reasoning", "max_output_tokens", "temperature", "top_p", "top_k", "presence_penalty", "frequency_penalty", "stop_sequences", "seed", "max_retries", "timeout_json", "headers", "provider_options_json", "extra_json")
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_JSON_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_JSON_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    SEND_REASONING_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    STOP_SEQUENCES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_JSON_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_OPTIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    system: str
    messages_json: str
    active_tools: StringList
    tool_choice_json: str
    max_steps: int
    send_reasoning: bool
    max_output_tokens: int
    temperature: float
    top_p: float
    top_k: float
    presence_penalty: float
    frequency_penalty: float
    stop_sequences: StringList
    seed: int
    max_retries: int
    timeout_json: str
    headers: StringMap
    provider_options_json: str
    extra_json: str
    def __init__(self, system: _Optional[str] = ..., messages_json: _Optional[str] = ..., active_tools: _Optional[_Union[StringList, _Mapping]] = ..., tool_choice_json: _Optional[str] = ..., max_steps: _Optional[int] = ..., send_reasoning: _Optional[bool] = ..., max_output_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., top_k: _Optional[float] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., stop_sequences: _Optional[_Union[StringList, _Mapping]] = ..., seed: _Optional[int] = ..., max_retries: _Optional[int] = ..., timeout_json: _Optional[str] = ..., headers: _Optional[_Union[StringMap, _Mapping]] = ..., provider_options_json: _Optional[str] = ..., extra_json: _Optional[str] = ...) -> None: ...

class ToolCallDecision(_message.Message):
    __slots__ = ("action", "input_json", "reason", "output_json")
    class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ACTION_UNSPECIFIED: _ClassVar[ToolCallDecision.Action]
        ALLOW: _ClassVar[ToolCallDecision.Action]
        BLOCK: _ClassVar[ToolCallDecision.Action]
        SUBSTITUTE: _ClassVar[ToolCallDecision.Action]
    ACTION_UNSPECIFIED: ToolCallDecision.Action
    ALLOW: ToolCallDecision.Action
    BLOCK: ToolCallDecision.Action
    SUBSTITUTE: ToolCallDecision.Action
    ACTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    action: ToolCallDecision.Action
    input_json: str
    reason: str
    output_json: str
    def __init__(self, action: _Optional[_Union[ToolCallDecision.Action, str]] = ..., input_json: _Optional[str] = ..., reason: _Optional[str] = ..., output_json: _Optional[str] = ...) -> None: ...

class HookError(_message.Message):
    __slots__ = ("hook", "name", "message", "stack")
    HOOK_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STACK_FIELD_NUMBER: _ClassVar[int]
    hook: str
    name: str
    message: str
    stack: str
    def __init__(self, hook: _Optional[str] = ..., name: _Optional[str] = ..., message: _Optional[str] = ..., stack: _Optional[str] = ...) -> None: ...

class BeforeTurnRequest(_message.Message):
    __slots__ = ("context", "snapshot")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    context: CallContext
    snapshot: TurnSnapshot
    def __init__(self, context: _Optional[_Union[CallContext, _Mapping]] = ..., snapshot: _Optional[_Union[TurnSnapshot, _Mapping]] = ...) -> None: ...

class BeforeTurnResponse(_message.Message):
    __slots__ = ("config", "error")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    config: TurnConfigPatch
    error: HookError
    def __init__(self, config: _Optional[_Union[TurnConfigPatch, _Mapping]] = ..., error: _Optional[_Union[HookError, _Mapping]] = ...) -> None: ...

class BeforeToolCallRequest(_message.Message):
    __slots__ = ("context", "snapshot", "want_decision")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    WANT_DECISION_FIELD_NUMBER: _ClassVar[int]
    context: CallContext
    snapshot: ToolCallSnapshot
    want_decision: bool
    def __init__(self, context: _Optional[_Union[CallContext, _Mapping]] = ..., snapshot: _Optional[_Union[ToolCallSnapshot, _Mapping]] = ..., want_decision: _Optional[bool] = ...) -> None: ...

class BeforeToolCallResponse(_message.Message):
    __slots__ = ("decision", "error")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    decision: ToolCallDecision
    error: HookError
    def __init__(self, decision: _Optional[_Union[ToolCallDecision, _Mapping]] = ..., error: _Optional[_Union[HookError, _Mapping]] = ...) -> None: ...

class AfterToolCallRequest(_message.Message):
    __slots__ = ("context", "snapshot")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    context: CallContext
    snapshot: ToolResultSnapshot
    def __init__(self, context: _Optional[_Union[CallContext, _Mapping]] = ..., snapshot: _Optional[_Union[ToolResultSnapshot, _Mapping]] = ...) -> None: ...

class OnStepFinishRequest(_message.Message):
    __slots__ = ("context", "snapshot")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    context: CallContext
    snapshot: StepSnapshot
    def __init__(self, context: _Optional[_Union[CallContext, _Mapping]] = ..., snapshot: _Optional[_Union[StepSnapshot, _Mapping]] = ...) -> None: ...

class OnChunkRequest(_message.Message):
    __slots__ = ("context", "snapshot")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    context: CallContext
    snapshot: ChunkSnapshot
    def __init__(self, context: _Optional[_Union[CallContext, _Mapping]] = ..., snapshot: _Optional[_Union[ChunkSnapshot, _Mapping]] = ...) -> None: ...

class HookAck(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: HookError
    def __init__(self, error: _Optional[_Union[HookError, _Mapping]] = ...) -> None: ...

class Observation(_message.Message):
    __slots__ = ("before_tool_call", "after_tool_call", "step_finish", "chunk")
    BEFORE_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    AFTER_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    STEP_FINISH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    before_tool_call: ToolCallSnapshot
    after_tool_call: ToolResultSnapshot
    step_finish: StepSnapshot
    chunk: ChunkSnapshot
    def __init__(self, before_tool_call: _Optional[_Union[ToolCallSnapshot, _Mapping]] = ..., after_tool_call: _Optional[_Union[ToolResultSnapshot, _Mapping]] = ..., step_finish: _Optional[_Union[StepSnapshot, _Mapping]] = ..., chunk: _Optional[_Union[ChunkSnapshot, _Mapping]] = ...) -> None: ...

class ObservationBatch(_message.Message):
    __slots__ = ("context", "items")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    context: CallContext
    items: _containers.RepeatedCompositeFieldContainer[Observation]
    def __init__(self, context: _Optional[_Union[CallContext, _Mapping]] = ..., items: _Optional[_Iterable[_Union[Observation, _Mapping]]] = ...) -> None: ...

class ObservationAck(_message.Message):
    __slots__ = ("handled", "errors")
    HANDLED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    handled: int
    errors: _containers.RepeatedCompositeFieldContainer[HookError]
    def __init__(self, handled: _Optional[int] = ..., errors: _Optional[_Iterable[_Union[HookError, _Mapping]]] = ...) -> None: ...

class HostFrame(_message.Message):
    __slots__ = ("id", "before_turn", "before_tool_call", "observations", "execute_tool", "cancel", "bridge_response", "more_observations", "prelude")
    ID_FIELD_NUMBER: _ClassVar[int]
    BEFORE_TURN_FIELD_NUMBER: _ClassVar[int]
    BEFORE_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_TOOL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    BRIDGE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    MORE_OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    PRELUDE_FIELD_NUMBER: _ClassVar[int]
    id: int
    before_turn: BeforeTurnRequest
    before_tool_call: BeforeToolCallRequest
    observations: ObservationBatch
    execute_tool: ExecuteToolRequest
    cancel: CancelCall
    bridge_response: _host_bridge_pb2.BridgeResponse
    more_observations: _containers.RepeatedCompositeFieldContainer[ObservationBatch]
    prelude: ObservationBatch
    def __init__(self, id: _Optional[int] = ..., before_turn: _Optional[_Union[BeforeTurnRequest, _Mapping]] = ..., before_tool_call: _Optional[_Union[BeforeToolCallRequest, _Mapping]] = ..., observations: _Optional[_Union[ObservationBatch, _Mapping]] = ..., execute_tool: _Optional[_Union[ExecuteToolRequest, _Mapping]] = ..., cancel: _Optional[_Union[CancelCall, _Mapping]] = ..., bridge_response: _Optional[_Union[_host_bridge_pb2.BridgeResponse, _Mapping]] = ..., more_observations: _Optional[_Iterable[_Union[ObservationBatch, _Mapping]]] = ..., prelude: _Optional[_Union[ObservationBatch, _Mapping]] = ...) -> None: ...

class CancelCall(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class ExtensionFrame(_message.Message):
    __slots__ = ("id", "before_turn", "before_tool_call", "observations", "tool_event", "bridge_request")
    ID_FIELD_NUMBER: _ClassVar[int]
    BEFORE_TURN_FIELD_NUMBER: _ClassVar[int]
    BEFORE_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    OBSERVATIONS_FIELD_NUMBER: _ClassVar[int]
    TOOL_EVENT_FIELD_NUMBER: _ClassVar[int]
    BRIDGE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    id: int
    before_turn: BeforeTurnResponse
    before_tool_call: BeforeToolCallResponse
    observations: ObservationAck
    tool_event: ToolEvent
    bridge_request: _host_bridge_pb2.BridgeRequest
    def __init__(self, id: _Optional[int] = ..., before_turn: _Optional[_Union[BeforeTurnResponse, _Mapping]] = ..., before_tool_call: _Optional[_Union[BeforeToolCallResponse, _Mapping]] = ..., observations: _Optional[_Union[ObservationAck, _Mapping]] = ..., tool_event: _Optional[_Union[ToolEvent, _Mapping]] = ..., bridge_request: _Optional[_Union[_host_bridge_pb2.BridgeRequest, _Mapping]] = ...) -> None: ...

class ExecuteToolRequest(_message.Message):
    __slots__ = ("context", "name", "input_json", "tool_call_id")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    context: CallContext
    name: str
    input_json: str
    tool_call_id: str
    def __init__(self, context: _Optional[_Union[CallContext, _Mapping]] = ..., name: _Optional[str] = ..., input_json: _Optional[str] = ..., tool_call_id: _Optional[str] = ...) -> None: ...

class ToolEvent(_message.Message):
    __slots__ = ("preliminary_json", "output_json", "error")
    PRELIMINARY_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    preliminary_json: str
    output_json: str
    error: HookError
    def __init__(self, preliminary_json: _Optional[str] = ..., output_json: _Optional[str] = ..., error: _Optional[_Union[HookError, _Mapping]] = ...) -> None: ...

class ShutdownRequest(_message.Message):
    __slots__ = ("grace_ms",)
    GRACE_MS_FIELD_NUMBER: _ClassVar[int]
    grace_ms: int
    def __init__(self, grace_ms: _Optional[int] = ...) -> None: ...

class ShutdownResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
