"""Each session's decoded transcript, kept between turns so a turn does not re-read and re-decode its whole history
(issue 19 item 5: the host's own cost per turn independent of the history's length).

Owned by one `MessageStore` and touched only from its single worker thread (every method runs inside a store
operation), so it needs no lock. Invariants:
- An entry is trusted only while the session's rows still have the signature it was made with: (row count,
  highest seq, sum of updated_at), read in one indexed query. A write by another connection (another process, another
  MessageStore on the same file) changes it, and the transcript is read again; this store's own writes update the
  entry and its signature in the same transaction.
- What `get` returns is a new list of the cached dicts: callers must treat the dicts as read-only (the turn only
  converts them into new model messages). `MessageStore.messages()` still decodes fresh dicts for everyone else.
- At most MAX_SESSIONS sessions are kept (least recently used dropped).
"""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

MAX_SESSIONS = 256

Signature = tuple[int, int, float]


def signature(conn: sqlite3.Connection, session_id: str) -> Signature:
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(MAX(seq), 0), COALESCE(TOTAL(updated_at), 0.0) FROM messages WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return int(row[0]), int(row[1]), float(row[2])


@dataclass(slots=True)
class _Entry:
    sig: Signature
    messages: list[dict[str, Any]]
    index: dict[str, int] = field(default_factory=dict)  # message id -> position


class TranscriptCache:
    def __init__(self) -> None:
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def get(self, conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
        """The session's transcript in order (read-only dicts), from the cache when it is still current."""
        sig = signature(conn, session_id)
        entry = self._entries.get(session_id)
        if entry is None or entry.sig != sig:
            rows = conn.execute("SELECT data FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
            messages = [json.loads(row[0]) for row in rows]
            entry = _Entry(sig, messages, {m.get("id"): i for i, m in enumerate(messages)})
            self._entries[session_id] = entry
            if len(self._entries) > MAX_SESSIONS:
                self._entries.popitem(last=False)
        self._entries.move_to_end(session_id)
        return list(entry.messages)

    def upserted(self, conn: sqlite3.Connection, session_id: str, msg_id: str, data: str, before: Signature) -> None:
        """This store wrote one message (`data`) inside the open transaction; `before` was the signature before it."""
        entry = self._entries.get(session_id)
        if entry is None:
            return
        if entry.sig != before:  # someone else wrote since we read: read it all again next time
            self.drop(session_id)
            return
        message = json.loads(data)
        pos = entry.index.get(msg_id)
        if pos is None:
            entry.index[msg_id] = len(entry.messages)
            entry.messages.append(message)
        else:
            entry.messages[pos] = message
        entry.sig = signature(conn, session_id)

    def drop(self, session_id: str) -> None:
        self._entries.pop(session_id, None)
