"""A token bucket for log lines: what an untrusted party can make the host log is bounded.

One limiter is used for every flood-prone log stream (an extension's stderr/stdout in host.extensions._process,
the HostBridge audit lines in host.extensions._bridge_server). Invariants: at most `burst` lines at once and `rate` lines per
second on average pass; every refused line is counted in `suppressed`, never silently lost — the owner logs one
"N similar lines suppressed" line for them (`take_suppressed`). Constant work per line; no timers, no threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class LineRateLimiter:
    """`rate` lines per second on average, bursts of `burst`; counts the lines it refused."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = burst
        self._refilled = clock()
        self.suppressed = 0  # lines refused since the last take_suppressed()

    def available(self) -> bool:
        """True when a line may be logged now (refills the bucket; does not consume)."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._refilled) * self.rate)
        self._refilled = now
        return self._tokens >= 1

    def take(self) -> None:
        """Consume one line's worth (after `available()` said yes)."""
        self._tokens -= 1

    def allow(self) -> bool:
        """`available()` and `take()` in one; a refused line is counted in `suppressed`."""
        if self.available():
            self.take()
            return True
        self.suppressed += 1
        return False

    def take_suppressed(self) -> int:
        """The count of refused lines since the last call, reset to 0."""
        count, self.suppressed = self.suppressed, 0
        return count
