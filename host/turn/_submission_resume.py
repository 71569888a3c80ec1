"""Resuming a durable submission exactly once: was it already answered before its host died?

A host can die after the turn wrote its answer but before the submission was marked finished (a few milliseconds at
the end of a turn). The host that resumes it (after claiming it: host/turn/_pg_store.py, or after a restart on SQLite)
checks the transcript first: when the submission's last message is there, followed at once by an assistant message,
that message is the answer, and the turn is not run again.
"""

from __future__ import annotations

from typing import Any


def earlier_answer(transcript: list[dict[str, Any]], submitted: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The assistant message that answered `submitted` (the submission's messages), or None if it was never answered."""
    ids = [m.get("id") for m in submitted if isinstance(m, dict) and m.get("id")]
    if not ids:
        return None
    last = ids[-1]
    for i, message in enumerate(transcript):
        if message.get("id") == last:
            following = transcript[i + 1] if i + 1 < len(transcript) else None
            if following is not None and following.get("role") == "assistant":
                return following
            return None
    return None
