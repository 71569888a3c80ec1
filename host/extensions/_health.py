"""Health probing: notice an extension that is alive but not answering (stopped, deadlocked, spinning).

The exit watcher notices a process that dies; this notices one that doesn't. Every `interval` the probe calls the
standard `grpc.health.v1.Health/Check` on the extension's channel with a short deadline. An answer of any kind
counts as alive — including UNIMPLEMENTED, for extensions (like the Node.js sample) that don't serve the health
service: what matters is that the process answered. After `failures` misses in a row the probe calls
`on_unhealthy` once (the manager then kills the process group and the supervisor restarts it like a crash).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

log = logging.getLogger("hookwire.extensions")

_ALIVE_CODES = {grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.NOT_FOUND}


class HealthProbe:
    """Probe one extension's channel until stopped; report it unhealthy after `failures` misses in a row."""

    def __init__(
        self,
        name: str,
        channel: grpc.aio.Channel,
        *,
        interval_s: float,
        timeout_s: float,
        failures: int,
        on_unhealthy: Callable[[str], None],
    ) -> None:
        self.name = name
        self._stub = health_pb2_grpc.HealthStub(channel)
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._failures = failures
        self._on_unhealthy = on_unhealthy
        self._task: asyncio.Task[None] | None = None
        self.misses = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"hookwire-health-{self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def check_once(self) -> str | None:
        """None when the extension answered; otherwise why not."""
        try:
            reply = await self._stub.Check(health_pb2.HealthCheckRequest(), timeout=self._timeout_s)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in _ALIVE_CODES:
                return None
            return f"{exc.code().name}: {exc.details()}"
        if reply.status == health_pb2.HealthCheckResponse.NOT_SERVING:
            return "reports NOT_SERVING"
        return None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            why = await self.check_once()
            if why is None:
                self.misses = 0
                continue
            self.misses += 1
            log.warning("extension %r: health check failed (%d/%d): %s", self.name, self.misses, self._failures, why)
            if self.misses >= self._failures:
                self._on_unhealthy(f"no answer to {self.misses} health checks in a row (last: {why})")
                return
