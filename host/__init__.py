"""hookwire host runtime: run LLM chat turns with out-of-process extensions hooked into every stage.

Public API (everything else in this package is private):

    from host import Agent, tool, ExtensionManager, load_manifest, Manifest, ManifestError

Three wings, each a subpackage with its own map in its `__init__`: `host.turn` (the turn engine: Agent and the
loop on litellm, no gRPC), `host.extensions` (the extension host: manifests, processes, dispatch, HostBridge)
and `host.sandbox` (confinement of extension processes, egress proxy). Every public exception is in
`host._errors` (its docstring draws the tree). `tests/test_exports.py` pins this list.
"""

from extension_sdk.proto import HOOK_NAMES

from ._errors import (
    ChatStreamStallError,
    EgressEntryError,
    ExtensionError,
    ExtensionReplyError,
    ExtensionStartError,
    ExtensionToolError,
    ExtensionUnavailableError,
    ExtensionUnloadedError,
    ManifestError,
    NestedTurnError,
    SandboxUnavailable,
    StoreError,
    StoreVersionError,
    ToolInputError,
    ToolNameCollision,
)
from ._logging import JsonFormatter, configure_logging
from ._terminal_text import terminal_safe
from .extensions._bridge_server import HostBridgeServer, own_label
from .extensions._manager import ExtensionManager
from .extensions._manifest import (
    HookPolicy,
    Limits,
    Manifest,
    Permissions,
    load_manifest,
    manifest_json_schema,
    parse_manifest,
    sanitize_name,
)
from .extensions._snapshots import (
    CallContext,
    ChunkSnapshot,
    ExtensionDecision,
    MergedTurnPatch,
    StepSnapshot,
    ToolCallSnapshot,
    ToolResultSnapshot,
    TraceEvent,
    TurnPatch,
    TurnSnapshot,
    UsageSnapshot,
)
from .extensions._state import ExtensionInfo, ExtensionTool
from .extensions._turn_config_policy import (
    GRANTABLE_FIELDS as TURN_CONFIG_GRANTABLE_FIELDS,
)
from .extensions._turn_config_policy import (
    PROVIDER_OPTION_ALLOWLIST,
    TurnConfigDenial,
)
from .extensions._turn_config_policy import (
    SCALAR_FIELDS as TURN_CONFIG_SCALAR_FIELDS,
)
from .sandbox._egress_policy import EgressPolicy, EgressRule
from .sandbox._egress_proxy import EgressEvent, EgressProxy
from .sandbox._plan import LaunchPlan, SandboxMode, plan_launch, sandbox_capabilities
from .turn._agent import Agent
from .turn._chat_errors import default_context_overflow_classifier
from .turn._pg_store import PostgresMessageStore
from .turn._preload import PreloadReport, preload
from .turn._session import ContextBlock, Session
from .turn._store import MessageStore
from .turn._store_backends import open_store
from .turn._tools import Tool, tool
from .turn._types import (
    ChatErrorClassification,
    ChatErrorContext,
    ChatRecoveryContext,
    ChatResponseResult,
    Chunk,
    ChunkContext,
    PrepareStepContext,
    StepConfig,
    StepContext,
    ToolCallContext,
    ToolCallDecision,
    ToolCallRecord,
    ToolCallRepairContext,
    ToolCallResultContext,
    ToolResultRecord,
    TurnConfig,
    TurnContext,
    Usage,
)

_CONFORMANCE = ("ClauseResult", "ConformanceReport", "run_conformance")


def __getattr__(name: str) -> object:
    # The scripted model subclasses litellm's CustomLLM, and litellm takes ~2 s to import: load it on first use.
    if name in ("SCRIPTED_MODEL", "register_scripted_model"):
        from .turn import _scripted_model

        return getattr(_scripted_model, name)
    if name in _CONFORMANCE:  # the conformance kit (`hookwire ext test`): jsonschema is imported only for it
        from . import conformance

        return getattr(conformance, name)
    raise AttributeError(f"module 'host' has no attribute {name!r}")


__all__ = [
    "HOOK_NAMES",
    "PROVIDER_OPTION_ALLOWLIST",
    "SCRIPTED_MODEL",
    "TURN_CONFIG_GRANTABLE_FIELDS",
    "TURN_CONFIG_SCALAR_FIELDS",
    "Agent",
    "CallContext",
    "ChatErrorClassification",
    "ChatErrorContext",
    "ChatRecoveryContext",
    "ChatResponseResult",
    "ChatStreamStallError",
    "Chunk",
    "ChunkContext",
    "ChunkSnapshot",
    "ClauseResult",
    "ConformanceReport",
    "ContextBlock",
    "EgressEntryError",
    "EgressEvent",
    "EgressPolicy",
    "EgressProxy",
    "EgressRule",
    "ExtensionDecision",
    "ExtensionError",
    "ExtensionInfo",
    "ExtensionManager",
    "ExtensionReplyError",
    "ExtensionStartError",
    "ExtensionTool",
    "ExtensionToolError",
    "ExtensionUnavailableError",
    "ExtensionUnloadedError",
    "HookPolicy",
    "HostBridgeServer",
    "JsonFormatter",
    "LaunchPlan",
    "Limits",
    "Manifest",
    "ManifestError",
    "MergedTurnPatch",
    "MessageStore",
    "NestedTurnError",
    "Permissions",
    "PostgresMessageStore",
    "PreloadReport",
    "PrepareStepContext",
    "SandboxMode",
    "SandboxUnavailable",
    "Session",
    "StepConfig",
    "StepContext",
    "StepSnapshot",
    "StoreError",
    "StoreVersionError",
    "Tool",
    "ToolCallContext",
    "ToolCallDecision",
    "ToolCallRecord",
    "ToolCallRepairContext",
    "ToolCallResultContext",
    "ToolCallSnapshot",
    "ToolInputError",
    "ToolNameCollision",
    "ToolResultRecord",
    "ToolResultSnapshot",
    "TraceEvent",
    "TurnConfig",
    "TurnConfigDenial",
    "TurnContext",
    "TurnPatch",
    "TurnSnapshot",
    "Usage",
    "UsageSnapshot",
    "configure_logging",
    "default_context_overflow_classifier",
    "load_manifest",
    "manifest_json_schema",
    "open_store",
    "own_label",
    "parse_manifest",
    "plan_launch",
    "preload",
    "register_scripted_model",
    "run_conformance",
    "sandbox_capabilities",
    "sanitize_name",
    "terminal_safe",
    "tool",
]
