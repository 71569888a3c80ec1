"""The restart policy: exponential backoff, capped, quarantine after maxCrashes within the window."""

from __future__ import annotations

from host.extensions._manifest import Restart
from host.extensions._supervisor import CrashPolicy


def test_backoff_doubles_per_crash_and_is_capped() -> None:
    policy = CrashPolicy(Restart(max_crashes=10, window_seconds=60, backoff_ms=100, max_backoff_ms=350))
    delays = [policy.record_crash(now=float(i)) for i in range(5)]
    assert delays == [0.1, 0.2, 0.35, 0.35, 0.35]


def test_quarantine_after_max_crashes_in_window() -> None:
    policy = CrashPolicy(Restart(max_crashes=3, window_seconds=10, backoff_ms=100))
    assert policy.record_crash(now=0.0) is not None
    assert policy.record_crash(now=1.0) is not None
    assert policy.record_crash(now=2.0) is None


def test_crashes_outside_the_window_are_forgotten() -> None:
    policy = CrashPolicy(Restart(max_crashes=3, window_seconds=10, backoff_ms=100))
    policy.record_crash(now=0.0)
    policy.record_crash(now=1.0)
    assert policy.record_crash(now=20.0) == 0.1  # the first two left the window: back to the first delay
    assert policy.total_crashes == 3
