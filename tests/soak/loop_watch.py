"""Where the event loop was when it stalled, and what the loop thread did meanwhile: a daemon thread samples the loop
thread's stack while the loop has not run for `threshold_s` (how issue 19's lag spike was found). Samples stay in
memory.

What the loop thread did: Linux counts, per thread, its time on a CPU and its time runnable but waiting for one
(/proc/self/task/TID/schedstat). The watch reads the loop thread's counts when the loop last ran and when the stall
ends: `Stall.cpu_ms` is what the loop thread itself ran during the stall (a full GC, a CPU-bound callback: the
process's own, however loaded the machine is), `Stall.waited_ms` its wait for a CPU (the machine's). The rest of a
stall is the thread blocked: in a blocking call, or waiting for the GIL another thread held (possibly itself waiting
for a CPU); the soak leaves that part to the lag floor (lag_floor.py). Without schedstat, `cpu_ms` is the whole stall
when the loop thread was found running code (not in select()) in at least half the samples due while it was
watched, else 0."""

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
    ran_ms: float | None = None  # on a CPU during the stall

    @property
    def running(self) -> bool:
        """The loop thread was found running code in at least half the samples due while the stall was watched."""
        return self.running_samples >= max(1.0, self.sampled_ms / (SAMPLE_S * 1000) / 2)

    @property
    def cpu_ms(self) -> float:
        """What the loop thread itself ran during the stall (see the module doc without schedstat)."""
        if self.ran_ms is None:
            return self.ms if self.running else 0.0
        return self.ran_ms

    def text(self) -> str:
        seen = ("unsampled: GIL held" if not self.running_samples + self.waiting_samples
                else "mostly in select()" if self.waiting_samples > self.running_samples else "in code")
        spent = ("" if self.ran_ms is None or self.waited_ms is None
                 else f"; the loop thread ran {self.ran_ms:.0f} ms, waited {self.waited_ms:.0f} ms for a CPU")
        return f"{self.ms:.0f} ms at {self.where} ({seen}{spent})"


def _schedstat(native_id: int) -> tuple[int, int] | None:
    """The thread's total time on a CPU and runnable but not running (ns), or None where the kernel does not say."""
    try:
        with open(f"/proc/self/task/{native_id}/schedstat") as f:
            ran, waited = f.read().split()[:2]
        return int(ran), int(waited)
    except (OSError, ValueError):
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
            seen_beat, ref = beat[0], _schedstat(native)
            while not self._stop.wait(0.005):
                began = beat[0]
                if began != seen_beat:  # the loop ran since the last look: its wait count as of then
                    seen_beat, ref = began, _schedstat(native)
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
                now = _schedstat(native)
                top = max(samples, key=samples.__getitem__) if samples else "(no sample: the thread held the GIL)"
                ms = (beat[0] - began) * 1000
                ran, waited = (None, None) if now is None or ref is None else (
                    (now[0] - ref[0]) / 1e6, (now[1] - ref[1]) / 1e6)
                self.stalls.append(Stall(ms, top, running, waiting, ms - self.threshold_s * 1000, waited, ran))

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
