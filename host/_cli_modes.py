"""How shadow mode and the beforeToolCall phase read in the CLI: `hookwire ext list` (plain and rich) and the mode
marker of the hook trace.

An operator rolling out a guard must see at a glance which extensions (and which of their hooks) only watch:
`mode_text` is the extension's mode with the hooks whose own mode differs ("shadow (beforeToolCall: enforce)"),
`phase_text` its beforeToolCall phase ("" when it makes no decisions). In the trace, a shadow row carries
SHADOW_MARK in a column of its own, present only when the turn had a shadow row (so a trace without shadow hooks
prints as it always did).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SHADOW_MARK = "SHADOW"


def mode_text(info: Mapping[str, Any]) -> str:
    """An ExtensionInfo dump's mode: "enforce", "shadow", or with the hooks that differ: "enforce (onChunk: shadow)"."""
    mode = str(info.get("mode") or "enforce")
    differ = info.get("hook_modes") or {}
    if not differ:
        return mode
    return f"{mode} ({', '.join(f'{hook}: {m}' for hook, m in differ.items())})"


def phase_text(info: Mapping[str, Any]) -> str:
    """An ExtensionInfo dump's beforeToolCall phase ("mutate" / "validate"), "" when it makes no decisions."""
    return str(info.get("phase") or "")


def has_shadow(events: Any) -> bool:
    """Whether a trace has a row whose hook ran in shadow mode (then the trace shows the mode column)."""
    return any(getattr(e, "mode", "enforce") == "shadow" for e in events)


def mark(event: Any) -> str:
    """The mode column of one trace row: SHADOW_MARK for a shadow row, "" for an enforcing one."""
    return SHADOW_MARK if getattr(event, "mode", "enforce") == "shadow" else ""
