"""Where the event loop was when it stalled: a daemon thread samples the loop thread's stack while the loop has not
run for `threshold_s` (how issue 19's lag spike was found). Samples stay in memory (no file, no fd)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field


@dataclass
class Stall:
    ms: float
    where: str  # the deepest frame of ours (host/, extension_sdk/) in the most frequent sample, else the deepest


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
                while beat[0] == began and not self._stop.is_set():
                    frame = sys._current_frames().get(loop_thread)
                    if frame is not None:
                        where = _where(traceback.extract_stack(frame, limit=40))
                        samples[where] = samples.get(where, 0) + 1
                    time.sleep(0.01)
                top = max(samples, key=samples.__getitem__) if samples else "(no sample: the thread held the GIL)"
                self.stalls.append(Stall((beat[0] - began) * 1000, top))

        loop.call_soon(tick)
        threading.Thread(target=watch, name="hookwire-loop-watch", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def worst(self) -> Stall | None:
        return max(self.stalls, key=lambda s: s.ms, default=None)


def _where(stack: traceback.StackSummary) -> str:
    ours = [f for f in stack if "/host/" in f.filename or "/extension_sdk/" in f.filename]
    frame = (ours or list(stack))[-1]
    return f"{frame.filename.rsplit('/', 2)[-2]}/{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} {frame.name}"
