"""The soak's lag check (tests/soak/lag_floor.py) still fails for a stall of ours: the floor process is real and runs
beside the loop for the same second; only the soak's turns are left out (the soak itself takes 20 s)."""

from __future__ import annotations

import asyncio
import time

from lag_floor import Floor, LagStats, Verdict, judge, probe
from loop_watch import LoopWatch, Stall


def blocking_call(cpu_s: float) -> None:
    """A stall of ours: a synchronous call on the event loop that computes for `cpu_s` of this thread's CPU."""
    until = time.thread_time() + cpu_s
    while time.thread_time() < until:
        pass


async def measured_second(block_s: float) -> tuple[LagStats, LagStats, Verdict]:
    """One second of this loop's lag beside a floor process, with a blocking call of `block_s` in its middle."""
    floor = Floor()
    floor.start()
    stop = asyncio.Event()
    lags: list[float] = []
    sampling = asyncio.ensure_future(probe(stop, lags))
    watch = LoopWatch()
    watch.start(asyncio.get_running_loop())
    try:
        await asyncio.sleep(0.5)
        if block_s:
            blocking_call(block_s)
        await asyncio.sleep(max(0.0, 0.5 - block_s))
    finally:
        stop.set()
        watch.stop()
        await sampling
        stats = floor.stop()
    host = LagStats.of(lags)
    return host, stats, judge(host, stats, watch.stalls)


async def test_a_200_ms_blocking_call_on_the_loop_fails_the_lag_check_while_the_floor_stays_low() -> None:
    host, floor, verdict = await measured_second(0.2)
    assert host.max_ms >= 185  # the block shows in the host's lag (less the part of a tick it began in) ...
    assert floor.max_ms < host.max_ms, verdict.observed  # ... and not in the floor's
    assert not verdict.ok
    # caught by the watchdog however loaded the machine is: the loop thread itself ran the call's 200 ms of CPU
    assert "a stall of ours: " in verdict.observed and "test_lag_floor.py:" in verdict.observed


async def test_a_loop_that_never_blocks_passes_the_lag_check() -> None:
    host, floor, verdict = await measured_second(0.0)
    assert verdict.ok, verdict.observed
    assert host.n >= 50 and floor.n >= 50  # both sampled the whole second


def test_the_host_lag_of_a_loaded_machine_passes_when_the_floor_saw_the_same_load() -> None:
    # issue 19's failing runs: host max 199 ms under load ~10, the loop thread found in select() with its timers
    # due, runnable but given no CPU for most of the stall
    waiting = Stall(199.0, "python3.11/selectors.py:468 select", waiting_samples=9, sampled_ms=99, waited_ms=181.0,
                    ran_ms=3.0)
    loaded = judge(LagStats(2000, 31.0, 199.0), LagStats(2000, 12.0, 64.0), [waiting])
    quiet = judge(LagStats(2000, 31.0, 199.0), LagStats(2000, 4.0, 9.0), [waiting])
    assert loaded.ok, loaded.observed
    assert not quiet.ok and quiet.observed.endswith("OVER: max 199.0 > 159.0")


def test_a_stall_the_loop_thread_spent_on_a_cpu_fails_however_high_the_floor() -> None:
    # a 400 ms full GC (the GIL held, no sample) while the machine was loaded: 330 ms of it on a CPU
    gc_pause = Stall(400.0, "(no sample: the thread held the GIL)", sampled_ms=300, waited_ms=60.0, ran_ms=330.0)
    verdict = judge(LagStats(2000, 31.0, 400.0), LagStats(2000, 40.0, 260.0), [gc_pause])
    assert not verdict.ok
    assert verdict.observed.endswith("OVER: a stall of ours: 400 ms at (no sample: the thread held the GIL) "
                                     "(unsampled: GIL held; the loop thread ran 330 ms, waited 60 ms for a CPU)")
