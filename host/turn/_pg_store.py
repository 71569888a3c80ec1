"""The message store on PostgreSQL: the contract of host/turn/_store.py (SQLite), shared by several host processes.

Selected by a URL (`Agent(store="postgresql://user@db.internal/hookwire")`, `hookwire run --store URL`); the driver is
psycopg 3 (`pip install 'hookwire[postgresql]'`). Tables are prefixed `hookwire_` and created on first use (under a
transaction advisory lock, so replicas starting together do not race); `hookwire_schema` holds the version.

What several host processes on one database get, beyond the SQLite contract:
- **one turn at a time per session across processes**: `turn_lease(session_id)` holds a session-level advisory lock
  (on a connection of its own) for the turn; waiters queue in the server's lock order, and a host that dies loses
  its connection and so its lease at once;
- **appends never collide**: a session's appends take a transaction advisory lock, so two processes appending to one
  session get consecutive positions, none lost;
- **a durable submission runs once**: `claim_submission(id)` locks its row (`FOR UPDATE SKIP LOCKED`) in a
  transaction held open on a connection of its own while the submission runs; its status updates go through that
  transaction, and the final one commits it. Another process asking meanwhile gets False; if the claimer dies, its
  transaction rolls back and the submission is pending again, for any process to claim.

- **a turn reads one row, not the whole session**: the decoded transcript is kept between turns and re-read only when
  the session's version (bumped by a trigger on every write of its rows, by any host) moved
  (host/turn/_transcript_cache.py).

Each store has one connection for ordinary calls (serialized by an asyncio lock, like SQLite's single worker), plus
the lease and claim connections it opens as needed (idle ones are kept for reuse, up to IDLE_LEASE_CONNECTIONS).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from . import _journal_sql, _transcript_cache
from ._journal import DraftFields, JournalDraft, JournalRow
from ._store import OPEN_SUBMISSION_STATUSES, StoreError, StoreVersionError, _check_message, strict_json
from ._transcript_cache import TranscriptCache

SCHEMA_VERSION = 2  # 2: the decision journal (host/turn/_journal_sql.py)
IDLE_LEASE_CONNECTIONS = 16
CONNECT_TIMEOUT_S = 10
# advisory lock class ids (the first key of pg_advisory_lock(int4, int4)); the second key is hashtext(session id)
_SCHEMA_LOCK = 0x686B0000  # "hk" 00 00
_TURN_LOCK = 0x686B0001
_APPEND_LOCK = 0x686B0002

_SCHEMA = """
CREATE TABLE IF NOT EXISTS hookwire_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS hookwire_messages (
    session_id TEXT NOT NULL,
    seq        BIGINT NOT NULL,
    id         TEXT NOT NULL,
    role       TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE UNIQUE INDEX IF NOT EXISTS hookwire_messages_order ON hookwire_messages (session_id, seq);
CREATE TABLE IF NOT EXISTS hookwire_submissions (
    ord           BIGSERIAL,
    submission_id TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL,
    payload       TEXT NOT NULL,
    status        TEXT NOT NULL,
    error         TEXT,
    created_at    DOUBLE PRECISION NOT NULL,
    updated_at    DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS hookwire_submissions_by_session ON hookwire_submissions (session_id, status);
CREATE TABLE IF NOT EXISTS hookwire_context (
    session_id TEXT NOT NULL,
    label      TEXT NOT NULL,
    content    TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, label)
);
CREATE TABLE IF NOT EXISTS hookwire_meta (
    session_id TEXT PRIMARY KEY,
    data       TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
)
"""

_INSERT_MESSAGE = (
    "INSERT INTO hookwire_messages (session_id, seq, id, role, data, created_at, updated_at) "
    "VALUES (%s, (SELECT COALESCE(MAX(seq), 0) + 1 FROM hookwire_messages WHERE session_id = %s), %s, %s, %s, %s, %s)"
)

T = TypeVar("T")


def is_postgres_url(spec: object) -> bool:
    return isinstance(spec, str) and spec.split(":", 1)[0] in ("postgresql", "postgres")


def redact(url: str) -> str:
    """The URL without its password (for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise StoreError(
            "a postgresql:// store needs the psycopg driver: pip install 'hookwire[postgresql]' "
            f"(or psycopg[binary]): {exc}"
        ) from None
    return psycopg


class PostgresMessageStore:
    """Async PostgreSQL store with MessageStore's API, plus `turn_lease` and `claim_submission` for several hosts."""

    def __init__(self, url: str) -> None:
        if not is_postgres_url(url):
            raise StoreError(f"not a PostgreSQL URL: {redact(url)!r} (expected postgresql://...)")
        self.url = url
        self._conn: Any = None
        self._lock = asyncio.Lock()
        self._idle_leases: list[Any] = []
        self._claims: dict[str, Any] = {}  # submission id -> the connection whose open transaction locks its row
        self._closed = False
        self._transcripts = TranscriptCache()  # touched only inside `_run` (under self._lock)

    def __repr__(self) -> str:
        return f"PostgresMessageStore({redact(self.url)!r})"

    async def __aenter__(self) -> PostgresMessageStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ connections

    async def _connect(self) -> Any:
        psycopg = _psycopg()
        try:
            return await psycopg.AsyncConnection.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to the PostgreSQL store {redact(self.url)!r}: "
                             f"{str(exc).strip() or type(exc).__name__}") from None

    async def open(self) -> None:
        """Connect and create (or check) the schema. Called by the first operation if not before."""
        async with self._lock:
            await self._ensure()

    async def _ensure(self) -> Any:
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        if self._conn is not None and not self._conn.closed:
            return self._conn
        conn = await self._connect()
        try:
            async with conn.transaction():
                # The DDL only when the schema is missing: CREATE INDEX IF NOT EXISTS still waits for the table's
                # lock, which another host's open claim transaction holds for as long as its submission runs.
                version = await self._schema_version(conn)
                if version is None or version < SCHEMA_VERSION:
                    await conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_SCHEMA_LOCK,))
                    for statement in (_SCHEMA + ";" + _journal_sql.PG_DDL).split(";"):
                        if statement.strip():
                            await conn.execute(statement)
                await self._ensure_transcript_versions(conn)
                row = await (await conn.execute("SELECT version FROM hookwire_schema")).fetchone()
                if row is None:
                    await conn.execute("INSERT INTO hookwire_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
                elif row[0] < SCHEMA_VERSION:
                    await conn.execute("UPDATE hookwire_schema SET version = %s", (SCHEMA_VERSION,))
                elif row[0] > SCHEMA_VERSION:
                    raise StoreVersionError(
                        f"message store {redact(self.url)!r} has schema version {row[0]}, newer than this hookwire "
                        f"supports ({SCHEMA_VERSION}); upgrade hookwire or use another database"
                    )
        except BaseException:
            await conn.close()
            raise
        self._conn = conn
        return conn

    @staticmethod
    async def _ensure_transcript_versions(conn: Any) -> None:
        """The transcript version table and trigger (host/turn/_transcript_cache.py), once per database: no schema
        version bump (an older hookwire works on a database that has them; its writes fire the trigger too)."""
        if await (await conn.execute(_transcript_cache.PG_TRIGGER_EXISTS)).fetchone() is not None:
            return
        await conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_SCHEMA_LOCK,))
        if await (await conn.execute(_transcript_cache.PG_TRIGGER_EXISTS)).fetchone() is not None:
            return  # another host made it while this one waited for the lock
        for statement in _transcript_cache.PG_DDL:
            await conn.execute(statement)

    @staticmethod
    async def _version(conn: Any, session_id: str) -> int:
        """The session's transcript version (0: never written since the trigger exists)."""
        row = await (await conn.execute(_transcript_cache.PG_VERSION, (session_id,))).fetchone()
        return 0 if row is None else int(row[0])

    @staticmethod
    async def _schema_version(conn: Any) -> int | None:
        exists = await (await conn.execute("SELECT to_regclass('hookwire_schema') IS NOT NULL")).fetchone()
        if not exists[0]:
            return None
        row = await (await conn.execute("SELECT version FROM hookwire_schema")).fetchone()
        return None if row is None else int(row[0])

    async def _run(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        """Run `fn(conn)` on the store's connection (one call at a time), as one transaction."""
        psycopg = _psycopg()
        async with self._lock:
            conn = await self._ensure()
            try:
                async with conn.transaction():
                    return await fn(conn)
            except psycopg.OperationalError as exc:
                with contextlib.suppress(Exception):
                    await conn.close()
                self._conn = None
                raise StoreError(f"PostgreSQL store {redact(self.url)!r}: {str(exc).strip()}") from None

    @staticmethod
    async def _session_lock(conn: Any, session_id: str) -> None:
        await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_APPEND_LOCK, session_id))

    # ------------------------------------------------------------------ messages

    async def append(self, session_id: str, message: dict[str, Any]) -> None:
        """Append ``message`` at the end of the session's transcript (its ``id`` must be new in the session)."""
        msg_id, role, data = _check_message(session_id, message)
        psycopg = _psycopg()

        async def op(conn: Any) -> None:
            await self._session_lock(conn, session_id)
            exists = await (await conn.execute(
                "SELECT 1 FROM hookwire_messages WHERE session_id = %s AND id = %s", (session_id, msg_id))).fetchone()
            if exists is not None:
                raise StoreError(
                    f"message {msg_id!r} already exists in session {session_id!r}; use upsert() to replace it"
                )
            now = time.time()
            before = await self._version(conn, session_id)
            try:
                await conn.execute(_INSERT_MESSAGE, (session_id, session_id, msg_id, role, data, now, now))
            except psycopg.errors.UniqueViolation as exc:  # pragma: no cover - the session lock prevents it
                raise StoreError(f"message {msg_id!r} already exists in session {session_id!r}") from exc
            self._transcripts.wrote_one(session_id, msg_id, data, before, await self._version(conn, session_id))

        await self._written(session_id, op)

    async def upsert(self, session_id: str, message: dict[str, Any]) -> None:
        """Replace the message with the same ``id`` in place (partial -> final), or append it if it is new."""
        msg_id, role, data = _check_message(session_id, message)

        async def op(conn: Any) -> None:
            await self._session_lock(conn, session_id)
            now = time.time()
            before = await self._version(conn, session_id)
            cur = await conn.execute(
                "UPDATE hookwire_messages SET role = %s, data = %s, updated_at = %s WHERE session_id = %s AND id = %s",
                (role, data, now, session_id, msg_id),
            )
            if cur.rowcount == 0:
                await conn.execute(_INSERT_MESSAGE, (session_id, session_id, msg_id, role, data, now, now))
            self._transcripts.wrote_one(session_id, msg_id, data, before, await self._version(conn, session_id))

        await self._written(session_id, op)

    async def _written(self, session_id: str, op: Callable[[Any], Awaitable[None]]) -> None:
        """A write that updates the session's cached transcript: a failure (the write, or its COMMIT) drops it."""
        try:
            await self._run(op)
        except BaseException:
            self._transcripts.drop(session_id)
            raise

    async def transcript(self, session_id: str) -> list[dict[str, Any]]:
        """The session's whole transcript for a turn: READ-ONLY dicts, kept decoded between turns and re-read only
        when the session's rows changed (host/turn/_transcript_cache.py: a version the database's trigger bumps on
        every write, whichever host made it). Use messages() for dicts of your own."""

        async def op(conn: Any) -> list[dict[str, Any]]:
            current = await self._version(conn, session_id)
            hit = self._transcripts.cached(session_id, current)
            if hit is not None:
                return hit
            cur = await conn.execute(
                "SELECT data FROM hookwire_messages WHERE session_id = %s ORDER BY seq", (session_id,))
            return self._transcripts.fill(session_id, current, [json.loads(row[0]) for row in await cur.fetchall()])

        return await self._run(op)

    async def messages(self, session_id: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The session's transcript in order; with ``limit``, only the most recent ``limit`` messages."""

        async def op(conn: Any) -> list[dict[str, Any]]:
            if limit is None:
                cur = await conn.execute(
                    "SELECT data FROM hookwire_messages WHERE session_id = %s ORDER BY seq", (session_id,))
                rows = await cur.fetchall()
            else:
                cur = await conn.execute(
                    "SELECT data FROM hookwire_messages WHERE session_id = %s ORDER BY seq DESC LIMIT %s",
                    (session_id, max(0, limit)))
                rows = list(reversed(await cur.fetchall()))
            return [json.loads(row[0]) for row in rows]

        return await self._run(op)

    async def delete_messages(self, session_id: str, ids: list[str]) -> None:
        """Delete the session's messages with these ids (unknown ids are ignored)."""
        id_list = list(ids)

        async def op(conn: Any) -> None:
            await conn.execute("DELETE FROM hookwire_messages WHERE session_id = %s AND id = ANY(%s)",
                               (session_id, id_list))

        await self._run(op)

    async def replace_all(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        """Atomically replace the whole transcript (compaction); ids must be unique within ``messages``."""
        rows = [_check_message(session_id, m) for m in messages]
        seen: set[str] = set()
        for msg_id, _, _ in rows:
            if msg_id in seen:
                raise StoreError(f"replace_all for session {session_id!r}: duplicate message id {msg_id!r}")
            seen.add(msg_id)

        async def op(conn: Any) -> None:
            await self._session_lock(conn, session_id)
            now = time.time()
            await conn.execute("DELETE FROM hookwire_messages WHERE session_id = %s", (session_id,))
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO hookwire_messages (session_id, seq, id, role, data, created_at, updated_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    [(session_id, seq, i, role, data, now, now) for seq, (i, role, data) in enumerate(rows, start=1)],
                )

        await self._run(op)

    # ------------------------------------------------------------------ submissions

    async def record_submission(self, session_id: str, submission_id: str, payload: dict[str, Any]) -> None:
        """Record a durable submission with status "pending" (recording the same id again is a no-op)."""
        try:
            data = strict_json(payload)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"submission {submission_id!r} payload is not JSON-serializable: {exc}") from exc

        async def op(conn: Any) -> None:
            now = time.time()
            await conn.execute(
                "INSERT INTO hookwire_submissions (submission_id, session_id, payload, status, error, created_at, "
                "updated_at) VALUES (%s, %s, %s, 'pending', NULL, %s, %s) ON CONFLICT (submission_id) DO NOTHING",
                (submission_id, session_id, data, now, now),
            )
            row = await (await conn.execute(
                "SELECT session_id FROM hookwire_submissions WHERE submission_id = %s", (submission_id,))).fetchone()
            if row is not None and row[0] != session_id:
                raise StoreError(
                    f"submission {submission_id!r} already belongs to session {row[0]!r}, not {session_id!r}"
                )

        await self._run(op)

    async def set_submission_status(self, submission_id: str, status: str, error: str | None = None) -> None:
        """Set a submission's status (e.g. "running", "completed", "error", "aborted") and error text. On a claimed
        submission the update goes through the claim's transaction; a final status commits it (ends the claim)."""
        claim = self._claims.get(submission_id)
        if claim is not None:
            await claim.execute(
                "UPDATE hookwire_submissions SET status = %s, error = %s, updated_at = %s WHERE submission_id = %s",
                (status, error, time.time(), submission_id),
            )
            if status not in OPEN_SUBMISSION_STATUSES:
                self._claims.pop(submission_id, None)
                try:
                    await claim.execute("COMMIT")
                except BaseException:
                    await claim.close()
                    raise
                await self._park(claim)
            return

        async def op(conn: Any) -> None:
            cur = await conn.execute(
                "UPDATE hookwire_submissions SET status = %s, error = %s, updated_at = %s WHERE submission_id = %s",
                (status, error, time.time(), submission_id),
            )
            if cur.rowcount == 0:
                raise StoreError(f"unknown submission {submission_id!r}")

        await self._run(op)

    async def pending_submissions(self, session_id: str) -> list[dict[str, Any]]:
        """Unfinished submissions (status "pending" or "running"), oldest first:
        ``{submission_id, payload, status, created_at}``."""

        async def op(conn: Any) -> list[dict[str, Any]]:
            cur = await conn.execute(
                "SELECT submission_id, payload, status, created_at FROM hookwire_submissions "
                "WHERE session_id = %s AND status = ANY(%s) ORDER BY created_at, ord",
                (session_id, list(OPEN_SUBMISSION_STATUSES)),
            )
            return [
                {"submission_id": sid, "payload": json.loads(payload), "status": status, "created_at": created}
                for sid, payload, status, created in await cur.fetchall()
            ]

        return await self._run(op)

    async def claim_submission(self, submission_id: str) -> bool:
        """Take the submission for this process until its final status: False when it is finished, unknown, or
        another live process holds it (see the module doc)."""
        if submission_id in self._claims:
            return False  # this process already runs it: a second runner must not start
        await self._ensure_open()
        psycopg = _psycopg()
        conn = self._idle_leases.pop() if self._idle_leases else await self._connect()
        try:
            await conn.execute("BEGIN")
            row = await (await conn.execute(
                "SELECT status FROM hookwire_submissions WHERE submission_id = %s AND status = ANY(%s) "
                "FOR UPDATE SKIP LOCKED", (submission_id, list(OPEN_SUBMISSION_STATUSES)))).fetchone()
        except BaseException as exc:
            await conn.close()
            if isinstance(exc, psycopg.Error):
                raise StoreError(f"PostgreSQL store {redact(self.url)!r}: claiming submission {submission_id!r} "
                                 f"failed: {str(exc).strip()}") from None
            raise
        if row is None:
            await conn.execute("ROLLBACK")
            await self._park(conn)
            return False
        self._claims[submission_id] = conn
        return True

    async def _ensure_open(self) -> None:
        async with self._lock:
            await self._ensure()

    # ------------------------------------------------------------------ one turn at a time, across processes

    @contextlib.asynccontextmanager
    async def turn_lease(self, session_id: str) -> AsyncIterator[None]:
        """Hold the session's turn lease (a session-level advisory lock) for the block; waits for the holder."""
        await self._ensure_open()
        psycopg = _psycopg()
        conn = self._idle_leases.pop() if self._idle_leases else await self._connect()
        try:
            await conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_TURN_LOCK, session_id))
        except BaseException as exc:
            await conn.close()  # a cancelled wait: the connection (and any lock it got meanwhile) goes
            if isinstance(exc, psycopg.Error):
                raise StoreError(f"PostgreSQL store {redact(self.url)!r}: the turn lease of session "
                                 f"{session_id!r} failed: {str(exc).strip()}") from None
            raise
        try:
            yield
        finally:
            await self._release_lease(conn, session_id)

    async def _release_lease(self, conn: Any, session_id: str) -> None:
        try:
            await asyncio.shield(conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_TURN_LOCK, session_id)))
        except BaseException:
            await conn.close()  # closing the connection releases the lock too
            raise
        await self._park(conn)

    async def _park(self, conn: Any) -> None:
        """Keep an idle side connection (lease or claim) for the next one, or close it."""
        if self._closed or conn.closed or len(self._idle_leases) >= IDLE_LEASE_CONNECTIONS:
            await conn.close()
        else:
            self._idle_leases.append(conn)

    # ------------------------------------------------------------------ context blocks and metadata

    async def get_context(self, session_id: str, label: str) -> str | None:
        async def op(conn: Any) -> str | None:
            row = await (await conn.execute(
                "SELECT content FROM hookwire_context WHERE session_id = %s AND label = %s", (session_id, label)
            )).fetchone()
            return None if row is None else str(row[0])

        return await self._run(op)

    async def set_context(self, session_id: str, label: str, content: str) -> None:
        if not isinstance(content, str):
            raise StoreError(f"context {label!r} of session {session_id!r} must be a string")

        async def op(conn: Any) -> None:
            await conn.execute(
                "INSERT INTO hookwire_context (session_id, label, content, updated_at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (session_id, label) DO UPDATE SET content = excluded.content, "
                "updated_at = excluded.updated_at",
                (session_id, label, content, time.time()),
            )

        await self._run(op)

    async def get_meta(self, session_id: str) -> dict[str, Any]:
        """The session's metadata dict ({} when none was set)."""

        async def op(conn: Any) -> dict[str, Any]:
            row = await (await conn.execute(
                "SELECT data FROM hookwire_meta WHERE session_id = %s", (session_id,))).fetchone()
            return {} if row is None else dict(json.loads(row[0]))

        return await self._run(op)

    async def set_meta(self, session_id: str, meta: dict[str, Any]) -> None:
        """Replace the session's metadata dict."""
        try:
            data = strict_json(meta)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"metadata of session {session_id!r} is not JSON-serializable: {exc}") from exc

        async def op(conn: Any) -> None:
            await conn.execute(
                "INSERT INTO hookwire_meta (session_id, data, updated_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (session_id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at",
                (session_id, data, time.time()),
            )

        await self._run(op)

    # ------------------------------------------------------------------ the decision journal

    async def append_journal(self, session_id: str,
                             drafts: list[tuple[JournalDraft | DraftFields, str | None]]) -> None:
        """Append entries (with their kept snapshots) at the end of the session's hash chain (host/turn/_journal.py)."""
        await self._run(lambda conn: _journal_sql.pg_append(conn, session_id, drafts))

    async def journal(self, session_id: str | None = None, submission_id: str | None = None) -> list[JournalRow]:
        """The session's journal rows in order (None: every session's, by session then order); with
        `submission_id`, only the entries of that durable submission's turns."""
        return await self._run(lambda conn: _journal_sql.pg_read(conn, session_id, submission_id))

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        """Close every connection (idempotent). Claims not finished roll back: their submissions are pending again."""
        if self._closed:
            return
        self._closed = True
        conns = [self._conn, *self._idle_leases, *self._claims.values()]
        self._conn, self._idle_leases, self._claims = None, [], {}
        for conn in conns:
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
