"""The store's worker thread (host/turn/_store_thread.py) and the turn's one-round-trip persist-then-read
(`MessageStore.upsert_then_transcript`)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from host import MessageStore, StoreError
from host.turn._store_thread import StoreThread


def _user(msg_id: str, text: str) -> dict[str, object]:
    return {"id": msg_id, "role": "user", "parts": [{"type": "text", "text": text}]}


async def test_jobs_run_in_order_on_one_thread_that_is_not_the_event_loops() -> None:
    worker = StoreThread()
    seen: list[tuple[int, int]] = []
    try:
        await asyncio.gather(*(worker.run(lambda i=i: seen.append((i, threading.get_ident()))) for i in range(5)))
    finally:
        worker.stop(wait=True)
    assert [i for i, _ in seen] == [0, 1, 2, 3, 4]
    assert {tid for _, tid in seen} == {worker._thread.ident}
    assert worker._thread.ident != threading.get_ident()


async def test_a_jobs_exception_reaches_its_awaiter_and_the_thread_goes_on() -> None:
    worker = StoreThread()

    def boom() -> None:
        raise ValueError("bad row")

    try:
        with pytest.raises(ValueError, match="bad row"):
            await worker.run(boom)
        assert await worker.run(lambda: 42) == 42
    finally:
        worker.stop(wait=True)


async def test_a_job_whose_awaiter_was_cancelled_before_it_started_does_not_run() -> None:
    worker = StoreThread()
    release = threading.Event()
    ran: list[str] = []
    try:
        first = asyncio.ensure_future(worker.run(lambda: (release.wait(10), ran.append("first"))))
        second = asyncio.ensure_future(worker.run(lambda: ran.append("second")))
        await asyncio.sleep(0.05)  # the first job holds the thread; the second is queued behind it
        second.cancel()
        await asyncio.sleep(0)
        release.set()
        await first
        assert await worker.run(lambda: ran.append("third")) is None
    finally:
        worker.stop(wait=True)
    assert second.cancelled()
    assert ran == ["first", "third"]


def test_a_blocking_call_from_another_thread_returns_the_jobs_value() -> None:
    worker = StoreThread()
    try:
        assert worker.call(lambda: threading.get_ident()) == worker._thread.ident
    finally:
        worker.stop(wait=True)


async def test_upsert_then_transcript_returns_the_transcript_with_the_messages_stored() -> None:
    async with MessageStore(":memory:") as store:
        await store.upsert("s", _user("u1", "one"))
        first = await store.upsert_then_transcript("s", [_user("u2", "two"), _user("u1", "one, edited")])
        assert [(m["id"], m["parts"][0]["text"]) for m in first] == [("u1", "one, edited"), ("u2", "two")]
        assert first == await store.messages("s")


async def test_upsert_then_transcript_keeps_the_messages_before_a_bad_one_and_a_consistent_transcript() -> None:
    async with MessageStore(":memory:") as store:
        await store.upsert("s", _user("u1", "one"))
        await store.transcript("s")  # cached
        with pytest.raises(StoreError, match="role"):
            await store.upsert_then_transcript("s", [_user("u2", "two"), {"id": "u3", "role": ""}])
        stored = await store.messages("s")
        assert [m["id"] for m in stored] == ["u1", "u2"]
        assert await store.transcript("s") == stored


async def test_a_closed_store_refuses_upsert_then_transcript() -> None:
    store = MessageStore(":memory:")
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.upsert_then_transcript("s", [_user("u1", "one")])


async def test_upsert_then_transcript_stores_the_messages_even_when_only_the_read_fails(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with MessageStore(path) as store:
        await store.upsert("s", _user("u1", "one"))
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("UPDATE messages SET data = 'not json' WHERE id = 'u1'")  # a row another writer broke
    raw.close()
    async with MessageStore(path) as store:
        assert await store.upsert_then_transcript("s", [_user("u2", "two")]) is None
    raw = sqlite3.connect(path)
    assert [row[0] for row in raw.execute("SELECT id FROM messages ORDER BY seq")] == ["u1", "u2"]
    raw.close()
