"""Supervision of extension processes: the restart policy (exponential backoff, quarantine after repeated
crashes) and the `Supervisor` that watches each process and connection and restarts what broke."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from .._errors import ExtensionStartError
from ._health import HealthProbe
from ._manifest import Restart
from ._observer_ledger import ObserverLedger
from ._trace import Tracer

if TYPE_CHECKING:  # _state imports CrashPolicy from here
    from ._extension_client import ExtensionConnection
    from ._process import ExtensionProcess
    from ._registry import Registry
    from ._state import ExtensionRuntime

log = logging.getLogger("hookwire.extensions")


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


class Supervisor:
    """Watches each started extension and brings it back when it dies or stops answering.

    - exit: the process exited -> `crashed`
    - lost: its connection broke while the process lives (stream reset, reply over the size limit, failed
      health probes) -> `crashed` too, so a repeat offender ends in quarantine
    - crashed: close the connection (its unhandled observations are counted as lost for their turns), reap the
      process group, then restart after the policy's backoff, or quarantine after restart.maxCrashes.
    """

    def __init__(self, registry: Registry, trace: Tracer, ledger: ObserverLedger,
                 start: Callable[[ExtensionRuntime], Awaitable[None]]) -> None:
        self._registry = registry
        self._trace = trace
        self._ledger = ledger
        self._start = start

    def started(self, ext: ExtensionRuntime) -> None:
        """`ext` serves now: probe its health, watch its process."""
        t = ext.manifest.timeouts
        if ext.conn is not None and ext.proc is not None and t.health_interval_ms > 0:
            ext.health = HealthProbe(
                ext.name, ext.conn.channel, interval_s=t.health_interval_ms / 1000,
                timeout_s=t.health_timeout_ms / 1000, failures=t.health_failures,
                on_unhealthy=lambda why: self.connection_lost(ext, why),
            )
            ext.health.start()
        if ext.proc is not None:
            ext.watcher = asyncio.ensure_future(self._watch(ext, ext.proc))

    async def release(self, ext: ExtensionRuntime) -> None:
        """Stop supervising `ext` (it is being stopped): health probe, watcher, restart and lost handlers."""
        await self._stop_health(ext)
        for task in (ext.restarter, ext.watcher, ext.lost_task):
            if task is not None and not task.done() and task is not asyncio.current_task():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    @staticmethod
    async def _stop_health(ext: ExtensionRuntime) -> None:
        probe, ext.health = ext.health, None
        if probe is not None:
            await probe.stop()

    async def _watch(self, ext: ExtensionRuntime, proc: ExtensionProcess) -> None:
        code = await proc.wait()
        if ext.stopping or ext.proc is not proc or self._registry.closed or proc.crash_handled:
            return
        proc.crash_handled = True
        await self.crashed(ext, f"exited with code {code}", proc.stderr_tail())

    def connection_lost(self, ext: ExtensionRuntime, why: str) -> None:
        """The connection of a running extension broke (stream closed or reset, a reply over the size limit)."""
        if ext.stopping or self._registry.closed or ext.state != "running":
            return
        if ext.lost_task is None or ext.lost_task.done():
            ext.lost_task = asyncio.ensure_future(self._lost(ext, ext.conn, why))

    async def _lost(self, ext: ExtensionRuntime, conn: ExtensionConnection | None, why: str) -> None:
        proc = ext.proc
        if proc is not None:  # an exiting process breaks its connection first: let the exit watcher report it
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 0.5)
            if proc.returncode is not None or proc.crash_handled:
                return
            proc.crash_handled = True
        if ext.conn is not conn or ext.stopping or self._registry.closed:
            return
        # The process lives but can't be talked to: restart it (counted like a crash).
        await self.crashed(ext, f"broke its connection ({why})", proc.stderr_tail() if proc else [])

    async def crashed(self, ext: ExtensionRuntime, why: str, tail: list[str]) -> None:
        # The state and the connection change together, before any await: a call made meanwhile is told
        # "restarting", never "running" with no connection (issue 19 item 7).
        conn, ext.conn = ext.conn, None
        if ext.state == "running":
            ext.state = "restarting"
            self._registry.changed()
        await self._stop_health(ext)
        if conn is not None:
            ext.dropped_base += conn.dropped
            await conn.close()
            self._ledger.add_lost(ext.name, conn.lost)  # reported by each turn's flush
            conn.lost = {}
        if ext.proc is not None:
            await ext.proc.terminate(0)  # reap what is left of the process group
        delay = ext.policy.record_crash()
        tail_text = ("; last stderr lines: " + " | ".join(tail[-5:])) if tail else ""
        if delay is None:
            ext.state = "quarantined"
            self._registry.changed()
            log.error(
                "extension %r %s; quarantined after %d crashes within %gs (restart.maxCrashes)%s",
                ext.name, why, ext.manifest.restart.max_crashes, ext.manifest.restart.window_seconds, tail_text,
            )
            self._trace("lifecycle", ext.name, "error", detail=f"{why}; quarantined")  # no turn's event
            return
        ext.state = "restarting"
        self._registry.changed()
        log.warning("extension %r %s; restarting in %.0f ms%s", ext.name, why, delay * 1000, tail_text)
        self._trace("lifecycle", ext.name, "error", detail=f"{why}; restarting")
        ext.restarter = asyncio.ensure_future(self._restart_later(ext, delay))

    async def _restart_later(self, ext: ExtensionRuntime, delay: float) -> None:
        await asyncio.sleep(delay)
        if ext.stopping or self._registry.closed:
            return
        try:
            await self._start(ext)
        except ExtensionStartError as exc:
            ext.proc = None
            await self.crashed(ext, f"failed to restart: {exc}", [])
            return
        ext.restarts += 1
        log.info("extension %r restarted (pid %s)", ext.name, ext.proc.pid if ext.proc else "-")
