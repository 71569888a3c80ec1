"""Start a coroutine eagerly: its first step runs now, in a context of its own (as a task's would); a task is made
only if it suspends. An awaited hook whose handler answers without waiting costs no task and no trip around the
event loop (Python 3.12's eager task factory, for 3.11)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import types
from collections.abc import Coroutine, Generator
from typing import Any

log = logging.getLogger("extension_sdk")


def start_eager(coro: Coroutine[Any, Any, None]) -> asyncio.Task[None] | None:
    """Run `coro` up to its first suspension in a copy of the current context. None when it finished there (an
    exception it raised is logged, as a task's would be); else the task that runs the rest, in the same context."""
    context = contextvars.copy_context()
    try:
        yielded = context.run(coro.send, None)
    except StopIteration:
        return None
    except Exception:  # noqa: BLE001 - what an unawaited task's exception would have been: logged, nothing more
        log.exception("awaited hook failed outside its handler")
        return None
    return asyncio.get_running_loop().create_task(_resume(coro, yielded), context=context)  # type: ignore[arg-type]


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
