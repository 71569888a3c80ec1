"""The public API of `host` and `extension_sdk` is exactly this: a rename or a lost export fails here first."""

import importlib

import pytest

HOST_EXPORTS = [
    "HOOK_NAMES", "PROVIDER_OPTION_ALLOWLIST", "SCRIPTED_MODEL", "TURN_CONFIG_GRANTABLE_FIELDS",
    "TURN_CONFIG_SCALAR_FIELDS", "Agent", "CallContext", "ChatErrorClassification", "ChatErrorContext",
    "ChatRecoveryContext", "ChatResponseResult", "ChatStreamStallError", "Chunk", "ChunkContext", "ChunkSnapshot",
    "ClauseResult", "ConformanceReport", "ContextBlock",
    "EgressEntryError", "EgressEvent", "EgressPolicy", "EgressProxy", "EgressRule", "ExtensionDecision",
    "ExtensionError", "ExtensionInfo", "ExtensionManager", "ExtensionReplyError", "ExtensionStartError",
    "ExtensionTool", "ExtensionToolError", "ExtensionUnavailableError", "ExtensionUnloadedError", "HookPolicy",
    "HostBridgeServer", "JsonFormatter", "LaunchPlan", "Limits", "Manifest", "ManifestError", "MergedTurnPatch", "MessageStore",
    "NestedTurnError", "Permissions", "PostgresMessageStore", "PreloadReport", "PrepareStepContext", "SandboxMode", "SandboxUnavailable", "Session",
    "StepConfig", "StepContext", "StepSnapshot", "StoreError", "StoreVersionError", "Tool", "ToolCallContext",
    "ToolCallDecision", "ToolCallRecord", "ToolCallRepairContext", "ToolCallResultContext", "ToolCallSnapshot", "ToolInputError",
    "ToolNameCollision", "ToolResultRecord", "ToolResultSnapshot", "TraceEvent", "TurnConfig", "TurnConfigDenial",
    "TurnContext", "TurnPatch", "TurnSnapshot", "Usage", "UsageSnapshot", "configure_logging", "default_context_overflow_classifier",
    "load_manifest", "manifest_json_schema", "open_store", "own_label", "parse_manifest", "plan_launch", "preload",
    "register_scripted_model", "run_conformance", "sandbox_capabilities", "sanitize_name", "terminal_safe", "tool",
]

SDK_EXPORTS = [
    "HOOK_NAMES", "MAGIC_COOKIE", "CallInfo", "Extension", "Grants", "HookDef", "Host", "HostError", "SyncHost", "ToolDef",
    "__version__", "current_call",
]


@pytest.mark.parametrize(("module", "expected"), [("host", HOST_EXPORTS), ("extension_sdk", SDK_EXPORTS)])
def test_public_exports_are_exactly_the_documented_names(module: str, expected: list[str]) -> None:
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(expected)


@pytest.mark.parametrize(("module", "expected"), [("host", HOST_EXPORTS), ("extension_sdk", SDK_EXPORTS)])
def test_every_export_resolves(module: str, expected: list[str]) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in expected if getattr(mod, name, None) is None]
    assert missing == []


def test_every_public_host_exception_lives_in_the_errors_module() -> None:
    import host
    from host import _errors

    exceptions = sorted(n for n in host.__all__ if isinstance(getattr(host, n), type)
                        and issubclass(getattr(host, n), BaseException))
    assert exceptions == sorted(_errors.__all__)
    assert all(getattr(host, n) is getattr(_errors, n) for n in exceptions)


def test_unloaded_and_unavailable_are_distinct_extension_errors() -> None:
    from host import ExtensionError, ExtensionUnavailableError, ExtensionUnloadedError

    assert issubclass(ExtensionUnloadedError, ExtensionError)
    assert issubclass(ExtensionUnavailableError, ExtensionError)
    assert not issubclass(ExtensionUnloadedError, ExtensionUnavailableError)
    assert not issubclass(ExtensionUnavailableError, ExtensionUnloadedError)


def test_importing_host_does_not_import_litellm() -> None:
    import subprocess
    import sys

    code = "import sys, host; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
