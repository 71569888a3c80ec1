"""Which extensions a turn went on without, and why: `failed_open` and `failed_open_reasons` from its trace.

A turn's result names an extension if and only if one of that turn's hooks or tool calls of that extension failed
open, failed, timed out or was skipped (the trace holds only events that carry the turn's request id: lifecycle
events such as a crash are no turn's). Each named extension comes with its reasons: "timeout", "error",
"restarting" (it was not called because it was being restarted), "quarantined".
"""

from __future__ import annotations

from collections.abc import Iterable

from ..extensions._snapshots import TraceEvent

FAILED_OUTCOMES = frozenset({"error", "timeout", "failed_open", "skipped"})


def attribute(trace: Iterable[TraceEvent], request_id: str) -> tuple[list[str], dict[str, list[str]]]:
    """(extension names sorted, {extension: its reasons sorted}) for the turn `request_id`."""
    reasons: dict[str, set[str]] = {}
    for event in trace:
        if event.outcome in FAILED_OUTCOMES and event.request_id == request_id:
            reasons.setdefault(event.extension, set()).add(event.reason or "error")
    return sorted(reasons), {name: sorted(why) for name, why in sorted(reasons.items())}
