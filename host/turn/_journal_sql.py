"""The decision journal's table on SQLite and PostgreSQL: its DDL, appending a batch at the chain's end, reading it.

Both stores (host/turn/_store.py, host/turn/_pg_store.py) call these inside their own write transaction, so the
last entry read and the new ones written are one atomic step (SQLite: BEGIN IMMEDIATE; PostgreSQL: a transaction
advisory lock per session). The schema is in docs/internals.md ("The decision journal").
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from ._journal import GENESIS, DraftFields, JournalDraft, JournalRow, draft_fields, seal

SQLITE_DDL = """
CREATE TABLE IF NOT EXISTS journal (
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    request_id TEXT NOT NULL,
    submission_id TEXT NOT NULL,
    hook       TEXT NOT NULL,
    extension  TEXT NOT NULL,
    entry      TEXT NOT NULL,
    snapshot   TEXT,
    hash       TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (session_id, seq)
)
"""

PG_DDL = """
CREATE TABLE IF NOT EXISTS hookwire_journal (
    session_id TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    request_id TEXT NOT NULL,
    submission_id TEXT NOT NULL,
    hook       TEXT NOT NULL,
    extension  TEXT NOT NULL,
    entry      TEXT NOT NULL,
    snapshot   TEXT,
    hash       TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, seq)
)
"""

#: the second key class of PostgreSQL's advisory locks used here (see _pg_store's lock ids)
PG_JOURNAL_LOCK = 0x686B0003

_COLUMNS = "session_id, seq, request_id, submission_id, hook, extension, entry, snapshot, hash, created_at"


def _rows(session_id: str, last: tuple[int, str] | None,
          drafts: list[tuple[JournalDraft | DraftFields, str | None]]) -> list[tuple[Any, ...]]:
    seq, prev = last if last is not None else (0, GENESIS)
    now = time.time()
    out = []
    for draft, snapshot in drafts:
        seq += 1
        digest, text = seal(draft, seq, prev)
        prev = digest
        f = draft_fields(draft)
        out.append((session_id, seq, f["request_id"], f["submission_id"], f["hook"], f["extension"], text, snapshot,
                    digest, now))
    return out


def sqlite_append(conn: sqlite3.Connection, session_id: str,
                  drafts: list[tuple[JournalDraft | DraftFields, str | None]]) -> None:
    row = conn.execute("SELECT seq, hash FROM journal WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
                       (session_id,)).fetchone()
    conn.executemany(f"INSERT INTO journal ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     _rows(session_id, None if row is None else (int(row[0]), str(row[1])), drafts))


def _where(session_id: str | None, submission_id: str | None, mark: str) -> tuple[str, tuple[str, ...]]:
    if session_id is None:
        return "", ()
    if submission_id is None:
        return f" WHERE session_id = {mark}", (session_id,)
    return f" WHERE session_id = {mark} AND submission_id = {mark}", (session_id, submission_id)


def sqlite_read(conn: sqlite3.Connection, session_id: str | None,
                submission_id: str | None = None) -> list[JournalRow]:
    where, params = _where(session_id, submission_id, "?")
    rows = conn.execute(f"SELECT session_id, seq, entry, hash, snapshot FROM journal{where} ORDER BY session_id, seq",
                        params).fetchall()
    return [JournalRow(session_id=s, seq=q, entry=e, hash=h, snapshot=p) for s, q, e, h, p in rows]


async def pg_append(conn: Any, session_id: str, drafts: list[tuple[JournalDraft | DraftFields, str | None]]) -> None:
    await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (PG_JOURNAL_LOCK, session_id))
    row = await (await conn.execute(
        "SELECT seq, hash FROM hookwire_journal WHERE session_id = %s ORDER BY seq DESC LIMIT 1",
        (session_id,))).fetchone()
    async with conn.cursor() as cur:
        await cur.executemany(
            f"INSERT INTO hookwire_journal ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            _rows(session_id, None if row is None else (int(row[0]), str(row[1])), drafts))


async def pg_read(conn: Any, session_id: str | None, submission_id: str | None = None) -> list[JournalRow]:
    where, params = _where(session_id, submission_id, "%s")
    cur = await conn.execute(f"SELECT session_id, seq, entry, hash, snapshot FROM hookwire_journal{where} "
                             "ORDER BY session_id, seq", params)
    return [JournalRow(session_id=s, seq=int(q), entry=e, hash=h, snapshot=p) for s, q, e, h, p in await cur.fetchall()]
