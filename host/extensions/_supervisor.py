"""Restart policy for supervised extensions: exponential backoff, quarantine after repeated crashes."""

from __future__ import annotations

import time
from collections import deque

from ._manifest import Restart


class CrashPolicy:
    """Counts crashes in a sliding window (manifest `restart`).

    `record_crash()` returns the delay before the next restart in seconds, or None when the extension
    crashed `maxCrashes` times within `windowSeconds` and must be quarantined.
    """

    def __init__(self, restart: Restart) -> None:
        self._restart = restart
        self._crashes: deque[float] = deque()
        self.total_crashes = 0

    def _prune(self, now: float) -> None:
        horizon = now - self._restart.window_seconds
        while self._crashes and self._crashes[0] < horizon:
            self._crashes.popleft()

    def record_crash(self, now: float | None = None) -> float | None:
        now = time.monotonic() if now is None else now
        self._crashes.append(now)
        self.total_crashes += 1
        self._prune(now)
        n = len(self._crashes)
        if n >= self._restart.max_crashes:
            return None
        delay_ms = min(self._restart.backoff_ms * (2 ** (n - 1)), self._restart.max_backoff_ms)
        return delay_ms / 1000.0

    @property
    def crashes_in_window(self) -> int:
        self._prune(time.monotonic())
        return len(self._crashes)
