"""The turn loop's waits (the model call, each chunk of its stream, a step's tools), ended early by the turn's abort
or, for the model's waits, by a stall: no progress for `timeout` seconds (Think's chat-stream watchdog).

One `StallWatch` per turn loop instead of an `asyncio.timeout` per wait: a 3-step turn waits ~20 times (one per
chunk), and each `asyncio.timeout` made a Timeout, a timer handle pushed on the loop's heap and cancelled, and an
enter/exit pair (issue 16 item 2: the host's own work per turn). Here a wait is `arm()` ... `disarm()`: two
attribute writes, plus a mark of the time when the watchdog is on. The watchdog keeps ONE timer per stall window:
when it fires and a wait began since it was set, it is set again for that wait's own deadline (no timer per chunk).

Firing (the stall, or the turn's abort while a wait is armed) cancels the waiting task, as `asyncio.timeout` does;
the wait's `except CancelledError` asks `claim()` whether that cancellation was the watch's (then it is turned into
the stall error or TurnAborted) or someone else's (the caller's: re-raised). Not thread-safe: loop thread only.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

Reason = Literal["stall", "abort"]

_RESOLUTION = time.get_clock_info("monotonic").resolution  # as the loop's own timer check


class StallWatch:
    """Abort and stall watchdog of one turn loop's waits."""

    __slots__ = ("_loop", "_timeout", "_task", "_stall", "_mark", "_handle", "_fired", "_cancelling", "_abort")

    def __init__(self, abort: asyncio.Event, timeout: float | None) -> None:
        self._loop = asyncio.get_running_loop()
        self._timeout = timeout or None
        self._abort = abort
        self._task: asyncio.Task[Any] | None = None  # the task waiting now (None: no wait armed)
        self._stall = False  # whether the armed wait is watched for a stall
        self._mark = 0.0  # loop time the armed stall-watched wait began
        self._handle: asyncio.TimerHandle | None = None
        self._fired: Reason | None = None
        self._cancelling = 0  # the waiting task's cancel requests when the wait was armed

    # ------------------------------------------------------------------ one wait

    def arm(self, stall: bool) -> bool:
        """A wait of the current task begins (`stall`: watched for a stall too). False when the turn is aborted
        already (then don't wait)."""
        if self._abort.is_set():
            return False
        task = self._task = asyncio.current_task()
        self._cancelling = task.cancelling() if task is not None else 0
        self._fired = None
        if stall and self._timeout is not None:
            self._stall = True
            self._mark = self._loop.time()
            if self._handle is None:
                self._handle = self._loop.call_at(self._mark + self._timeout, self._check)
        else:
            self._stall = False
        return True

    def disarm(self) -> Reason | None:
        """The wait ended (normally or not); what fired during it, if anything, and the task's cancel request it
        made withdrawn when the wait did not end with that cancellation (a stream that swallowed it)."""
        fired, self._fired = self._fired, None
        if fired is not None and self._task is not None:
            self._task.uncancel()
        self._task, self._stall = None, False
        return fired

    def claim(self) -> Reason | None:
        """Inside `except CancelledError` of an armed wait: the watch's reason when the cancellation is the watch's
        alone (its cancel request withdrawn: the caller turns it into its error), None when someone else cancelled
        too (re-raise)."""
        fired, task = self._fired, self._task
        if fired is None or task is None:
            return None
        self._fired = None
        return fired if task.uncancel() <= self._cancelling else None

    # ------------------------------------------------------------------ firing

    def on_abort(self, _: Any = None) -> None:
        """The turn's abort (a done callback of the loop's abort waiter): ends the armed wait, if any."""
        if self._task is not None and self._fired is None:
            self._fire("abort")

    def _check(self) -> None:
        self._handle = None
        if self._task is None or not self._stall or self._fired is not None:
            return  # no watched wait now: the next one sets the timer again
        due = self._mark + self._timeout  # type: ignore[operator]
        if due >= self._loop.time() + _RESOLUTION:  # a later wait than the one the timer was set for
            self._handle = self._loop.call_at(due, self._check)
            return
        self._fire("stall")

    def _fire(self, reason: Reason) -> None:
        self._fired = reason
        assert self._task is not None
        self._task.cancel()

    def close(self) -> None:
        """The loop is done: no timer left behind."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._task = None
