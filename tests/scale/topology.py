"""The miniature topology driver: host replicas as processes (fixtures/host_worker.py), clients that send each
session's turns one after another to any live host, and an optional SIGKILL of one host mid-run.

A client whose host dies before answering sends the same turn (the same durable submission id) to another live host.
Used by test_topology.py and by the bench entry (bench/scale_topology.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

WORKER = Path(__file__).parent / "fixtures" / "host_worker.py"
REPO = Path(__file__).resolve().parents[2]


@dataclass
class Outcome:
    session: str
    k: int
    status: str
    request_id: str
    latency_ms: float
    host: int
    retries: int


@dataclass
class Run:
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    killed: int | None = None
    killed_at_turns: int = 0

    @property
    def turns_per_s(self) -> float:
        return len(self.outcomes) / self.seconds if self.seconds else 0.0

    def p(self, q: float) -> float:
        values = sorted(o.latency_ms for o in self.outcomes)
        if not values:
            return 0.0
        return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


class Host:
    def __init__(self, index: int, proc: asyncio.subprocess.Process) -> None:
        self.index = index
        self.proc = proc
        self.waiting: dict[tuple[str, str], asyncio.Future[list[str]]] = {}
        self.alive = True
        self.reader: asyncio.Task[None] | None = None

    async def read(self) -> None:
        assert self.proc.stdout is not None
        while line := (await self.proc.stdout.readline()).decode():
            parts = line.split()
            if len(parts) >= 6 and parts[0] == "done":
                fut = self.waiting.pop((parts[1], parts[2]), None)
                if fut is not None and not fut.done():
                    fut.set_result(parts)
        self.alive = False
        for fut in self.waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"host {self.index} died"))
        self.waiting.clear()

    async def turn(self, session: str, k: int, text: str) -> list[str]:
        if not self.alive:
            raise ConnectionError(f"host {self.index} is dead")
        fut: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        self.waiting[(session, str(k))] = fut
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"turn {session} {k} {text}\n".encode())
        await self.proc.stdin.drain()
        return await fut


async def start_hosts(n: int, store: str, manifest: Path, log_dir: Path) -> list[Host]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    hosts = []
    for i in range(n):
        log = open(log_dir / f"host-{i}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(WORKER), store, str(manifest), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=log, env=env, cwd=str(log_dir))
        hosts.append(Host(i, proc))
    for host in hosts:
        assert host.proc.stdout is not None
        line = await asyncio.wait_for(host.proc.stdout.readline(), 120)
        if line.strip() != b"ready":
            raise RuntimeError(f"host {host.index} did not start: {line!r}; see {log_dir}/host-{host.index}.log")
        host.reader = asyncio.ensure_future(host.read())
    return hosts


async def stop_hosts(hosts: list[Host]) -> None:
    for host in hosts:
        if host.proc.returncode is None and host.proc.stdin is not None:
            host.proc.stdin.close()
    for host in hosts:
        try:
            await asyncio.wait_for(host.proc.wait(), 30)
        except TimeoutError:
            host.proc.kill()
            await host.proc.wait()
        if host.reader is not None:
            await asyncio.gather(host.reader, return_exceptions=True)


def text_of(session: str, k: int) -> str:
    return f"{session}-t{k}"


async def drive(hosts: list[Host], *, sessions: int, turns: int, kill: int | None = None,
                kill_after: int = 0) -> Run:
    """Each session's turns in order, spread over the live hosts; SIGKILL host `kill` after `kill_after` turns."""
    run = Run()
    done = 0
    t0 = time.perf_counter()

    async def client(s: int) -> None:
        nonlocal done
        session = f"sess{s:03d}"
        for k in range(turns):
            retries = 0
            attempt = s + k
            started = time.perf_counter()  # latency as the client sees it, retries included
            while True:
                live = [h for h in hosts if h.alive]
                host = live[attempt % len(live)]
                try:
                    parts = await host.turn(session, k, text_of(session, k))
                except ConnectionError:
                    retries += 1
                    attempt += 1
                    continue
                run.outcomes.append(Outcome(session, k, parts[3], parts[4], (time.perf_counter() - started) * 1000,
                                            host.index, retries))
                done += 1
                if kill is not None and run.killed is None and done >= kill_after:
                    run.killed, run.killed_at_turns = kill, done
                    hosts[kill].proc.send_signal(signal.SIGKILL)
                    hosts[kill].alive = False  # no new turns to it; those in flight fail when its pipe closes
                break

    await asyncio.gather(*(client(s) for s in range(sessions)))
    run.seconds = time.perf_counter() - t0
    return run
