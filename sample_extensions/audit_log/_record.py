"""What one audit line looks like, and where it goes."""

from __future__ import annotations

import json
import re
import time
from typing import Any

AUDIT_DIR = "audit"
MAX_VALUE_CHARS = 2000  # tool inputs/outputs longer than this (as JSON) are truncated in the log

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def audit_path(session_id: str) -> str:
    """The workspace path of a session's audit log: `audit/<session>.jsonl` (the id made filename-safe)."""
    safe = _UNSAFE.sub("_", session_id).strip("._") or "no-session"
    return f"{AUDIT_DIR}/{safe}.jsonl"


def _bounded(value: Any) -> Any:
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= MAX_VALUE_CHARS:
        return value
    return {"truncated": True, "chars": len(text), "head": text[:MAX_VALUE_CHARS]}


def audit_line(event: str, session_id: str, snapshot: dict[str, Any], *, now: float | None = None) -> str:
    """One JSON line (newline-terminated): {ts, event, session, ...snapshot}, big values truncated."""
    record: dict[str, Any] = {"ts": round(time.time() if now is None else now, 3), "event": event, "session": session_id}
    for key, value in snapshot.items():
        record[key] = _bounded(value) if key in ("input", "output", "error", "text", "providerMetadata") else value
    return json.dumps(record, ensure_ascii=False, default=str) + "\n"
