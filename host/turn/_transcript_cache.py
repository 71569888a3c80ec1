"""Each session's decoded transcript, kept between turns so a turn does not re-read and re-decode its whole history
(issue 19 item 5: the host's own cost per turn independent of the history's length).

Owned by one store and touched only inside that store's operations, one at a time (`MessageStore`: its single
worker thread; `PostgresMessageStore`: under its connection lock), so it needs no lock of its own. Invariants:
- An entry is trusted only while the session's transcript version is the one it was made with. The version lives in
  the store (table `transcript_versions`; PostgreSQL: `hookwire_transcript_versions`), bumped by triggers on every
  INSERT, UPDATE and DELETE of the session's rows, whoever writes them: this store, another connection, another
  process or host, an older hookwire (the triggers are in the store) or a shell. Reading it is one primary-key
  lookup, whatever the history's length. A version that moved under the entry means someone else wrote: the
  transcript is read again.
- This store's own writes (append, upsert) update the entry in the same transaction: the version read before the
  write must be the entry's and the one read after it exactly one more (no one else wrote since, nor in between:
  PostgreSQL's READ COMMITTED lets another host commit between two statements), and the entry takes it. Any other
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

from ._store_sql import TRANSCRIPT_ROWS, TRANSCRIPT_VERSION

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


#: PostgreSQL's twin (host/turn/_pg_store.py): the same table and one row trigger. Run once per database, when the
#: trigger is missing (PG_TRIGGER_EXISTS), under the schema's advisory lock: CREATE TRIGGER waits for every open
#: transaction on hookwire_messages, so it is not run at every open. Each statement is executed on its own (the
#: function body holds semicolons).
PG_TRIGGER_EXISTS = "SELECT 1 FROM pg_trigger WHERE tgname = 'hookwire_transcript_version'"
PG_DDL: tuple[str, ...] = (
    "CREATE TABLE IF NOT EXISTS hookwire_transcript_versions ("
    " session_id TEXT PRIMARY KEY, version BIGINT NOT NULL)",
    "CREATE OR REPLACE FUNCTION hookwire_transcript_version() RETURNS trigger LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "  IF TG_OP <> 'INSERT' THEN\n"
    "    INSERT INTO hookwire_transcript_versions AS v (session_id, version) VALUES (OLD.session_id, 1)\n"
    "      ON CONFLICT (session_id) DO UPDATE SET version = v.version + 1;\n"
    "  END IF;\n"
    "  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.session_id IS DISTINCT FROM OLD.session_id) THEN\n"
    "    INSERT INTO hookwire_transcript_versions AS v (session_id, version) VALUES (NEW.session_id, 1)\n"
    "      ON CONFLICT (session_id) DO UPDATE SET version = v.version + 1;\n"
    "  END IF;\n"
    "  RETURN NULL;\n"
    "END $$",
    "DROP TRIGGER IF EXISTS hookwire_transcript_version ON hookwire_messages",
    "CREATE TRIGGER hookwire_transcript_version AFTER INSERT OR UPDATE OR DELETE ON hookwire_messages"
    " FOR EACH ROW EXECUTE FUNCTION hookwire_transcript_version()",
)
PG_VERSION = "SELECT version FROM hookwire_transcript_versions WHERE session_id = %s"


def version(conn: sqlite3.Connection, session_id: str) -> int:
    """The session's transcript version (0: never written)."""
    row = conn.execute(TRANSCRIPT_VERSION, (session_id,)).fetchone()
    return 0 if row is None else int(row[0])


@dataclass(slots=True)
class _Entry:
    version: int
    messages: list[dict[str, Any]]
    index: dict[str, int] = field(default_factory=dict)  # message id -> position


class TranscriptCache:
    def __init__(self) -> None:
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    # ---------------------------------------------------------------- backend-neutral core

    def cached(self, session_id: str, current: int) -> list[dict[str, Any]] | None:
        """The session's transcript (a new list of the read-only dicts) if the entry is at version `current`."""
        entry = self._entries.get(session_id)
        if entry is None or entry.version != current:
            return None
        self._entries.move_to_end(session_id)
        return list(entry.messages)

    def fill(self, session_id: str, current: int, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Keep `messages`, read at version `current` (read the version BEFORE the rows: a write between the two
        leaves the rows newer than the version kept, so the next read decodes them again — harmless — never the
        reverse, stale rows trusted); returns a new list of them."""
        self._entries[session_id] = _Entry(current, messages, {m.get("id"): i for i, m in enumerate(messages)})
        self._entries.move_to_end(session_id)
        if len(self._entries) > MAX_SESSIONS:
            self._entries.popitem(last=False)
        return list(messages)

    def wrote_one(self, session_id: str, msg_id: str, data: str, before: int, after: int) -> None:
        """This store wrote one message (`data`: appended if its id is new, else replaced in place) inside its write
        transaction; `before`/`after`: the session's version read just before and just after the write. One row
        written bumps it exactly once: any other difference means someone else wrote too, so the entry is dropped
        (read again next time)."""
        entry = self._entries.get(session_id)
        if entry is None:
            return
        if entry.version != before or after != before + 1:
            self.drop(session_id)
            return
        message = json.loads(data)
        pos = entry.index.get(msg_id)
        if pos is None:
            entry.index[msg_id] = len(entry.messages)
            entry.messages.append(message)
        else:
            entry.messages[pos] = message
        entry.version = after

    # ---------------------------------------------------------------- SQLite (inside a store-thread operation)

    def get(self, conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
        """The session's transcript in order (read-only dicts), from the cache when it is still current."""
        current = version(conn, session_id)
        hit = self.cached(session_id, current)
        if hit is not None:
            return hit
        rows = conn.execute(TRANSCRIPT_ROWS, (session_id,)).fetchall()
        return self.fill(session_id, current, [json.loads(row[0]) for row in rows])

    def wrote(self, conn: sqlite3.Connection, session_id: str, msg_id: str, data: str) -> None:
        """`wrote_one` for a one-row write made inside this SQLite write transaction (still open): only the version
        after it is read. SQLite's write lock (BEGIN IMMEDIATE) keeps every other writer out from before the write to
        now, and versions only grow, so the version before it was the entry's exactly when the one after it is the
        entry's plus one (anyone else's write in between would have made it at least plus two)."""
        entry = self._entries.get(session_id)
        if entry is not None:
            self.wrote_one(session_id, msg_id, data, entry.version, version(conn, session_id))

    def drop(self, session_id: str) -> None:
        self._entries.pop(session_id, None)
