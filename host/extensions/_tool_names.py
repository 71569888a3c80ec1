"""Who owns a tool name, and the rule that no one takes a name another owner already has.

Extension tools are exposed as `{sanitized extension name}_{tool}`, so different (extension, tool) pairs can
meet on one name: extension `pay` + tool `invoice` is `pay_invoice`, which may be a host tool; `my` +
`tools_search` and `my-tools` + `search` are both `my_tools_search`. Invariants:

- **Host tools are never replaced by an extension.** Where host and extension tools meet (`Agent.start()`, the
  first point where both are known, and every turn, since `get_tools()` may change per turn), a collision is
  refused: at start with `ToolNameCollision`; in a turn the host's tool stays, the extension's is withheld from
  the model, logged and traced as `denied` naming both owners.
- **Two extensions never share a name.** The manager refuses the later one at load (`ToolNameCollision`, an
  ExtensionStartError); a tool that appears in an extension's Describe *after a restart* and collides is
  dropped (logged with both owners) — the restart cannot take a name from anyone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ._snapshots import TraceEvent


def extension_owner(extension: str, tool: str) -> str:
    return f"extension {extension!r} (its tool {tool!r})"


def collision_message(name: str, holder: str, newcomer: str) -> str:
    """One clear sentence naming both owners of `name`."""
    return (
        f"tool name {name!r} collides: {newcomer} would be exposed as {name!r}, which already belongs to {holder}; "
        "a tool name is never taken over (rename the tool or the extension)"
    )


def extension_collisions(
    new_tools: Mapping[str, tuple[str, str]], taken: Mapping[str, str]
) -> list[tuple[str, str, str]]:
    """(name, holder, newcomer) for each of `new_tools` ({full name: (extension, tool)}) already in `taken`
    ({full name: owner description})."""
    return [
        (name, taken[name], extension_owner(ext, tool)) for name, (ext, tool) in new_tools.items() if name in taken
    ]


def host_collisions(host_names: Iterable[str], ext_tools: Mapping[str, tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(name, "the host tool", extension owner) for each extension tool named like a host tool."""
    return [
        (name, f"the host tool {name!r}", extension_owner(*ext_tools[name])) for name in host_names if name in ext_tools
    ]


def withhold_shadowing(
    tools: dict[str, Any], ext_tools: Mapping[str, Any], owners: Mapping[str, tuple[str, str]], request_id: str = ""
) -> list[TraceEvent]:
    """Add `ext_tools` to the turn's `tools` (the host's), except those named like a host tool: each of those is
    withheld (the host's stays) and returned as a `denied` trace event naming both owners."""
    denied: list[TraceEvent] = []
    for name, ext_tool in ext_tools.items():
        if name not in tools:
            tools[name] = ext_tool
            continue
        extension, tool = owners[name]
        message = collision_message(name, f"the host tool {name!r}", extension_owner(extension, tool))
        denied.append(TraceEvent(hook="tools", extension=extension, outcome="denied", detail=message,
                                 request_id=request_id))
    return denied
