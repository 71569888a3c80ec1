"""The end of a turn's flush: wait for every extension's acknowledgement at once.

One future for the whole group, resolved by the reader of the last connection whose ack arrives (each connection
calls back directly: no task, future or `asyncio.wait` per extension), and one timer at a time, armed for the
nearest deadline: an extension's `timeouts.hookMs` from the start of the flush, or the moment its connection counts
as stalled (no ack for observe_timeout_s). What each connection came to is what `ExtensionConnection.flush_outcome`
would have said: "ok", "lost" (the connection broke), "stalled" or "timeout"; with the milliseconds it took.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ._extension_client import ExtensionConnection


@dataclass(frozen=True, slots=True)
class FlushOutcome:
    """What one connection's flush came to, and how long it took (ms from the start of the group's flush)."""

    outcome: str  # "ok" | "lost" | "stalled" | "timeout"
    ms: float


async def flush_all(conns: Sequence[tuple[ExtensionConnection, float]]) -> list[FlushOutcome]:
    """Wait until each connection handled everything enqueued on it so far, each bounded by its timeout (seconds);
    the outcomes in the same order."""
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    start = loop.time()
    outcomes: list[FlushOutcome | None] = [None] * len(conns)
    pending: dict[int, tuple[ExtensionConnection, float, Callable[[], None]]] = {}
    waiter: asyncio.Future[None] | None = None

    def arrived(i: int, ok: bool) -> None:
        if outcomes[i] is not None:
            return
        outcomes[i] = FlushOutcome("ok" if ok else "lost", (time.perf_counter() - t0) * 1000)
        pending.pop(i, None)
        if not pending and waiter is not None and not waiter.done():
            waiter.set_result(None)

    for i, (conn, timeout_s) in enumerate(conns):
        state, target = conn.flush_state()
        if state != "wait":
            outcomes[i] = FlushOutcome(state, 0.0)
            continue
        unwatch = conn.watch_flush(target, lambda ok, i=i: arrived(i, ok))
        if outcomes[i] is None:
            pending[i] = (conn, start + timeout_s, unwatch)

    while pending:
        now = loop.time()
        nearest: float | None = None
        for i, (conn, end, unwatch) in list(pending.items()):
            stall = conn.stall_deadline
            stall_end = end if stall is None else stall
            due = min(end, stall_end)
            if due <= now:
                unwatch()
                del pending[i]
                outcomes[i] = FlushOutcome("stalled" if stall_end < end else "timeout",
                                           (time.perf_counter() - t0) * 1000)
            elif nearest is None or due < nearest:
                nearest = due
        if nearest is None:
            break
        waiter = loop.create_future()
        timer = loop.call_at(nearest, lambda w=waiter: w.done() or w.set_result(None))
        try:
            await waiter
        except asyncio.CancelledError:  # the turn was cancelled: stop watching
            for _, _, unwatch in pending.values():
                unwatch()
            raise
        finally:
            timer.cancel()
    return [o if o is not None else FlushOutcome("lost", 0.0) for o in outcomes]
