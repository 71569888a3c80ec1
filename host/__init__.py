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

__all__ = [name for name in dir() if not name.startswith("_")]
