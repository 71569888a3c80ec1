"""The message store's contract, on both backends (SQLite, the embedded default, and a real PostgreSQL server):
order, upsert, restart, isolation, concurrency, context, meta, versioning. Backend-specific checks close the file."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from host import MessageStore, PostgresMessageStore, StoreError, StoreVersionError, open_store

Store = MessageStore | PostgresMessageStore


def msg(i: int | str, role: str = "user", text: str | None = None) -> dict:
    return {"id": f"m{i}", "role": role, "content": text if text is not None else f"text {i}"}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / "hookwire.sqlite"


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, db: Path) -> str:
    """Where a store lives: a SQLite file, or a fresh database on the test PostgreSQL server."""
    if request.param == "sqlite":
        return str(db)
    return str(request.getfixturevalue("postgres").new_url())


@pytest.fixture
async def store(location: str) -> AsyncIterator[Store]:
    s = open_store(location)
    yield s
    await s.close()


# --------------------------------------------------------------------------- messages


async def test_append_preserves_order(store: Store) -> None:
    for i in range(5):
        await store.append("s1", msg(i))
    assert [m["id"] for m in await store.messages("s1")] == ["m0", "m1", "m2", "m3", "m4"]


async def test_messages_round_trip_unchanged(store: Store) -> None:
    message = {"id": "a", "role": "assistant", "parts": [{"type": "text", "text": "héllo"}], "n": 1, "x": None}
    await store.append("s1", message)
    assert await store.messages("s1") == [message]


async def test_limit_returns_the_most_recent_messages_in_order(store: Store) -> None:
    for i in range(5):
        await store.append("s1", msg(i))
    assert [m["id"] for m in await store.messages("s1", limit=2)] == ["m3", "m4"]


async def test_upsert_replaces_in_place(store: Store) -> None:
    await store.append("s1", msg(1))
    await store.append("s1", msg(2, "assistant", "partial"))
    await store.append("s1", msg(3))
    await store.upsert("s1", msg(2, "assistant", "final answer"))
    assert [(m["id"], m["content"]) for m in await store.messages("s1")] == [
        ("m1", "text 1"),
        ("m2", "final answer"),
        ("m3", "text 3"),
    ]


async def test_upsert_of_new_id_appends(store: Store) -> None:
    await store.append("s1", msg(1))
    await store.upsert("s1", msg(2))
    assert [m["id"] for m in await store.messages("s1")] == ["m1", "m2"]


async def test_append_of_existing_id_is_refused(store: Store) -> None:
    await store.append("s1", msg(1))
    with pytest.raises(StoreError, match="'m1' already exists in session 's1'"):
        await store.append("s1", msg(1))


async def test_message_without_id_is_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="needs a non-empty string 'id'"):
        await store.append("s1", {"role": "user", "content": "x"})


async def test_message_without_role_is_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="needs a non-empty string 'role'"):
        await store.append("s1", {"id": "x", "content": "x"})


async def test_delete_messages_removes_only_those_ids(store: Store) -> None:
    for i in range(4):
        await store.append("s1", msg(i))
    await store.delete_messages("s1", ["m1", "m3", "unknown"])
    assert [m["id"] for m in await store.messages("s1")] == ["m0", "m2"]


async def test_replace_all_swaps_the_transcript(store: Store) -> None:
    for i in range(4):
        await store.append("s1", msg(i))
    summary = {"id": "summary", "role": "system", "content": "summary of m0..m2"}
    await store.replace_all("s1", [summary, msg(3)])
    assert [m["id"] for m in await store.messages("s1")] == ["summary", "m3"]
    await store.append("s1", msg(4))
    assert [m["id"] for m in await store.messages("s1")] == ["summary", "m3", "m4"]


async def test_non_finite_numbers_are_never_stored_in_submissions_or_metadata(store: Store) -> None:
    with pytest.raises(StoreError, match="submission 'sub-nan' payload is not JSON-serializable"):
        await store.record_submission("s1", "sub-nan", {"messages": [], "body": {"x": float("nan")}})
    with pytest.raises(StoreError, match="metadata of session 's1' is not JSON-serializable"):
        await store.set_meta("s1", {"score": float("inf")})
    assert await store.pending_submissions("s1") == []
    assert await store.get_meta("s1") == {}


async def test_replace_all_with_duplicate_ids_keeps_the_old_transcript(store: Store) -> None:
    await store.append("s1", msg(0))
    with pytest.raises(StoreError, match="duplicate message id 'm1'"):
        await store.replace_all("s1", [msg(1), msg(1)])
    assert [m["id"] for m in await store.messages("s1")] == ["m0"]


async def test_sessions_are_isolated(store: Store) -> None:
    await store.append("s1", msg(1))
    await store.append("s2", msg(1, text="other session"))
    await store.append("s2", msg(2))
    await store.delete_messages("s1", ["m1"])
    assert await store.messages("s1") == []
    assert [m["content"] for m in await store.messages("s2")] == ["other session", "text 2"]


async def test_concurrent_appends_keep_every_message(store: Store) -> None:
    async def writer(w: int) -> None:
        for i in range(20):
            await store.append("s1", msg(f"{w}-{i}"))

    await asyncio.gather(*(writer(w) for w in range(10)))
    ids = [m["id"] for m in await store.messages("s1")]
    assert len(ids) == 200 and len(set(ids)) == 200
    for w in range(10):  # each writer's own order is preserved
        mine = [i for i in ids if i.startswith(f"m{w}-")]
        assert mine == [f"m{w}-{i}" for i in range(20)]


async def test_two_stores_on_one_location_interleave_appends(location: str) -> None:
    a, b = open_store(location), open_store(location)
    try:

        async def writer(s: Store, tag: str) -> None:
            for i in range(25):
                await s.append("shared", msg(f"{tag}{i}"))

        await asyncio.gather(writer(a, "a"), writer(b, "b"))
        assert len(await a.messages("shared")) == 50
        assert await a.messages("shared") == await b.messages("shared")
    finally:
        await a.close()
        await b.close()


def test_another_process_sees_committed_messages(location: str) -> None:
    async def write() -> None:
        async with open_store(location) as s:
            await s.append("s1", msg(1))

    asyncio.run(write())
    code = (
        # another process of the host (`import host` does not import litellm, so this starts fast)
        "import asyncio, sys\n"
        "from host import open_store\n"
        "async def main():\n"
        "    async with open_store(sys.argv[1]) as s:\n"
        "        await s.append('s1', {'id': 'm2', 'role': 'assistant'})\n"
        "        print(len(await s.messages('s1')))\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run([sys.executable, "-c", code, location], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"


# --------------------------------------------------------------------------- restart


async def test_transcript_survives_restart(location: str) -> None:
    s = open_store(location)
    await s.append("s1", msg(1))
    await s.append("s1", msg(2, "assistant"))
    await s.close()
    s = open_store(location)
    try:
        assert [m["id"] for m in await s.messages("s1")] == ["m1", "m2"]
    finally:
        await s.close()


async def test_pending_submissions_survive_restart(location: str) -> None:
    s = open_store(location)
    await s.record_submission("s1", "sub-1", {"messages": [msg(1)]})
    await s.record_submission("s1", "sub-2", {"messages": [msg(2)]})
    await s.set_submission_status("sub-1", "completed")
    await s.close()
    s = open_store(location)
    try:
        pending = await s.pending_submissions("s1")
        assert [(p["submission_id"], p["status"], p["payload"]) for p in pending] == [
            ("sub-2", "pending", {"messages": [msg(2)]})
        ]
        assert isinstance(pending[0]["created_at"], float)
    finally:
        await s.close()


# --------------------------------------------------------------------------- submissions


async def test_running_submission_is_still_pending_work(store: Store) -> None:
    await store.record_submission("s1", "sub-1", {})
    await store.set_submission_status("sub-1", "running")
    assert [p["status"] for p in await store.pending_submissions("s1")] == ["running"]


async def test_errored_submission_is_not_pending(store: Store) -> None:
    await store.record_submission("s1", "sub-1", {})
    await store.set_submission_status("sub-1", "error", "model failed")
    assert await store.pending_submissions("s1") == []


async def test_pending_submissions_are_oldest_first_and_per_session(store: Store) -> None:
    for i in range(3):
        await store.record_submission("s1", f"sub-{i}", {"i": i})
    await store.record_submission("s2", "other", {})
    assert [p["submission_id"] for p in await store.pending_submissions("s1")] == ["sub-0", "sub-1", "sub-2"]


async def test_recording_a_submission_twice_is_idempotent(store: Store) -> None:
    await store.record_submission("s1", "sub-1", {"v": 1})
    await store.set_submission_status("sub-1", "running")
    await store.record_submission("s1", "sub-1", {"v": 2})
    assert [(p["payload"], p["status"]) for p in await store.pending_submissions("s1")] == [({"v": 1}, "running")]


async def test_submission_id_of_another_session_is_refused(store: Store) -> None:
    await store.record_submission("s1", "sub-1", {})
    with pytest.raises(StoreError, match="already belongs to session 's1'"):
        await store.record_submission("s2", "sub-1", {})


async def test_status_of_unknown_submission_is_refused(store: Store) -> None:
    with pytest.raises(StoreError, match="unknown submission 'nope'"):
        await store.set_submission_status("nope", "completed")


# --------------------------------------------------------------------------- context and meta


async def test_context_round_trip(store: Store) -> None:
    assert await store.get_context("s1", "memory") is None
    await store.set_context("s1", "memory", "likes tea")
    await store.set_context("s1", "memory", "likes coffee")
    assert await store.get_context("s1", "memory") == "likes coffee"
    assert await store.get_context("s2", "memory") is None


async def test_meta_round_trip(store: Store) -> None:
    assert await store.get_meta("s1") == {}
    await store.set_meta("s1", {"title": "chat", "n": 2, "tags": ["a"]})
    assert await store.get_meta("s1") == {"title": "chat", "n": 2, "tags": ["a"]}
    await store.set_meta("s1", {"title": "renamed"})
    assert await store.get_meta("s1") == {"title": "renamed"}


# --------------------------------------------------------------------------- file, mode, versions, lifecycle


async def test_file_store_uses_wal(db: Path) -> None:
    async with MessageStore(db) as store:
        assert await store.journal_mode() == "wal"
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_schema_version_is_recorded(db: Path) -> None:
    await MessageStore(db).close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2


async def test_newer_schema_version_is_refused_with_clear_error(db: Path) -> None:
    await MessageStore(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreVersionError, match="schema version 99, newer than this hookwire supports"):
        MessageStore(db)


async def test_memory_store_works() -> None:
    async with MessageStore(":memory:") as s:
        await s.append("s1", msg(1))
        assert [m["id"] for m in await s.messages("s1")] == ["m1"]


async def test_closed_store_refuses_calls(location: str) -> None:
    s = open_store(location)
    await s.close()
    await s.close()  # idempotent
    with pytest.raises(StoreError, match="is closed"):
        await s.messages("s1")


# --------------------------------------------------------------------------- PostgreSQL only


async def test_postgres_newer_schema_version_is_refused_with_clear_error(postgres: object) -> None:
    import psycopg

    url = postgres.new_url()  # type: ignore[attr-defined]
    await open_store(url).close()
    async with PostgresMessageStore(url) as s:
        await s.messages("s1")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE hookwire_schema SET version = 99")
    with pytest.raises(StoreVersionError, match="schema version 99, newer than this hookwire supports"):
        await PostgresMessageStore(url).open()


async def test_postgres_unreachable_server_is_a_clear_error_without_the_password() -> None:
    with pytest.raises(StoreError, match=r"cannot connect to the PostgreSQL store 'postgresql://app:\*\*\*@127\.0\.0\.1:1/x'"):
        await PostgresMessageStore("postgresql://app:s3cret@127.0.0.1:1/x").open()


def test_open_store_picks_the_backend_by_url(tmp_path: Path) -> None:
    assert isinstance(open_store("postgresql://u@h/db"), PostgresMessageStore)
    assert isinstance(open_store("postgres://u@h/db"), PostgresMessageStore)
    sqlite = open_store(tmp_path / "s.db")
    assert isinstance(sqlite, MessageStore)
    asyncio.run(sqlite.close())
