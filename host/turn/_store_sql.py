"""The SQLite message store's per-turn statements, as module constants (host/turn/_store.py).

Each text is one object for the life of the process, so sqlite3's statement cache (keyed by the text) compiles it
once per connection and every later use is a cache hit. A turn writes its user message and its assistant message
with `INSERT_NEW_MESSAGE`, then `UPDATE_MESSAGE` only when the id was known: one statement for a new message (it was
an UPDATE that touched no row, then the INSERT: two for each new message, which every message of a turn is). The
transcript version is read once per cached write, after it (`TRANSCRIPT_VERSION`): under the write transaction's
lock the version can only have moved by this write's one bump (host/turn/_transcript_cache.py).
"""

from __future__ import annotations

BEGIN = "BEGIN IMMEDIATE"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"

#: A new message at the end of the session's transcript (its id must be new: the primary key refuses it otherwise).
APPEND_MESSAGE = (
    "INSERT INTO messages (session_id, seq, id, role, data, created_at, updated_at) "
    "VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM messages WHERE session_id = ?1), ?2, ?3, ?4, ?5, ?5)"
)
#: A message appended if its id is new in the session, else nothing (rowcount 0: then `UPDATE_MESSAGE`). Not a
#: DO UPDATE upsert: its conflict handling would override the `INSERT OR IGNORE` of the version triggers.
INSERT_NEW_MESSAGE = APPEND_MESSAGE + " ON CONFLICT (session_id, id) DO NOTHING"
#: A known message replaced in place (its seq and created_at kept).
UPDATE_MESSAGE = "UPDATE messages SET role = ?, data = ?, updated_at = ? WHERE session_id = ? AND id = ?"
#: The session's rows, in order (the transcript cache's read on a miss).
TRANSCRIPT_ROWS = "SELECT data FROM messages WHERE session_id = ? ORDER BY seq"
#: The session's transcript version (bumped by the triggers of host/turn/_transcript_cache.py).
TRANSCRIPT_VERSION = "SELECT version FROM transcript_versions WHERE session_id = ?"
