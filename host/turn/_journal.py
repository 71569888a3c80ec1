"""The decision journal's entries: what one awaited hook of one extension saw and answered, hash-chained per session.

An entry (`JournalEntry`) records, for one awaited hook call (beforeTurn, a beforeToolCall decider, and any other
hook the host awaits): the extension's name and version, the hook, the session, request and (tool calls) call id,
the sha256 of the canonical JSON of the snapshot it saw, its outcome and decision (fields set, or the tool-call
action with its input/output), reason, latency, mode ("enforce" | "shadow") and phase (beforeToolCall).

The chain is **per session**: entry n of a session carries the hash of entry n-1 (`prev_hash`; the first carries
`GENESIS`), and its own `hash` is the sha256 of its canonical JSON (every field but `hash`, keys sorted, no
spaces, UTF-8, NaN refused). One session's turns run one at a time, so its chain has one writer; sessions never
contend. The snapshot itself is kept beside the entry (replay re-sends it); its sha256 is in the entry, so the chain
covers it too. `verify_chain` walks a session's rows and names the first that does not hold.

What a chain cannot show by itself: entries cut off its END (the last entries deleted together). `journal verify`
prints each session's head hash; keep it elsewhere (a CI log) to detect that.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

GENESIS = "0" * 64
#: the largest canonical snapshot kept for replay (a snapshot is already bounded by host/extensions/_convert.py's
#: MAX_SNAPSHOT_BYTES; this is that cap plus its fixed fields). Larger: only its hash is kept.
MAX_SNAPSHOT_CHARS = 4 * 1024 * 1024 + 64 * 1024
#: one decision value (a substituted input/output) kept whole up to this size; larger: its sha256 and size only
MAX_DECISION_VALUE_CHARS = 256 * 1024


def canonical_json(value: Any) -> str:
    """Canonical JSON: keys sorted, no spaces, UTF-8 text (not ASCII-escaped), NaN/Infinity refused (ValueError)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class JournalDraft(BaseModel):
    """An entry before the store gives it its place in the chain (seq, prev_hash, hash)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    request_id: str = ""
    submission_id: str = ""
    call_id: str = ""  # the tool call's id (beforeToolCall); "" for other hooks
    extension: str
    extension_version: str = ""
    hook: str
    mode: str = "enforce"  # "enforce" | "shadow" (a shadow extension's answers are recorded, never applied)
    phase: str = ""  # beforeToolCall: "mutate" | "validate"
    snapshot_sha256: str
    outcome: str  # beforeToolCall: allow | block | substitute; beforeTurn: ok; any hook: error | timeout
    decision: dict[str, Any] = Field(default_factory=dict)  # {"action", "input"?, "output"?} or {"set": {...}}
    reason: str = ""
    latency_ms: float = 0.0
    at: float = 0.0  # wall-clock seconds
    reused_from: int | None = None  # the seq of the entry whose verdict a resumed submission reused (not asked)


class JournalEntry(JournalDraft):
    """An entry in its session's chain."""

    seq: int
    prev_hash: str
    hash: str = ""


#: A draft as the journal writer makes it: every JournalDraft field, by name (our own values: no model built).
DraftFields = dict[str, Any]


def draft_fields(draft: JournalDraft | DraftFields) -> DraftFields:
    """A draft's fields by name, whichever form it comes in."""
    return draft if isinstance(draft, dict) else draft.__dict__


def seal(draft: JournalDraft | DraftFields, seq: int, prev_hash: str) -> tuple[str, str]:
    """(hash, canonical JSON text) of the entry at `seq` after `prev_hash`: what is stored and hashed."""
    body = dict(draft_fields(draft))
    body["seq"], body["prev_hash"] = seq, prev_hash
    text = canonical_json(body)
    return sha256_text(text), text


class JournalRow(BaseModel):
    """One stored row: the entry's canonical text, its hash, and the snapshot kept for replay (None: too large)."""

    session_id: str
    seq: int
    entry: str
    hash: str
    snapshot: str | None = None

    def parsed(self) -> JournalEntry:
        return JournalEntry(**json.loads(self.entry), hash=self.hash)


class ChainBreak(BaseModel):
    """The first entry of a session whose chain does not hold, and why."""

    session_id: str
    seq: int
    problem: str


def verify_chain(rows: list[JournalRow]) -> tuple[ChainBreak | None, str]:
    """Check one session's rows (in seq order): (the first break or None, the head hash)."""
    prev, expected_seq = GENESIS, 1
    for row in rows:
        def broken(problem: str, row: JournalRow = row) -> tuple[ChainBreak, str]:
            return ChainBreak(session_id=row.session_id, seq=row.seq, problem=problem), prev

        if row.seq != expected_seq:
            return broken(f"expected entry {expected_seq} here (an entry is missing or out of place)")
        if sha256_text(row.entry) != row.hash:
            return broken("its content does not match its hash (the entry was changed)")
        try:
            body = json.loads(row.entry)
        except ValueError as exc:
            return broken(f"its content is not JSON ({exc})")
        if not isinstance(body, dict):
            return broken("its content is not a JSON object")
        if body.get("prev_hash") != prev:
            return broken("its prev_hash is not the previous entry's hash (an entry before it was changed, "
                          "removed or inserted)")
        if body.get("seq") != row.seq or body.get("session_id") != row.session_id:
            return broken("its seq or session id differs from the row's (the row was moved)")
        if row.snapshot is not None and sha256_text(row.snapshot) != body.get("snapshot_sha256"):
            return broken("its kept snapshot does not match the snapshot_sha256 it records (the snapshot was changed)")
        prev, expected_seq = row.hash, expected_seq + 1
    return None, prev


def snapshot_text(snapshot: dict[str, Any]) -> tuple[str, str | None]:
    """(sha256, the canonical text to keep or None when it is over MAX_SNAPSHOT_CHARS)."""
    text = canonical_json(snapshot)
    return sha256_text(text), (text if len(text) <= MAX_SNAPSHOT_CHARS else None)


def bounded_value(value: Any) -> Any:
    """A decision value as kept: itself, or {"truncated": true, "sha256", "chars"} when its JSON is too large."""
    text = canonical_json(value)
    if len(text) <= MAX_DECISION_VALUE_CHARS:
        return value
    return {"truncated": True, "sha256": sha256_text(text), "chars": len(text)}
