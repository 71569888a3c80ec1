"""Write a frame on a Connect stream from the caller, now: the write's first step (which hands the message to gRPC)
runs in the caller, and only the wait for its completion goes on in a task of its own.

An awaited hook on an idle stream then costs no trip round the event loop before its frame leaves (the sender task
would have had to wake first), and the caller never awaits the write itself: cancelling the caller (a timeout, a
cancelled turn) cannot cancel a write half done, which grpc.aio answers by cancelling the whole stream.
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any


def start_write(coro: Coroutine[Any, Any, None],
                done: Callable[[BaseException | None], None]) -> asyncio.Task[None] | None:
    """Run `coro` (a stream write) up to its first suspension here; the rest in a task (returned; None when the
    write finished at once). `done(error)` is called exactly once when the write finished (error None) or failed
    (the exception; a CancelledError included)."""
    context = contextvars.copy_context()
    try:
        yielded = context.run(coro.send, None)
    except StopIteration:
        done(None)
        return None
    except BaseException as exc:  # noqa: BLE001 - the write failed at once (stream broken): the caller's `done` decides
        done(exc)
        return None
    return asyncio.get_running_loop().create_task(_finish(coro, yielded, done), context=context)  # type: ignore[arg-type]


async def _finish(coro: Coroutine[Any, Any, None], yielded: Any,
                  done: Callable[[BaseException | None], None]) -> None:
    try:
        await _resume(coro, yielded)
    except BaseException as exc:  # noqa: BLE001 - reported to `done`; a cancelled task (close()) ends here too
        done(exc)
        if isinstance(exc, asyncio.CancelledError):
            raise
        return
    done(None)


@types.coroutine
def _resume(coro: Coroutine[Any, Any, None], yielded: Any) -> Generator[Any, Any, None]:
    """Drive the rest of a coroutine already started: hand the task what it waits on, pass back what comes."""
    while True:
        try:
            value = yield yielded
        except BaseException as exc:  # noqa: BLE001 - cancellation and the rest go to the coroutine, as in a task
            try:
                yielded = coro.throw(exc)
            except StopIteration:
                return
        else:
            try:
                yielded = coro.send(value)
            except StopIteration:
                return
