"""hookwire host runtime: run LLM chat turns with out-of-process extensions hooked into every stage.

Public API (everything else in this package is private):

    from host import Agent, tool, ExtensionManager, load_manifest, Manifest, ManifestError
"""

from ._manifest import (
    HOOK_NAMES,
    HookPolicy,
    Limits,
    Manifest,
    ManifestError,
    Permissions,
    load_manifest,
    manifest_json_schema,
    parse_manifest,
    sanitize_name,
)
from ._snapshots import (
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

# -- exports added by later modules go below this line --
from ._sandbox import LaunchPlan, SandboxMode, SandboxUnavailable, plan_launch, sandbox_capabilities  # noqa: E402
from ._bridge import HostBridgeServer, own_label  # noqa: E402
from ._egress_policy import EgressEntryError, EgressPolicy, EgressRule  # noqa: E402
from ._egress_proxy import EgressEvent, EgressProxy  # noqa: E402
from ._terminal_text import terminal_safe  # noqa: E402
from ._tool_names import ToolNameCollision  # noqa: E402
from ._extension_errors import (  # noqa: E402
    ExtensionError,
    ExtensionReplyError,
    ExtensionStartError,
    ExtensionToolError,
    ExtensionUnavailableError,
    ExtensionUnloadedError,
)
from ._extension_manager import ExtensionInfo, ExtensionManager, ExtensionTool  # noqa: E402
from ._store import MessageStore, StoreError, StoreVersionError  # noqa: E402
from ._pg_store import PostgresMessageStore  # noqa: E402
from ._store_backends import open_store  # noqa: E402
from ._turn_config_policy import (  # noqa: E402
    GRANTABLE_FIELDS as TURN_CONFIG_GRANTABLE_FIELDS,
    PROVIDER_OPTION_ALLOWLIST,
    SCALAR_FIELDS as TURN_CONFIG_SCALAR_FIELDS,
    TurnConfigDenial,
)

from ._agent import Agent  # noqa: E402
from ._chat_errors import ChatStreamStallError, NestedTurnError, default_context_overflow_classifier  # noqa: E402
from ._session import ContextBlock, Session  # noqa: E402
from ._tools import Tool, ToolInputError, tool  # noqa: E402
from ._turn_types import (  # noqa: E402
    ChatErrorClassification,
    ChatErrorContext,
    ChatResponseResult,
    Chunk,
    ChunkContext,
    PrepareStepContext,
    StepConfig,
    StepContext,
    ToolCallContext,
    ToolCallDecision,
    ToolCallRecord,
    ToolCallResultContext,
    ToolResultRecord,
    TurnConfig,
    TurnContext,
    Usage,
)


def __getattr__(name: str) -> object:
    # The scripted model subclasses litellm's CustomLLM, and litellm takes ~2 s to import: load it on first use.
    if name in ("SCRIPTED_MODEL", "register_scripted_model"):
        from . import _scripted_model

        return getattr(_scripted_model, name)
    raise AttributeError(f"module 'host' has no attribute {name!r}")


__all__ = [name for name in dir() if not name.startswith("_")] + ["SCRIPTED_MODEL", "register_scripted_model"]
