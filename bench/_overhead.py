"""Per-turn overhead of a manager's extensions, measured so that it holds still: turns with and without the
extensions interleaved one by one (A B B A ...), many of them, the figure a median over all and its spread the
min..max of the per-round figures; and a CPU hog process to measure the same under load.

Used by bench/turn_overhead.py and bench/ext_count.py.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from host import ExtensionManager

from ._agents import timed_turn
from ._common import gc_paused, median, rnd


@dataclass(frozen=True)
class Overhead:
    """Milliseconds a turn takes with the extensions over without them (medians over every turn), the same figure
    per round (its min and max: the spread), and the two medians it is the difference of."""

    ms: float
    round_min_ms: float
    round_max_ms: float
    base_ms: float
    subject_ms: float

    @property
    def ratio(self) -> float:
        return self.subject_ms / self.base_ms

    def spread(self) -> list[float]:
        return [rnd(self.round_min_ms, 2), rnd(self.round_max_ms, 2)]


async def turn_overhead(mgr: ExtensionManager, message: str, rounds: int, pairs_per_round: int) -> Overhead:
    """Interleave turns without (A) and with (B) `mgr`'s extensions, A B B A A B ...: `rounds` rounds of
    `pairs_per_round` pairs, the cyclic GC paused within a round (collected before each, for both sides)."""
    await timed_turn(None, message)  # warm both paths
    await timed_turn(mgr, message)
    all_a: list[float] = []
    all_b: list[float] = []
    per_round: list[float] = []
    flip = False
    for _ in range(rounds):
        ra: list[float] = []
        rb: list[float] = []
        with gc_paused():
            for _ in range(pairs_per_round):
                if flip:
                    rb.append(await timed_turn(mgr, message))
                    ra.append(await timed_turn(None, message))
                else:
                    ra.append(await timed_turn(None, message))
                    rb.append(await timed_turn(mgr, message))
                flip = not flip
        per_round.append((median(rb) - median(ra)) * 1000)
        all_a.extend(ra)
        all_b.extend(rb)
    base, subject = median(all_a), median(all_b)
    return Overhead(ms=(subject - base) * 1000, round_min_ms=min(per_round), round_max_ms=max(per_round),
                    base_ms=base * 1000, subject_ms=subject * 1000)


@contextlib.contextmanager
def cpu_hog() -> Iterator[int]:
    """A process spinning on one core beside the measurement (its pid); killed at the end."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def load_avg() -> float:
    """The 1-minute load average (reported beside every figure)."""
    return rnd(os.getloadavg()[0], 2)
