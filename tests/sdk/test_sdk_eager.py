"""extension_sdk/_eager.py: an awaited hook starts at once, in a context of its own; a task only if it waits."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from extension_sdk._eager import start_eager

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="caller")


async def test_a_coroutine_that_never_waits_runs_to_the_end_without_a_task() -> None:
    ran: list[str] = []

    async def answer() -> None:
        VAR.set("hook")
        ran.append(VAR.get())

    assert start_eager(answer()) is None
    assert ran == ["hook"]
    assert VAR.get() == "caller"  # the hook's context variables stay its own, as in a task


async def test_a_coroutine_that_waits_finishes_in_a_task_in_its_own_context() -> None:
    seen: list[str] = []
    gate = asyncio.get_running_loop().create_future()

    async def answer() -> None:
        VAR.set("hook")
        seen.append(await gate)
        seen.append(VAR.get())

    task = start_eager(answer())
    assert task is not None and not task.done()
    gate.set_result("reply")
    await task
    assert seen == ["reply", "hook"]
    assert VAR.get() == "caller"


async def test_cancelling_the_task_cancels_the_coroutine_where_it_waits() -> None:
    cleaned: list[bool] = []

    async def answer() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            cleaned.append(True)

    task = start_eager(answer())
    assert task is not None
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == [True]
