"""Render a turn's hook trace and streamed chunks for people (the `hookwire run` / `chat` / `demo` output).

What these functions return is safe to print on a terminal (host._terminal_text): extension names, details,
tool names and model text are untrusted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ._cli_modes import SHADOW_MARK, has_shadow, mark
from ._terminal_text import terminal_safe
from .extensions._snapshots import TraceEvent

_MARK = {
    "ok": "ok",
    "error": "ERROR",
    "timeout": "TIMEOUT",
    "skipped": "skipped",
    "denied": "DENIED",
    "failed_open": "FAILED OPEN",
    "failed_closed": "FAILED CLOSED",
}


def format_trace(events: Iterable[TraceEvent], provenance: Mapping[str, str] | None = None) -> str:
    """A table: one line per hook of each extension, in the order they happened, then who set what. When a hook ran
    in shadow mode, a column between latency and outcome marks its rows SHADOW."""
    events = list(events)
    shadow = has_shadow(events)  # a mode column (SHADOW) only when a hook ran in shadow mode (host/_cli_modes.py)
    rows = [(e.hook, e.extension, f"{e.latency_ms:8.2f} ms", _MARK.get(e.outcome, e.outcome), e.detail, mark(e))
            for e in events]
    lines = ["hook trace:"]
    if not rows:
        lines.append("  (no extension hooks ran)")
    else:
        w_hook = max(len(r[0]) for r in rows)
        w_ext = max(len(r[1]) for r in rows)
        for hook, ext, latency, outcome, detail, mode in rows:
            column = f"{mode:<{len(SHADOW_MARK)}}  " if shadow else ""
            line = f"  {hook:<{w_hook}}  {ext:<{w_ext}}  {latency}  {column}{outcome}"
            if detail:
                line += f"  {detail}"
            lines.append(line)
    if provenance:
        lines.append("turn config set by extensions:")
        for field, ext in provenance.items():
            lines.append(f"  {field:<20} <- {ext}")
    return terminal_safe("\n".join(lines))


def render_chunk(chunk: Any) -> str:
    """What a person watching the stream should see of one chunk ("" for chunks worth no output)."""
    if chunk.type == "text-delta":
        return terminal_safe(chunk.text or "")
    if chunk.type == "tool-call":
        return terminal_safe(f"\n  [model calls {chunk.tool_name} {json.dumps(chunk.input)}]\n  ")
    if chunk.type == "tool-result" and chunk.preliminary:
        return terminal_safe(f"[{chunk.tool_name} preliminary: {json.dumps(chunk.output)}] ")
    return ""
