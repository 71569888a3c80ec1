"""A new session's store open waits for SQLite's write lock off the event loop (issue 19: every new session opened
its store on the loop, and its BEGIN IMMEDIATE waited there behind other sessions' writes, stalling all of them)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from host import Agent, MessageStore

HOLD_S = 0.4


async def test_starting_an_agent_while_another_connection_writes_does_not_stall_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with MessageStore(path):  # the schema exists: the open below only waits for the lock
        pass
    async with Agent(session_id="warm"):  # the first start's one-time imports (litellm) are not what is measured
        pass
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another session mid-write holds the write lock
    loop = asyncio.get_running_loop()
    lags: list[float] = []

    async def ticker() -> None:
        while True:
            t0 = loop.time()
            await asyncio.sleep(0.01)
            lags.append(loop.time() - t0 - 0.01)

    async def release() -> None:
        await asyncio.sleep(HOLD_S)
        other.execute("COMMIT")

    tick = asyncio.ensure_future(ticker())
    try:
        async with asyncio.timeout(10):
            _, agent = await asyncio.gather(release(), Agent(session_id="s", store=path).__aenter__())
        await agent.__aexit__(None, None, None)
    finally:
        tick.cancel()
        other.close()
    assert lags and max(lags) < HOLD_S / 2, f"the loop stalled {max(lags) * 1000:.0f} ms"
