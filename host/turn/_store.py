"""The message store: per-session transcripts, durable submissions, context blocks and metadata in SQLite.

One SQLite file (WAL, ``synchronous=NORMAL``, busy timeout), safe for several sessions and for several
``MessageStore`` objects (or processes) on the same file. Every call runs on the store's own single worker thread,
so the async API never blocks the event loop and the connection is only ever touched by one thread.

Messages are opaque JSON dicts with at least a string ``id`` and ``role``; their order within a session is the order
they were appended (``upsert`` of an existing id keeps its place).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .._errors import StoreError, StoreVersionError
from . import _journal_sql, _store_sql, _transcript_cache
from ._journal import DraftFields, JournalDraft, JournalRow
from ._store_thread import StoreThread
from ._transcript_cache import TranscriptCache
from ._ui_messages import ModelMessageMemo, to_model_messages

SCHEMA_VERSION = 2  # 2: the decision journal (host/turn/_journal_sql.py)
BUSY_TIMEOUT_MS = 10_000
#: Submission statuses that ``pending_submissions`` returns (work not finished yet: to run or to resume).
OPEN_SUBMISSION_STATUSES = ("pending", "running")

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    id         TEXT NOT NULL,
    role       TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_order ON messages (session_id, seq);
CREATE TABLE IF NOT EXISTS submissions (
    submission_id TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL,
    payload       TEXT NOT NULL,
    status        TEXT NOT NULL,
    error         TEXT,
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS submissions_by_session ON submissions (session_id, status);
CREATE TABLE IF NOT EXISTS context (
    session_id TEXT NOT NULL,
    label      TEXT NOT NULL,
    content    TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (session_id, label)
);
CREATE TABLE IF NOT EXISTS meta (
    session_id TEXT PRIMARY KEY,
    data       TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""

T = TypeVar("T")


def strict_json(value: Any) -> str:
    """JSON text any strict reader accepts: NaN/Infinity raise ValueError (never stored as bare NaN); strings with
    lone surrogates (which UTF-8 cannot hold) are written with them escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return text


def _check_message(session_id: str, message: Any) -> tuple[str, str, str]:
    if not isinstance(message, dict):
        raise StoreError(f"message for session {session_id!r} must be a dict, got {type(message).__name__}")
    msg_id, role = message.get("id"), message.get("role")
    if not isinstance(msg_id, str) or not msg_id:
        raise StoreError(f"message for session {session_id!r} needs a non-empty string 'id' (got {msg_id!r})")
    if not isinstance(role, str) or not role:
        raise StoreError(f"message {msg_id!r} in session {session_id!r} needs a non-empty string 'role'")
    try:
        data = strict_json(message)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"message {msg_id!r} in session {session_id!r} is not JSON-serializable: {exc}") from exc
    return msg_id, role, data


def _transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """``fn`` in one write transaction (``BEGIN IMMEDIATE``: the write lock up front), rolled back if it raises."""
    conn.execute(_store_sql.BEGIN)
    try:
        result = fn(conn)
    except BaseException:
        conn.execute(_store_sql.ROLLBACK)
        raise
    conn.execute(_store_sql.COMMIT)
    return result


_OPEN_LOCK = threading.Lock()


class MessageStore:
    """Async SQLite store for session transcripts, submissions, context blocks and session metadata."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._thread = StoreThread()  # host/turn/_store_thread.py: the one thread that touches the connection
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._transcripts = TranscriptCache()  # touched only in the worker thread
        try:
            self._thread.call(self._open)
        except BaseException:
            self._thread.stop(wait=True)
            self._closed = True
            raise

    def __repr__(self) -> str:
        return f"MessageStore({self.path!r})"

    async def __aenter__(self) -> MessageStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ worker-thread plumbing

    def _open(self) -> None:
        # One open at a time in this process (opens run in worker threads, off the event loop): SQLite does not wait
        # for the lock a journal-mode switch needs; two first opens of one file at once got "database is locked".
        with _OPEN_LOCK:
            self._open_locked()

    def _open_locked(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreVersionError(
                    f"message store {self.path!r} has schema version {version}, newer than this hookwire "
                    f"supports ({SCHEMA_VERSION}); upgrade hookwire or use another store file"
                )
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")  # only a switch needs that lock (WAL persists in the file)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version > SCHEMA_VERSION:
                    raise StoreVersionError(
                        f"message store {self.path!r} has schema version {version}, newer than this hookwire "
                        f"supports ({SCHEMA_VERSION}); upgrade hookwire or use another store file"
                    )
                if version < SCHEMA_VERSION:
                    for statement in (_SCHEMA_V1 + ";" + _journal_sql.SQLITE_DDL).split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                for statement in _transcript_cache.SQLITE_DDL:  # idempotent, no version bump (see its docstring)
                    conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StoreError(f"{self!r} is closed")

        def call() -> T:
            assert self._conn is not None
            return fn(self._conn)

        return await self._thread.run(call)

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one write transaction (``BEGIN IMMEDIATE``: takes the write lock up front)."""
        return await self._run(lambda conn: _transaction(conn, fn))

    # ------------------------------------------------------------------ messages

    async def append(self, session_id: str, message: dict[str, Any]) -> None:
        """Append ``message`` at the end of the session's transcript (its ``id`` must be new in the session)."""
        msg_id, role, data = _check_message(session_id, message)

        def op(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(_store_sql.APPEND_MESSAGE, (session_id, msg_id, role, data, time.time()))
            except sqlite3.IntegrityError as exc:
                raise StoreError(
                    f"message {msg_id!r} already exists in session {session_id!r}; use upsert() to replace it"
                ) from exc
            self._transcripts.wrote(conn, session_id, msg_id, data)

        await self._written(session_id, op)

    async def upsert(self, session_id: str, message: dict[str, Any]) -> None:
        """Replace the message with the same ``id`` in place (partial -> final), or append it if it is new."""
        msg_id, role, data = _check_message(session_id, message)
        await self._written(session_id, lambda conn: self._upsert_row(conn, session_id, msg_id, role, data))

    def _upsert_row(self, conn: sqlite3.Connection, session_id: str, msg_id: str, role: str, data: str) -> None:
        """upsert's write (inside its transaction, on the worker thread), the cached transcript kept up to date."""
        now = time.time()
        if conn.execute(_store_sql.INSERT_NEW_MESSAGE, (session_id, msg_id, role, data, now)).rowcount == 0:
            conn.execute(_store_sql.UPDATE_MESSAGE, (role, data, now, session_id, msg_id))
        self._transcripts.wrote(conn, session_id, msg_id, data)

    async def upsert_then_transcript(self, session_id: str,
                                     messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """``upsert`` each message in order, each in its own transaction as ``upsert`` does (a failure raises and
        leaves the ones before it stored), then the session's ``transcript()``: all in one round trip to the store's
        thread. A turn persists its incoming messages and reads its history right after (host/turn/_turn_runner.py).
        None when only the read failed (everything was stored: the caller reads again, and fails there)."""

        def op(conn: sqlite3.Connection) -> list[dict[str, Any]] | None:
            for message in messages:
                msg_id, role, data = _check_message(session_id, message)
                try:
                    _transaction(conn, lambda c: self._upsert_row(c, session_id, msg_id, role, data))
                except BaseException:
                    self._transcripts.drop(session_id)
                    raise
            try:
                return self._transcripts.get(conn, session_id)
            except Exception:  # e.g. a row that is not JSON: not a failure to store
                return None

        return await self._run(op)

    async def _written(self, session_id: str, op: Callable[[sqlite3.Connection], None]) -> None:
        """A write that updates the session's cached transcript: a failure (the write, or its COMMIT) drops it."""
        try:
            await self._write(op)
        except BaseException:
            if not self._closed:
                await self._run(lambda _conn: self._transcripts.drop(session_id))
            raise

    async def transcript(self, session_id: str) -> list[dict[str, Any]]:
        """The session's whole transcript for a turn: READ-ONLY dicts, kept decoded between turns and re-read only
        when the session's rows changed under this store (host/turn/_transcript_cache.py). Use messages() for
        dicts of your own."""
        return await self._run(lambda conn: self._transcripts.get(conn, session_id))

    async def messages(self, session_id: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The session's transcript in order; with ``limit``, only the most recent ``limit`` messages."""

        def op(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            if limit is None:
                rows = conn.execute(
                    "SELECT data FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT data FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
                    (session_id, max(0, limit)),
                ).fetchall()
                rows.reverse()
            return [json.loads(row[0]) for row in rows]

        return await self._run(op)

    async def delete_messages(self, session_id: str, ids: list[str]) -> None:
        """Delete the session's messages with these ids (unknown ids are ignored)."""
        id_list = list(ids)

        def op(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "DELETE FROM messages WHERE session_id = ? AND id = ?", [(session_id, i) for i in id_list]
            )

        await self._write(op)

    async def replace_all(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Atomically replace the whole transcript (compaction); ids must be unique within ``messages``."""
        rows = [_check_message(session_id, m) for m in messages]
        seen: set[str] = set()
        for msg_id, _, _ in rows:
            if msg_id in seen:
                raise StoreError(f"replace_all for session {session_id!r}: duplicate message id {msg_id!r}")
            seen.add(msg_id)

        def op(conn: sqlite3.Connection) -> None:
            now = time.time()
            conn.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            conn.executemany(
                "INSERT INTO messages (session_id, seq, id, role, data, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(session_id, seq, i, role, data, now, now) for seq, (i, role, data) in enumerate(rows, start=1)],
            )

        await self._write(op)

    # ------------------------------------------------------------------ submissions

    async def record_submission(self, session_id: str, submission_id: str, payload: dict[str, Any]) -> None:
        """Record a durable submission with status "pending" (recording the same id again is a no-op)."""
        try:
            data = strict_json(payload)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"submission {submission_id!r} payload is not JSON-serializable: {exc}") from exc

        def op(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT session_id FROM submissions WHERE submission_id = ?", (submission_id,)
            ).fetchone()
            if row is not None:
                if row[0] != session_id:
                    raise StoreError(
                        f"submission {submission_id!r} already belongs to session {row[0]!r}, not {session_id!r}"
                    )
                return
            now = time.time()
            conn.execute(
                "INSERT INTO submissions (submission_id, session_id, payload, status, error, created_at, updated_at) "
                "VALUES (?, ?, ?, 'pending', NULL, ?, ?)",
                (submission_id, session_id, data, now, now),
            )

        await self._write(op)

    async def set_submission_status(self, submission_id: str, status: str, error: str | None = None) -> None:
        """Set a submission's status (e.g. "running", "completed", "error", "aborted") and error text."""

        def op(conn: sqlite3.Connection) -> None:
            cur = conn.execute(
                "UPDATE submissions SET status = ?, error = ?, updated_at = ? WHERE submission_id = ?",
                (status, error, time.time(), submission_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"unknown submission {submission_id!r}")

        await self._write(op)

    async def pending_submissions(self, session_id: str) -> list[dict[str, Any]]:
        """Unfinished submissions (status "pending" or "running"), oldest first:
        ``{submission_id, payload, status, created_at}``."""
        marks = ", ".join("?" for _ in OPEN_SUBMISSION_STATUSES)

        def op(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = conn.execute(
                "SELECT submission_id, payload, status, created_at FROM submissions "
                f"WHERE session_id = ? AND status IN ({marks}) ORDER BY created_at, rowid",
                (session_id, *OPEN_SUBMISSION_STATUSES),
            ).fetchall()
            return [
                {"submission_id": sid, "payload": json.loads(payload), "status": status, "created_at": created}
                for sid, payload, status, created in rows
            ]

        return await self._run(op)

    # ------------------------------------------------------------------ context blocks and metadata

    async def get_context(self, session_id: str, label: str) -> str | None:
        def op(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT content FROM context WHERE session_id = ? AND label = ?", (session_id, label)
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._run(op)

    async def set_context(self, session_id: str, label: str, content: str) -> None:
        if not isinstance(content, str):
            raise StoreError(f"context {label!r} of session {session_id!r} must be a string")

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO context (session_id, label, content, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (session_id, label) DO UPDATE SET content = excluded.content, "
                "updated_at = excluded.updated_at",
                (session_id, label, content, time.time()),
            )

        await self._write(op)

    async def get_meta(self, session_id: str) -> dict[str, Any]:
        """The session's metadata dict ({} when none was set)."""

        def op(conn: sqlite3.Connection) -> dict[str, Any]:
            row = conn.execute("SELECT data FROM meta WHERE session_id = ?", (session_id,)).fetchone()
            return {} if row is None else dict(json.loads(row[0]))

        return await self._run(op)

    async def set_meta(self, session_id: str, meta: dict[str, Any]) -> None:
        """Replace the session's metadata dict."""
        try:
            data = strict_json(meta)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"metadata of session {session_id!r} is not JSON-serializable: {exc}") from exc

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO meta (session_id, data, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (session_id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at",
                (session_id, data, time.time()),
            )

        await self._write(op)

    # ------------------------------------------------------------------ the decision journal

    async def append_journal(self, session_id: str,
                             drafts: list[tuple[JournalDraft | DraftFields, str | None]]) -> None:
        """Append entries (with their kept snapshots) at the end of the session's hash chain (host/turn/_journal.py)."""
        await self._write(lambda conn: _journal_sql.sqlite_append(conn, session_id, drafts))

    async def journal(self, session_id: str | None = None, submission_id: str | None = None) -> list[JournalRow]:
        """The session's journal rows in order (None: every session's, by session then order); with
        `submission_id`, only the entries of that durable submission's turns."""
        return await self._run(lambda conn: _journal_sql.sqlite_read(conn, session_id, submission_id))

    # ------------------------------------------------------------------ lifecycle

    async def journal_mode(self) -> str:
        """SQLite's journal mode for this connection ("wal" for files, "memory" for ":memory:")."""
        return await self._run(lambda conn: str(conn.execute("PRAGMA journal_mode").fetchone()[0]))

    async def close(self) -> None:
        """Close the connection and stop the worker thread (idempotent)."""
        if self._closed:
            return
        self._closed = True

        def op() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        try:
            await self._thread.run(op)
        finally:
            self._thread.stop()


class SessionStore:
    """The store, bound to one session."""

    def __init__(self, raw: Any, session_id: str) -> None:
        self.raw = raw
        self.sid = session_id
        self._model_memo = ModelMessageMemo()

    async def upsert(self, message: dict[str, Any]) -> None:
        await self.raw.upsert(self.sid, message)

    async def messages(self) -> list[dict[str, Any]]:
        return await self.raw.messages(self.sid)

    async def persist_incoming(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """Upsert a turn's incoming messages in order; with a store that can, the session's transcript (read-only
        dicts, as ``transcript()``) read right after them in the same round trip to its thread, else None."""
        both = getattr(self.raw, "upsert_then_transcript", None)
        if both is None or not messages:
            for message in messages:
                await self.raw.upsert(self.sid, message)
            return None
        transcript = await both(self.sid, messages)
        return None if transcript is None else list(transcript)

    async def model_messages(self, transcript: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """The whole transcript as model (chat) messages for a turn, new dicts the caller may change; from read-only
        transcripts only what changed since the last turn is converted (host/turn/_ui_messages.py ModelMessageMemo).
        ``transcript``: the read-only transcript ``persist_incoming`` returned, when nothing wrote since (not read
        again)."""
        if transcript is not None:
            return self._model_memo.convert(transcript)
        read = getattr(self.raw, "transcript", None)
        if read is None:
            return to_model_messages(await self.raw.messages(self.sid))
        return self._model_memo.convert(await read(self.sid))

    async def replace_all(self, messages: list[dict[str, Any]]) -> None:
        await self.raw.replace_all(self.sid, messages)

    async def record_submission(self, submission_id: str, payload: dict[str, Any]) -> None:
        await self.raw.record_submission(self.sid, submission_id, payload)

    async def set_submission_status(self, submission_id: str, status: str, error: str | None = None) -> None:
        await self.raw.set_submission_status(submission_id, status, error)

    async def pending_submissions(self) -> list[dict[str, Any]]:
        return await self.raw.pending_submissions(self.sid)

    async def get_context(self, label: str) -> str | None:
        return await self.raw.get_context(self.sid, label)

    async def set_context(self, label: str, content: str) -> None:
        await self.raw.set_context(self.sid, label, content)
