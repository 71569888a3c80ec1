"""Where the event loop was when it stalled: a daemon thread samples the loop thread's stack while the loop has not
run for `threshold_s` (how issue 19's lag spike was found). Samples stay in memory (no file, no fd).

A stall is the process's own (`Stall.running`) when the loop thread was seen running code (not waiting in the
selector's select()) in at least half the samples due while it was watched (one per SAMPLE_S). Waiting in select() with a timer due means
the thread was not given a core (the machine); a thread holding the GIL throughout (a long C call such as a full
GC, or a thread descheduled while holding it) cannot be sampled and is left to the lag floor (lag_floor.py)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field


SAMPLE_S = 0.01


@dataclass
class Stall:
    ms: float
    where: str  # the deepest frame of ours (host/, extension_sdk/) in the most frequent sample, else the deepest
    running_samples: int = 0  # samples that found the loop thread running code (not waiting in select())
    waiting_samples: int = 0  # samples that found it in select()
    sampled_ms: float = 0.0  # the part of the stall the watch sampled (it starts once the stall passes the threshold)

    @property
    def running(self) -> bool:
        """The loop thread was found running code in at least half the samples due while the stall was watched: the
        process's own stall, not the machine's (a thread descheduled while holding the GIL yields a sample or two)."""
        return self.running_samples >= max(1.0, self.sampled_ms / (SAMPLE_S * 1000) / 2)

    def text(self) -> str:
        how = ("running code" if self.running else "mostly waiting in select()" if self.waiting_samples
               else "unsampled" if not self.running_samples else "running code for part of it")
        return f"{self.ms:.0f} ms at {self.where} ({how})"


@dataclass
class LoopWatch:
    threshold_s: float = 0.1
    stalls: list[Stall] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        beat = [time.monotonic()]
        loop_thread = threading.get_ident()

        def tick() -> None:
            beat[0] = time.monotonic()
            if not self._stop.is_set():
                loop.call_later(0.005, tick)

        def watch() -> None:
            while not self._stop.wait(0.005):
                began = beat[0]
                if time.monotonic() - began <= self.threshold_s:
                    continue
                samples: dict[str, int] = {}
                running = waiting = 0
                while beat[0] == began and not self._stop.is_set():
                    frame = sys._current_frames().get(loop_thread)
                    if frame is not None:
                        stack = traceback.extract_stack(frame, limit=40)
                        where = _where(stack)
                        samples[where] = samples.get(where, 0) + 1
                        idle = _waiting(stack)
                        running += not idle
                        waiting += idle
                    time.sleep(SAMPLE_S)
                top = max(samples, key=samples.__getitem__) if samples else "(no sample: the thread held the GIL)"
                ms = (beat[0] - began) * 1000
                self.stalls.append(Stall(ms, top, running, waiting, ms - self.threshold_s * 1000))

        loop.call_soon(tick)
        threading.Thread(target=watch, name="hookwire-loop-watch", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def worst(self) -> Stall | None:
        return max(self.stalls, key=lambda s: s.ms, default=None)


def _waiting(stack: traceback.StackSummary) -> bool:
    """The loop thread is in the selector's select(): waiting for I/O or a timer, running nothing."""
    return bool(stack) and stack[-1].filename.endswith("selectors.py") and stack[-1].name == "select"


def _where(stack: traceback.StackSummary) -> str:
    ours = [f for f in stack if "/host/" in f.filename or "/extension_sdk/" in f.filename]
    frame = (ours or list(stack))[-1]
    return f"{frame.filename.rsplit('/', 2)[-2]}/{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} {frame.name}"
