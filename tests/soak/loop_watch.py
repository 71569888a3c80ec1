"""Where the event loop was when it stalled, and how much of the stall was the machine's: a daemon thread samples the
loop thread's stack while the loop has not run for `threshold_s` (how issue 19's lag spike was found). Samples stay
in memory.

How much was the machine's: Linux counts, per thread, the time it was runnable but waiting for a CPU
(/proc/self/task/TID/schedstat, second field). The watch reads the loop thread's count when the loop last ran and
when the stall ends; the difference is `Stall.waited_ms`, and `Stall.own_ms` = the stall less that wait is the
process's own part: a blocking call, a long callback's CPU, a full GC, waiting for the GIL another thread held. A loop
thread woken in select() with its timers due but given no core (issue 19's loaded runs) has an own part near zero; a
200 ms blocking call on the loop has an own part of 200 ms however loaded the machine is. Without schedstat, a stall
counts as the process's own when the loop thread was found running code (not in select()) in at least half the
samples due while it was watched."""

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
    waited_ms: float | None = None  # runnable but given no CPU during the stall (None: no schedstat here)

    @property
    def running(self) -> bool:
        """The loop thread was found running code in at least half the samples due while the stall was watched."""
        return self.running_samples >= max(1.0, self.sampled_ms / (SAMPLE_S * 1000) / 2)

    @property
    def own_ms(self) -> float:
        """The process's own part of the stall: less the time the loop thread waited for a CPU."""
        if self.waited_ms is None:
            return self.ms if self.running else 0.0
        return max(0.0, self.ms - self.waited_ms)

    def text(self) -> str:
        seen = ("unsampled: GIL held" if not self.running_samples + self.waiting_samples
                else "mostly in select()" if self.waiting_samples > self.running_samples else "in code")
        waited = "" if self.waited_ms is None else f", {self.waited_ms:.0f} ms of it waiting for a CPU"
        return f"{self.ms:.0f} ms at {self.where} ({seen}{waited})"


def _run_delay_ns(native_id: int) -> int | None:
    """The thread's total time runnable but not running (ns), or None where the kernel does not report it."""
    try:
        with open(f"/proc/self/task/{native_id}/schedstat") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class LoopWatch:
    threshold_s: float = 0.1
    stalls: list[Stall] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Watch `loop`; call from its thread."""
        beat = [time.monotonic()]
        loop_thread = threading.get_ident()
        native = threading.get_native_id()

        def tick() -> None:
            beat[0] = time.monotonic()
            if not self._stop.is_set():
                loop.call_later(0.005, tick)

        def watch() -> None:
            seen_beat, ref = beat[0], _run_delay_ns(native)
            while not self._stop.wait(0.005):
                began = beat[0]
                if began != seen_beat:  # the loop ran since the last look: its wait count as of then
                    seen_beat, ref = began, _run_delay_ns(native)
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
                now = _run_delay_ns(native)
                top = max(samples, key=samples.__getitem__) if samples else "(no sample: the thread held the GIL)"
                ms = (beat[0] - began) * 1000
                waited = None if now is None or ref is None else (now - ref) / 1e6
                self.stalls.append(Stall(ms, top, running, waiting, ms - self.threshold_s * 1000, waited))

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
