"""Which message store a spec names, and the multi-host extras a store may offer.

`open_store(spec)`: None -> an in-memory SQLite store; a `postgresql://` (or `postgres://`) URL -> the PostgreSQL
store (host/turn/_pg_store.py); anything else -> a SQLite file path (host/turn/_store.py, the embedded default).
`turn_lease(store, session_id)` and `claim_submission(store, id)` use what the store offers (PostgreSQL: across host
processes) and are no-ops on a store without them (SQLite: one host process owns its file).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ._pg_store import PostgresMessageStore, is_postgres_url
from ._store import MessageStore


def open_store(spec: str | Path | None) -> Any:
    """A new store for `spec` (the caller owns it and closes it)."""
    if spec is None:
        return MessageStore(":memory:")
    if is_postgres_url(spec):
        return PostgresMessageStore(str(spec))
    return MessageStore(str(spec))


def is_store(obj: object) -> bool:
    """Whether `obj` is a store object (passed in by the app, not owned by the agent) rather than a spec."""
    return isinstance(obj, (MessageStore, PostgresMessageStore))


@contextlib.asynccontextmanager
async def turn_lease(store: Any, session_id: str) -> AsyncIterator[None]:
    """Hold the session's cross-process turn lease for the block, if the store has one."""
    lease = getattr(store, "turn_lease", None)
    if lease is None:
        yield
        return
    async with lease(session_id):
        yield


async def claim_submission(store: Any, submission_id: str) -> bool:
    """Take a durable submission for this process (True when the store has no claims: one process owns it)."""
    claim = getattr(store, "claim_submission", None)
    return True if claim is None else bool(await claim(submission_id))
