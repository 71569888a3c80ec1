"""Cold start: spawn to ready (`load()` returns: handshake + Describe + Connect stream open), for one extension
and for five in parallel (`load_all`), with the default sandbox mode and, alternated, with sandbox "off"
(extra figures). Idle RSS: VmRSS of a loaded extension process
(the deepest process of its tree: a zygote-forked Python extension is pid 1 itself; launcher-started commands get
a waiter and a pid-1 init above it) after it settles; extra: the PSS of
the whole tree, which counts the sandbox's own processes.
Also: the import cost of the extension process (`import extension_sdk` over a bare interpreter), and the CPU one
start costs (extra `cold_start_cpu_ms_per_start*`): the host's own CPU during `load_all` of five, plus everything
the zygote and its children (the extensions, and their spares) used from clone to exit, per extension. On a shared, loaded
machine wall times swing with the neighbours' load; CPU per start does much less.
"""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import time

from host import ExtensionManager

from ._common import ALL_HOOKS, REPO_ROOT, Config, Section, abab, bench_manifest, extension_rss_mb, median, process_tree, rnd, tree_pss_mb

NAME = "cold_start"


async def _one(mgr: ExtensionManager, tag: str) -> float:
    t0 = time.perf_counter()
    await mgr.load(bench_manifest(tag, ALL_HOOKS, tool=True))
    ms = (time.perf_counter() - t0) * 1000
    await mgr.unload(tag)
    return ms


_CPU: dict[int, list[float]] = {}  # id(manager) -> CPU ms per start, one entry per `_five`


def _tree_cpu_ms(mgr: ExtensionManager) -> float:
    """CPU of the manager's zygote and of its children it has reaped (utime, stime, cutime, cstime)."""
    zygote = getattr(getattr(mgr, "_launcher", None), "zygote", None)
    pid = zygote.pid if zygote is not None else None
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) * 1000 / os.sysconf("SC_CLK_TCK")


def _host_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1000


async def _five(mgr: ExtensionManager, tag: str) -> float:
    names = [f"{tag}{i}" for i in range(5)]
    host0, tree0 = _host_cpu_ms(), _tree_cpu_ms(mgr)
    t0 = time.perf_counter()
    await mgr.load_all([bench_manifest(n, ALL_HOOKS, tool=True) for n in names])
    ms = (time.perf_counter() - t0) * 1000
    host = _host_cpu_ms() - host0
    await asyncio.gather(*(mgr.unload(n) for n in names))
    await asyncio.sleep(0.02)  # the zygote reaps the last exits
    _CPU.setdefault(id(mgr), []).append((host + _tree_cpu_ms(mgr) - tree0) / 5)
    return ms


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _import_ms(code: str, runs: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=str(REPO_ROOT))
        samples.append((time.perf_counter() - t0) * 1000)
    return median(samples)


async def run(cfg: Config) -> Section:
    singles = cfg.n(5, 2)
    fives = cfg.n(2, 1)
    out = Section()
    async with ExtensionManager(sandbox=cfg.sandbox) as mgr, ExtensionManager(sandbox="off") as off:
        await _one(mgr, "warm")  # first load pays the sandbox probe and page cache; not counted
        await _one(off, "warm")

        async def a() -> list[float]:
            return [await _one(off, "coldoff") for _ in range(singles)]

        async def b() -> list[float]:
            return [await _one(mgr, "cold") for _ in range(singles)]

        ra, rb = await abab(cfg.ab_rounds, a, b)

        async def a5() -> list[float]:
            return [await _five(off, "fiveoff") for _ in range(fives)]

        async def b5() -> list[float]:
            return [await _five(mgr, "five") for _ in range(fives)]

        ra5, rb5 = await abab(cfg.ab_rounds, a5, b5)

        info = await mgr.load(bench_manifest("idle", ALL_HOOKS, tool=True))
        await asyncio.sleep(0.5 if cfg.quick else 1.5)
        assert info.pid is not None
        idle = extension_rss_mb(info.pid)
        idle_tree = tree_pss_mb(info.pid)
        tree_size = len(process_tree(info.pid))
        layers = info.sandbox
        info_off = await off.load(bench_manifest("idleoff", ALL_HOOKS, tool=True))
        await asyncio.sleep(0.5 if cfg.quick else 1.5)
        assert info_off.pid is not None
        idle_off = extension_rss_mb(info_off.pid)
    runs = cfg.n(5, 2)
    bare = _import_ms("pass", runs)
    sdk = _import_ms("import extension_sdk", runs)
    grpc_only = _import_ms("import grpc, grpc.aio", runs)
    out.values = {
        "cold_start_p50_ms": rnd(median([x for r in rb for x in r]), 1),
        "cold_start_5_parallel_ms": rnd(median([x for r in rb5 for x in r]), 1),
        "idle_rss_mb": rnd(idle, 1),
    }
    out.extra = {
        "cold_start_p50_ms_sandbox_off": rnd(median([x for r in ra for x in r]), 1),
        "cold_start_5_parallel_ms_sandbox_off": rnd(median([x for r in ra5 for x in r]), 1),
        "idle_rss_mb_sandbox_off": rnd(idle_off, 1),
        "idle_tree_pss_mb": rnd(idle_tree, 1),
        "idle_tree_processes": tree_size,
        "sandbox_layers": layers,
        "cold_start_cpu_ms_per_start": rnd(_mean(_CPU.get(id(mgr), [])), 1),
        "cold_start_cpu_ms_per_start_sandbox_off": rnd(_mean(_CPU.get(id(off), [])), 1),
        "python_startup_ms": rnd(bare, 1),
        "import_grpc_ms": rnd(grpc_only - bare, 1),
        "import_extension_sdk_ms": rnd(sdk - bare, 1),
    }
    return out
