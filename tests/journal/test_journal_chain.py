"""The journal's chain and its store contract without extension processes: appends from two stores on one session
form one chain (SQLite and PostgreSQL); verify names the first entry that does not hold, whatever was changed;
header values an extension sets are journaled as hashes only."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from extension_sdk.proto import extension_pb2 as pb
from host import open_store
from host.turn._journal import GENESIS, JournalDraft, JournalRow, seal, sha256_text, verify_chain
from host.turn._journal_writer import outcome_of


def draft(i: int, session: str = "s1") -> JournalDraft:
    return JournalDraft(session_id=session, request_id=f"req_{i}", extension="guard", extension_version="1.0.0",
                        hook="beforeToolCall", call_id=f"call_{i}", snapshot_sha256=sha256_text(f"snap {i}"),
                        outcome="block", decision={"action": "block"}, reason=f"no {i}")


def chain(n: int) -> list[JournalRow]:
    rows, prev = [], GENESIS
    for i in range(1, n + 1):
        digest, text = seal(draft(i), i, prev)
        rows.append(JournalRow(session_id="s1", seq=i, entry=text, hash=digest, snapshot=f"snap {i}"))
        prev = digest
    return rows


@pytest.fixture(params=["sqlite", "postgresql"])
async def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    spec = str(tmp_path / "s.db") if request.param == "sqlite" else request.getfixturevalue("postgres").new_url()
    a, b = open_store(spec), open_store(spec)
    yield a, b
    await a.close()
    await b.close()


async def test_appends_from_two_stores_on_one_session_form_one_intact_chain(two_stores: tuple[Any, Any]) -> None:
    a, b = two_stores
    await asyncio.gather(*(store.append_journal("s1", [(draft(i), f"snap {i}")])
                           for i in range(1, 21) for store in ([a] if i % 2 else [b])))
    await a.append_journal("s2", [(draft(1, "s2"), None)])
    rows = await b.journal("s1")
    assert [r.seq for r in rows] == list(range(1, 21))
    assert verify_chain(rows) == (None, rows[-1].hash)
    assert sorted(r.parsed().call_id for r in rows) == sorted(f"call_{i}" for i in range(1, 21))
    assert [(r.session_id, r.seq, r.snapshot) for r in await a.journal("s2")] == [("s2", 1, None)]


def test_verify_names_an_entry_whose_content_was_changed() -> None:
    rows = chain(4)
    rows[1] = rows[1].model_copy(update={"entry": rows[1].entry.replace('"block"', '"allow"')})
    broken, _ = verify_chain(rows)
    assert broken is not None and (broken.seq, broken.problem) == (
        2, "its content does not match its hash (the entry was changed)")


def test_verify_names_the_entry_after_one_rewritten_with_a_fresh_hash() -> None:
    rows = chain(4)
    text = rows[1].entry.replace('"block"', '"allow"')
    rows[1] = rows[1].model_copy(update={"entry": text, "hash": sha256_text(text)})
    broken, _ = verify_chain(rows)
    assert broken is not None and broken.seq == 3 and broken.problem.startswith("its prev_hash is not the previous")


def test_verify_names_the_place_of_a_deleted_entry() -> None:
    rows = chain(4)
    del rows[1]
    broken, _ = verify_chain(rows)
    assert broken is not None and (broken.seq, broken.problem) == (
        3, "expected entry 2 here (an entry is missing or out of place)")


def test_verify_names_an_entry_whose_kept_snapshot_was_changed() -> None:
    rows = chain(3)
    rows[2] = rows[2].model_copy(update={"snapshot": "another snapshot"})
    broken, _ = verify_chain(rows)
    assert broken is not None and broken.seq == 3 and "snapshot was changed" in broken.problem


def test_header_values_an_extension_sets_are_journaled_as_their_sha256_only() -> None:
    class Answer:
        frame = pb.ExtensionFrame(before_turn=pb.BeforeTurnResponse(config=pb.TurnConfigPatch(
            headers=pb.StringMap(values={"Authorization": "Bearer sk-secret"}), max_steps=2)))
        ms = 1.0

    outcome, decision, _ = outcome_of("beforeTurn", Answer())
    assert (outcome, decision) == ("ok", {"set": {"maxSteps": 2, "headers": {
        "Authorization": "sha256:" + sha256_text("Bearer sk-secret")}}})
    assert "sk-secret" not in json.dumps(decision)


async def test_a_version_1_sqlite_store_gets_the_journal_on_open(tmp_path: Path) -> None:
    from host.turn._store import _SCHEMA_V1

    db = tmp_path / "v1.db"
    with sqlite3.connect(db) as conn:  # a store as hookwire wrote it before the journal
        conn.executescript(_SCHEMA_V1 + "; PRAGMA user_version = 1;")
    store = open_store(str(db))
    try:
        await store.append_journal("s1", [(draft(1), "snap 1")])
        assert [r.parsed().call_id for r in await store.journal("s1")] == ["call_1"]
    finally:
        await store.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2


async def test_a_version_1_postgresql_store_gets_the_journal_on_open(postgres: Any) -> None:
    url = postgres.new_url()
    store = open_store(url)
    await store.open()
    await store.close()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:  # back to the schema before the journal
        conn.execute("DROP TABLE hookwire_journal")
        conn.execute("UPDATE hookwire_schema SET version = 1")
    store = open_store(url)
    try:
        await store.append_journal("s1", [(draft(1), "snap 1")])
        assert [r.parsed().call_id for r in await store.journal("s1")] == ["call_1"]
    finally:
        await store.close()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM hookwire_schema").fetchone() == (2,)
