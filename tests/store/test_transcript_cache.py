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
