"""Each session's decoded transcript, kept between turns so a turn does not re-read and re-decode its whole history
(issue 19 item 5: the host's own cost per turn independent of the history's length).

Owned by one `MessageStore` and touched only from its single worker thread (every method runs inside a store
operation), so it needs no lock. Invariants:
- An entry is trusted only while the session's transcript version is the one it was made with. The version lives in
  the store file (table `transcript_versions`), bumped by triggers on every INSERT, UPDATE and DELETE of the
  session's rows, whoever writes them: this store, another connection, another process, an older hookwire (the
  triggers are in the file) or the sqlite3 shell. Reading it is one primary-key lookup, whatever the history's
  length. A version that moved under the entry means someone else wrote: the transcript is read again.
- This store's own writes (append, upsert) update the entry in the same transaction: the version read before the
  write must be the entry's (no one else wrote since), and the entry takes the version read after it. Any other
  write of ours (delete, replace_all) leaves the entry to be re-read; a failed write drops it (the store's caller).
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

#: The version table and its triggers. Idempotent (run at every open, inside the open's write transaction), and
#: backward compatible: an older hookwire reads and writes a file that has them (its writes fire them too), so the
#: schema version does not change. A session without a row has version 0.
SQLITE_DDL: tuple[str, ...] = (
    "CREATE TABLE IF NOT EXISTS transcript_versions ("
    " session_id TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TRIGGER IF NOT EXISTS transcript_version_insert AFTER INSERT ON messages BEGIN"
    " INSERT OR IGNORE INTO transcript_versions (session_id, version) VALUES (NEW.session_id, 0);"
    " UPDATE transcript_versions SET version = version + 1 WHERE session_id = NEW.session_id;"
    " END",
    "CREATE TRIGGER IF NOT EXISTS transcript_version_update AFTER UPDATE ON messages BEGIN"
    " INSERT OR IGNORE INTO transcript_versions (session_id, version) VALUES (NEW.session_id, 0);"
    " UPDATE transcript_versions SET version = version + 1 WHERE session_id IN (NEW.session_id, OLD.session_id);"
    " END",
    "CREATE TRIGGER IF NOT EXISTS transcript_version_delete AFTER DELETE ON messages BEGIN"
    " UPDATE transcript_versions SET version = version + 1 WHERE session_id = OLD.session_id;"
    " END",
)


def version(conn: sqlite3.Connection, session_id: str) -> int:
    """The session's transcript version (0: never written)."""
    row = conn.execute("SELECT version FROM transcript_versions WHERE session_id = ?", (session_id,)).fetchone()
    return 0 if row is None else int(row[0])


@dataclass(slots=True)
class _Entry:
    version: int
    messages: list[dict[str, Any]]
    index: dict[str, int] = field(default_factory=dict)  # message id -> position


class TranscriptCache:
    def __init__(self) -> None:
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def get(self, conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
        """The session's transcript in order (read-only dicts), from the cache when it is still current."""
        current = version(conn, session_id)
        entry = self._entries.get(session_id)
        if entry is None or entry.version != current:
            # the version was read before the rows: a write between the two leaves the rows newer than the version
            # kept, so the next read decodes them again (harmless), never the reverse (stale rows trusted)
            rows = conn.execute("SELECT data FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
            messages = [json.loads(row[0]) for row in rows]
            entry = _Entry(current, messages, {m.get("id"): i for i, m in enumerate(messages)})
            self._entries[session_id] = entry
            if len(self._entries) > MAX_SESSIONS:
                self._entries.popitem(last=False)
        self._entries.move_to_end(session_id)
        return list(entry.messages)

    def wrote(self, conn: sqlite3.Connection, session_id: str, msg_id: str, data: str, before: int) -> None:
        """This store wrote one message (`data`: appended if its id is new, else replaced in place) inside the open
        write transaction; `before` was the session's version before the write."""
        entry = self._entries.get(session_id)
        if entry is None:
            return
        if entry.version != before:  # someone else wrote since we read: read it all again next time
            self.drop(session_id)
            return
        message = json.loads(data)
        pos = entry.index.get(msg_id)
        if pos is None:
            entry.index[msg_id] = len(entry.messages)
            entry.messages.append(message)
        else:
            entry.messages[pos] = message
        entry.version = version(conn, session_id)

    def drop(self, session_id: str) -> None:
        self._entries.pop(session_id, None)
