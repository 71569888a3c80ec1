"""Shared helpers for the benchmarks: sizes, statistics, fixture manifests, goals, baseline servers."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from host import Manifest, parse_manifest  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
EXT_DIR = BENCH_DIR / "extensions"
ALL_HOOKS = ("beforeTurn", "beforeToolCall", "afterToolCall", "onStepFinish", "onChunk")
SandboxMode = Literal["off", "auto", "required"]


@dataclass(frozen=True)
class Config:
    """How big each benchmark is. `quick` shrinks everything so the whole run stays well under a minute."""

    quick: bool = False
    sandbox: SandboxMode = "auto"  # ExtensionManager()'s default; recorded in the results
    rounds: int = 0  # ABAB rounds per comparison; 0: the default for the mode

    def n(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    @property
    def ab_rounds(self) -> int:
        return self.rounds or (2 if self.quick else 6)


@dataclass
class Goal:
    """A goal for one key: `op` is "<=" or ">=" (or "info" for a figure without a goal)."""

    op: Literal["<=", ">=", "info"]
    value: float | None = None
    text: str = ""

    def met(self, measured: Any) -> bool | None:
        if self.op == "info" or self.value is None or not isinstance(measured, (int, float)):
            return None
        return measured <= self.value if self.op == "<=" else measured >= self.value

    def describe(self) -> str:
        if self.text:
            return self.text
        return "" if self.op == "info" else f"{self.op} {self.value:g}"


GOALS: dict[str, Goal] = {
    "hook_rtt_p50_us": Goal("info"),
    "hook_rtt_p99_us": Goal("info"),
    "echo_rtt_p50_us": Goal("info"),
    "hook_vs_echo_ratio": Goal("<=", 1.0),
    "stream_floor_rtt_p50_us": Goal("info"),
    "hook_vs_stream_floor_ratio": Goal("<=", 1.3),
    "chunks_per_s_1ext": Goal(">=", 50_000),
    "chunks_per_s_5ext": Goal("info"),
    "host_cpu_us_per_chunk_per_ext": Goal("<=", 10.0),
    "streamed_turn_ratio_3ext": Goal("<=", 1.10),
    "tool_rtt_p50_us": Goal("info"),
    "mcp_tool_rtt_p50_us": Goal("info"),
    "tool_vs_mcp_ratio": Goal("<=", 0.5),
    "cold_start_p50_ms": Goal("<=", 150),
    "cold_start_5_parallel_ms": Goal("<=", 400),
    "idle_rss_mb": Goal("<=", 45),
    "turn_overhead_ms_5ext": Goal("<=", 10),
    "turn_overhead_ratio_5ext": Goal("info"),
    "turn_overhead_ms_5ext_loaded": Goal("<=", 15),
    "concurrent_turns_per_s": Goal(">=", 40),
    "concurrent_turn_p99_ms": Goal("<=", 1500),
    "concurrent_litellm_floor_turns_per_s": Goal("info", text="the floor: litellm alone, 50 at once"),
    "concurrent_turns_vs_litellm_floor": Goal("info", text="3 extensions; the 0-extension twin in extra"),
    "overhead_ms_by_ext_count": Goal("info", text="sub-linear in observe-only extensions"),
    "overhead_ms_by_ext_count_before_turn": Goal("info", text="linear (sequential by contract)"),
    "egress_proxy_overhead_ms": Goal("info"),
    "egress_proxy_ratio": Goal("info"),
    "topology_turns_per_s": Goal("info"),
    "topology_turn_p99_ms": Goal("info"),
    "single_sqlite_turns_per_s": Goal("info"),
    "single_sqlite_turn_p99_ms": Goal("info"),
    "host_ms_per_turn_10_msgs": Goal("info"),
    "host_ms_per_turn_500_msgs": Goal("info", text="~ the 10-message figure"),
    "loop_lag_p99_ms": Goal("info"),
    "loop_lag_max_ms": Goal("<=", 150),
    "journal_us_per_entry": Goal("<=", 200),
    "journal_turn_ratio_5ext_deciders": Goal("<=", 1.05),
    # issue 16 §2: a turn against the bare litellm calls it makes (bench/litellm_floor.py)
    "turn_vs_litellm_ratio": Goal("<=", 1.15),
    "litellm_call_cpu_ms": Goal("info"),
    "otel_off_overhead_pct": Goal("<=", 3.0, text="<= 3 % (within noise)"),
    "otel_on_overhead_pct": Goal("info"),
    "cli_run_cold_ms": Goal("info", text="<= 1.3 x import_litellm_ms"),
    "import_litellm_ms": Goal("info"),
    "cli_run_cold_ratio": Goal("<=", 1.3),
    "first_turn_loop_lag_ms": Goal("info"),
    "first_turn_loop_lag_ms_preloaded": Goal("<=", 50),
}


# -- statistics ----------------------------------------------------------------------------------


def pct(samples: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def rnd(value: float, digits: int = 2) -> float:
    return round(float(value), digits)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collect first, then keep the cyclic GC out of a timed block (both sides of a comparison get this)."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


async def abab(rounds: int, a: Callable[[], Awaitable[Any]], b: Callable[[], Awaitable[Any]]) -> tuple[list[Any], list[Any]]:
    """Run baseline `a` and subject `b` alternately (A B B A A B ...) so machine noise hits both."""
    ra: list[Any] = []
    rb: list[Any] = []
    for i in range(rounds):
        order = (a, b) if i % 2 == 0 else (b, a)
        for fn in order:
            value = await fn()
            (ra if fn is a else rb).append(value)
    return ra, rb


@contextlib.asynccontextmanager
async def timer_lateness(tick_s: float = 0.005) -> AsyncIterator[list[float]]:
    """How late (seconds, each >= 0) a `tick_s` timer fired on this loop, again and again, while the block ran: the
    event loop's lag as any other task on it sees it."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []

    async def ticker() -> None:
        while True:
            t0 = loop.time()
            await asyncio.sleep(tick_s)
            lags.append(max(0.0, loop.time() - t0 - tick_s))

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # the ticker's first timer is set
    try:
        yield lags
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def time_calls(n: int, call: Callable[[], Awaitable[Any]]) -> list[float]:
    """Latency of `n` sequential awaited calls, in microseconds."""
    out: list[float] = []
    perf = time.perf_counter_ns
    with gc_paused():
        for _ in range(n):
            t0 = perf()
            await call()
            out.append((perf() - t0) / 1000)
    return out


# -- fixtures --------------------------------------------------------------------------------------


def bench_manifest(name: str, hooks: Sequence[str] = (), *, tool: bool = False, decisions: bool = False,
                   permissions: dict[str, str] | None = None) -> Manifest:
    """A manifest for bench/extensions/bench_ext.py serving no-op `hooks` (and the `add` tool); `permissions`: its
    grants (a bridge grant makes the host offer the HostBridge on the extension's Connect stream)."""
    data: dict[str, Any] = {
        "name": name,
        "version": "0.1.0",
        "command": ["python", str(EXT_DIR / "bench_ext.py"), "--name", name, "--hooks", ",".join(hooks)]
        + (["--tool"] if tool else []),
        "cwd": str(REPO_ROOT),
        "timeouts": {"startMs": 30_000},
    }
    if decisions:
        data["hooks"] = {"beforeToolCall": {"decisions": True}}
    if permissions:
        data["permissions"] = permissions
    return parse_manifest(data, source=f"<bench manifest {name}>")


@contextlib.contextmanager
def workdir(prefix: str = "hwb-") -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=prefix, dir="/tmp") as tmp:
        yield Path(tmp)


@contextlib.asynccontextmanager
async def line_server(argv: list[str], expect_prefix: str, timeout_s: float = 30.0) -> AsyncIterator[str]:
    """Start a baseline server process, wait for its ready line (returned), stop it by closing stdin."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=str(REPO_ROOT)
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), timeout_s)).decode().strip()
        if not line.startswith(expect_prefix):
            raise RuntimeError(f"baseline server {argv[1:]} printed {line!r}, expected {expect_prefix!r}...")
        yield line
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def python_argv(script: Path, *args: str) -> list[str]:
    return [sys.executable, str(script), *args]


def rss_mb(pid: int) -> float:
    """VmRSS of a process from /proc/<pid>/status, in MB (MiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants (from /proc/<pid>/task/*/children), parents first."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        out.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            todo.extend(int(c) for c in task.read_text().split())
    return out


def extension_rss_mb(pid: int) -> float:
    """VmRSS of the extension itself: the deepest process under the pid the host sees (for a launcher-started command
    the sandbox puts a waiter and a pid-1 init above it; a zygote-forked Python extension is the pid itself)."""
    return rss_mb(process_tree(pid)[-1])


def tree_pss_mb(pid: int) -> float:
    """Proportional set size of the whole process tree (shared pages divided among sharers), in MB (MiB)."""
    total_kb = 0
    for member in process_tree(pid):
        for line in Path(f"/proc/{member}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                total_kb += int(line.split()[1])
    return total_kb / 1024


def proc_cpu_s(pid: int) -> float:
    """CPU seconds a process has used so far: its live threads' time on the CPU in nanoseconds
    (/proc/<pid>/task/*/schedstat), else user + system from /proc/<pid>/stat — whose clock ticks (10 ms) are coarser
    than what a benchmark block costs an extension (a 2,000-chunk turn's onChunk: ~20 ms a process). A thread that
    ended in between takes its time with it from the first figure; the extensions' threads live as long as they do."""
    total, found = 0, False
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
            found = True
        except (OSError, ValueError, IndexError):  # the thread ended meanwhile
            continue
    if found:
        return total / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ext_cpu_s(infos: Sequence[Any]) -> float:
    """Total CPU seconds used so far by the processes of these ExtensionInfos (each one's whole tree: in the sandbox
    the pid the host sees is a waiter above the extension)."""
    return sum(proc_cpu_s(p) for i in infos if i.pid is not None for p in process_tree(i.pid))


@dataclass
class Section:
    """What one benchmark returns: its keys, plus notes (free text) and extra figures not in the key set."""

    values: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
