"""audit_log — appends every afterToolCall and onStepFinish as a JSON line to `audit/<session>.jsonl`
in the session's workspace, through the HostBridge (permissions: workspace read-write)."""

from __future__ import annotations

from typing import Any

from extension_sdk import Extension

from ._record import AUDIT_DIR, audit_line, audit_path

__all__ = ["AUDIT_DIR", "audit_line", "audit_path", "ext"]

ext = Extension("audit_log", "1.0.0", description="Tool calls and steps as JSON lines in audit/<session>.jsonl")


async def _append(host: Any, event: str, snapshot: dict[str, Any]) -> None:
    if host is None:
        raise RuntimeError("audit_log needs the HostBridge: its manifest must grant `workspace: read-write`")
    await host.write_file(audit_path(host.session_id), audit_line(event, host.session_id, snapshot), append=True)


@ext.hook("afterToolCall")
async def log_tool_call(snapshot: dict[str, Any], host: Any) -> None:
    await _append(host, "afterToolCall", snapshot)


@ext.hook("onStepFinish")
async def log_step(snapshot: dict[str, Any], host: Any) -> None:
    await _append(host, "onStepFinish", snapshot)
