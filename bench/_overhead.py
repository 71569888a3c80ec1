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

from ._agents import measured_turn, timed_turn
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
    host_cpu_ms: float  # the host's CPU per turn with the extensions over without (medians)
    ext_cpu_ms: float  # the extensions' CPU per turn (mean: /proc counts it in clock ticks)

    @property
    def ratio(self) -> float:
        return self.subject_ms / self.base_ms

    def spread(self) -> list[float]:
        return [rnd(self.round_min_ms, 2), rnd(self.round_max_ms, 2)]


async def turn_overhead(mgr: ExtensionManager, message: str, rounds: int, pairs_per_round: int, *,
                        warm: bool = True) -> Overhead:
    """Interleave turns without (A) and with (B) `mgr`'s extensions, A B B A A B ...: `rounds` rounds of
    `pairs_per_round` pairs, the cyclic GC paused within a round (collected before each, for both sides).
    `warm`: one turn of each first, not measured."""
    if warm:
        await timed_turn(None, message)
        await timed_turn(mgr, message)
    all_a: list[tuple[float, float, float]] = []
    all_b: list[tuple[float, float, float]] = []
    per_round: list[float] = []
    flip = False
    for _ in range(rounds):
        ra: list[tuple[float, float, float]] = []
        rb: list[tuple[float, float, float]] = []
        with gc_paused():
            for _ in range(pairs_per_round):
                if flip:
                    rb.append(await measured_turn(mgr, message))
                    ra.append(await measured_turn(None, message))
                else:
                    ra.append(await measured_turn(None, message))
                    rb.append(await measured_turn(mgr, message))
                flip = not flip
        per_round.append((median([t[0] for t in rb]) - median([t[0] for t in ra])) * 1000)
        all_a.extend(ra)
        all_b.extend(rb)
    base, subject = median([t[0] for t in all_a]), median([t[0] for t in all_b])
    host_cpu = median([t[1] for t in all_b]) - median([t[1] for t in all_a])
    ext_cpu = sum(t[2] for t in all_b) / len(all_b)
    return Overhead(ms=(subject - base) * 1000, round_min_ms=min(per_round), round_max_ms=max(per_round),
                    base_ms=base * 1000, subject_ms=subject * 1000, host_cpu_ms=host_cpu * 1000,
                    ext_cpu_ms=ext_cpu * 1000)


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
