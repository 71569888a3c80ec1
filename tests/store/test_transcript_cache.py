"""The transcript a turn reads (MessageStore.transcript): kept decoded between turns, never stale — this store's
own writes, another connection's writes and a failed write all show in the next read; the store stays strict JSON."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from host import MessageStore, StoreError


def msg(i: int | str, role: str = "user", text: str | None = None) -> dict:
    return {"id": f"m{i}", "role": role, "content": text if text is not None else f"text {i}"}


async def test_own_upserts_show_in_the_next_transcript_in_order(tmp_path: Path) -> None:
    async with MessageStore(tmp_path / "s.db") as store:
        for i in range(3):
            await store.upsert("a", msg(i))
        assert [m["id"] for m in await store.transcript("a")] == ["m0", "m1", "m2"]
        await store.upsert("a", msg(1, text="replaced"))
        await store.upsert("a", msg(3))
        got = await store.transcript("a")
    assert [(m["id"], m["content"]) for m in got] == [("m0", "text 0"), ("m1", "replaced"), ("m2", "text 2"),
                                                       ("m3", "text 3")]


async def test_another_connections_writes_are_seen_by_the_next_transcript(tmp_path: Path) -> None:
    async with MessageStore(tmp_path / "s.db") as mine, MessageStore(tmp_path / "s.db") as other:
        await mine.upsert("a", msg(0))
        await mine.upsert("a", msg(1))
        assert len(await mine.transcript("a")) == 2
        await other.upsert("a", msg(1, text="edited elsewhere"))
        assert [m["content"] for m in await mine.transcript("a")] == ["text 0", "edited elsewhere"]
        await other.delete_messages("a", ["m0"])
        assert [m["id"] for m in await mine.transcript("a")] == ["m1"]
        await other.replace_all("a", [msg("x"), msg("y")])
        assert [m["id"] for m in await mine.transcript("a")] == ["mx", "my"]


async def test_a_refused_write_leaves_the_transcript_as_stored(tmp_path: Path) -> None:
    async with MessageStore(tmp_path / "s.db") as store:
        await store.upsert("a", msg(0))
        assert len(await store.transcript("a")) == 1
        with pytest.raises(StoreError, match="m1"):
            await store.upsert("a", {"id": "m1", "role": "user", "content": math.nan})
        assert [m["id"] for m in await store.transcript("a")] == ["m0"]
        assert [m["id"] for m in await store.messages("a")] == ["m0"]


async def test_lone_surrogates_are_stored_escaped_and_read_back_unchanged(tmp_path: Path) -> None:
    async with MessageStore(tmp_path / "s.db") as store:
        await store.upsert("a", msg(0, text="a\udcffb"))
        assert (await store.messages("a"))[0]["content"] == "a\udcffb"


async def test_a_row_changed_outside_hookwire_is_seen_by_the_next_transcript(tmp_path: Path) -> None:
    import sqlite3

    async with MessageStore(tmp_path / "s.db") as store:
        await store.upsert("a", msg(0))
        await store.upsert("a", msg(1))
        assert len(await store.transcript("a")) == 2
        with sqlite3.connect(tmp_path / "s.db") as conn:  # the sqlite3 shell, or a hookwire without the cache
            conn.execute("UPDATE messages SET data = ? WHERE id = 'm0'", ('{"id":"m0","role":"user","content":"x"}',))
        assert [m["content"] for m in await store.transcript("a")] == ["x", "text 1"]


async def test_another_processes_writes_to_the_same_session_are_seen(tmp_path: Path) -> None:
    import subprocess
    import sys

    db = tmp_path / "s.db"
    script = (
        "import asyncio, sys\n"
        "from host import MessageStore\n"
        "async def main():\n"
        "    async with MessageStore(sys.argv[1]) as s:\n"
        "        await s.upsert('a', {'id': 'm1', 'role': 'assistant', 'content': 'from the other process'})\n"
        "        await s.upsert('a', {'id': 'm2', 'role': 'user', 'content': 'and one more'})\n"
        "asyncio.run(main())\n"
    )
    async with MessageStore(db) as store:
        await store.upsert("a", msg(0))
        await store.upsert("a", msg(1))
        assert len(await store.transcript("a")) == 2
        subprocess.run([sys.executable, "-c", script, str(db)], check=True, timeout=60)
        await store.upsert("a", msg(3))  # this store's own write after theirs: the entry must not be patched
        got = await store.transcript("a")
    assert [(m["id"], m["content"]) for m in got] == [("m0", "text 0"), ("m1", "from the other process"),
                                                       ("m2", "and one more"), ("m3", "text 3")]


# --------------------------------------------------------------------------- PostgreSQL: the same cache, many hosts


def _contents(messages: list[dict]) -> list[tuple[str, str]]:
    return [(m["id"], m["content"]) for m in messages]


async def test_postgres_transcript_keeps_its_own_writes_and_sees_every_other_hosts(postgres: object) -> None:
    from host import PostgresMessageStore

    url = postgres.new_url()  # type: ignore[attr-defined]
    async with PostgresMessageStore(url) as mine, PostgresMessageStore(url) as other:
        await mine.upsert("a", msg(0))
        await mine.append("a", msg(1))
        assert _contents(await mine.transcript("a")) == [("m0", "text 0"), ("m1", "text 1")]
        await mine.upsert("a", msg(2))
        await mine.upsert("a", msg(0, text="replaced"))
        assert _contents(await mine.transcript("a")) == [("m0", "replaced"), ("m1", "text 1"), ("m2", "text 2")]
        await other.upsert("a", msg(1, text="edited elsewhere"))
        await other.delete_messages("a", ["m0"])
        assert _contents(await mine.transcript("a")) == [("m1", "edited elsewhere"), ("m2", "text 2")]
        await other.replace_all("a", [msg("x")])
        await mine.upsert("a", msg("y"))  # this host's write after theirs: its entry must not be patched
        assert _contents(await mine.transcript("a")) == [("mx", "text x"), ("my", "text y")]
        assert _contents(await other.transcript("a")) == [("mx", "text x"), ("my", "text y")]


async def test_postgres_transcript_is_served_from_the_cache_until_the_version_moves(postgres: object) -> None:
    import psycopg

    from host import PostgresMessageStore

    url = postgres.new_url()  # type: ignore[attr-defined]
    async with PostgresMessageStore(url) as store:
        await store.upsert("a", msg(0))
        assert _contents(await store.transcript("a")) == [("m0", "text 0")]
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as raw:
            # a write that fires no trigger (replica role): the version stays, so the cached transcript is served
            await raw.execute("SET session_replication_role = replica")
            await raw.execute("UPDATE hookwire_messages SET data = %s WHERE id = 'm0'",
                              ('{"id": "m0", "role": "user", "content": "unseen"}',))
            assert _contents(await store.transcript("a")) == [("m0", "text 0")]
            await raw.execute("SET session_replication_role = DEFAULT")  # an ordinary write bumps the version
            await raw.execute("UPDATE hookwire_messages SET data = %s WHERE id = 'm0'",
                              ('{"id": "m0", "role": "user", "content": "seen"}',))
        assert _contents(await store.transcript("a")) == [("m0", "seen")]
