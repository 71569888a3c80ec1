"""onChunk delivery: `mgr.on_chunk(...)` for N chunks (yielding to the loop every BURST chunks, as a stream
does, and awaiting `mgr.flush()` every FLUSH_EVERY chunks so the bounded outbox never drops), then a final
`await mgr.flush()` (every extension has handled every chunk). Only delivered chunks count. One vs five subscribed extensions,
alternated. Host CPU is `time.process_time()` of this (host) process only: all its threads, gRPC's included.
"""

from __future__ import annotations

import asyncio
import time

from host import CallContext, ChunkSnapshot, ExtensionManager

from ._common import Config, Section, abab, bench_manifest, gc_paused, median, rnd

NAME = "chunks"
BURST = 64
FLUSH_EVERY = 2_000  # well under the connection's outbox bound (10,000), so no chunk is dropped


def _dropped(mgr: ExtensionManager) -> int:
    return sum(i.dropped_observations for i in mgr.extensions())


async def _deliver(mgr: ExtensionManager, n: int) -> tuple[float, float, int]:
    """(wall s, host cpu s, chunks dropped) to enqueue and flush n chunks."""
    ctx = CallContext(session_id="bench", request_id="turn-1")
    snaps = [ChunkSnapshot(type="text-delta", text=f"tok{i % 97} ") for i in range(n)]
    on_chunk = mgr.on_chunk
    dropped = _dropped(mgr)
    with gc_paused():
        c0, t0 = time.process_time(), time.perf_counter()
        for i in range(0, n, BURST):
            for snap in snaps[i:i + BURST]:
                on_chunk(snap, ctx)
            if (i + BURST) % FLUSH_EVERY < BURST:
                await mgr.flush(ctx)
            else:
                await asyncio.sleep(0)
        await mgr.flush(ctx)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return wall, cpu, _dropped(mgr) - dropped


async def run(cfg: Config) -> Section:
    n = cfg.n(40_000, 4_000)
    out = Section()
    async with ExtensionManager(sandbox=cfg.sandbox) as mgr1, ExtensionManager(sandbox=cfg.sandbox) as mgr5:
        await mgr1.load(bench_manifest("chunk1", ["onChunk"]))
        await mgr5.load_all([bench_manifest(f"chunk5-{i}", ["onChunk"]) for i in range(5)])
        await _deliver(mgr1, min(n, 2000))  # warm-up
        await _deliver(mgr5, min(n, 2000))

        async def one() -> tuple[float, float, int]:
            return await _deliver(mgr1, n)

        async def five() -> tuple[float, float, int]:
            return await _deliver(mgr5, n)

        r1, r5 = await abab(cfg.ab_rounds, one, five)
    dropped = sum(r[2] for r in r1 + r5)
    rate1 = median([(n - d) / w for w, _, d in r1])
    rate5 = median([(n - d / 5) / w for w, _, d in r5])  # drops are counted per extension
    cpu1, cpu5 = median([c for _, c, _ in r1]), median([c for _, c, _ in r5])
    out.values = {
        "chunks_per_s_1ext": rnd(rate1, 0),
        "chunks_per_s_5ext": rnd(rate5, 0),
        "host_cpu_us_per_chunk_per_ext": rnd(cpu5 * 1e6 / (n * 5), 2),
    }
    out.extra = {
        "host_cpu_us_per_chunk_1ext": rnd(cpu1 * 1e6 / n, 2),
        "host_cpu_us_per_chunk_5ext_total": rnd(cpu5 * 1e6 / n, 2),
        "chunks_per_run": n,
        "chunks_dropped": dropped,
    }
    out.notes.append(
        f"chunks: host_cpu_us_per_chunk_per_ext is the 5-extension run's host CPU / (chunks x 5); the 1-extension "
        f"run costs {out.extra['host_cpu_us_per_chunk_1ext']} us/chunk; {dropped} chunk(s) dropped by backpressure"
    )
    return out
