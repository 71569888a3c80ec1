"""The hook path against its transport's floor: an awaited beforeToolCall through ExtensionManager beside a bare
grpc.aio bidi-stream ping-pong of the same messages (bench/extensions/stream_echo_server.py: its own process, a
Unix socket like the extension's, one persistent stream, a frame written and its answer read per call).

`hook_vs_stream_floor_ratio`: hook p50 / floor p50 of adjacent blocks, the median over rounds (pairing adjacent
blocks keeps the machine's drift out of the ratio). Whatever is above 1.0 is the host's and the SDK's own work per
call (dispatch, conversion, trace, the sender and reader tasks, the extension's frame loop). Baseline and subject
alternate in many short rounds (ABAB) in the same run; p50s are medians over rounds, each spread the min..max over
rounds. Beside them, the CPU per call of each side over all rounds (extras): the host process (`time.process_time`, its
gRPC threads included) and the answering process (the extension, or the floor's server; its threads' schedstat) — steadier
than the wall-clock figures on a loaded machine — and `hook_vs_stream_floor_cpu_ratio`, both processes' CPU per call of
the hook over the floor's. Extra `hook_bridge_on_stream_ratio`: the same hook on an extension
granted a bridge call (so the host offers the HostBridge on its Connect stream) over the plain one, adjacent blocks.

    .venv/bin/python -m bench --only hook_floor        (or: .venv/bin/python bench/hook_floor.py [--quick])
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

if not __package__:  # run as a script (`python bench/hook_floor.py`): import the package properly
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "bench"  # noqa: A001

import grpc

from host import ExtensionManager, ToolCallSnapshot
from extension_sdk.proto import extension_pb2 as pb

from ._common import (EXT_DIR, Config, Section, abab, bench_manifest, ext_cpu_s, gc_paused, line_server, median, pct,
                      proc_cpu_s, process_tree, python_argv, rnd, time_calls, workdir)

NAME = "hook_floor"


class _Cpu:
    """CPU seconds of this process and of the answering process(es), summed over timed blocks."""

    def __init__(self, peer: Callable[[], float]) -> None:
        self._peer = peer
        self.host = self.peer = 0.0
        self.calls = 0

    async def timed(self, n: int, call: Callable[[], Awaitable[None]]) -> list[float]:
        """`time_calls`, with the CPU read inside the GC pause (its full collection is not the calls' CPU)."""
        out: list[float] = []
        perf = time.perf_counter_ns
        with gc_paused():
            h0, p0 = time.process_time(), self._peer()
            for _ in range(n):
                t0 = perf()
                await call()
                out.append((perf() - t0) / 1000)
            self.host += time.process_time() - h0
            self.peer += self._peer() - p0
        self.calls += n
        return out

    def per_call_us(self) -> tuple[float, float]:
        return self.host / self.calls * 1e6, self.peer / self.calls * 1e6


async def run(cfg: Config) -> Section:
    calls = cfg.n(500, 200)
    rounds = max(cfg.ab_rounds, 2 if cfg.quick else 16)
    warmup = cfg.n(300, 50)
    out = Section()
    snap = ToolCallSnapshot(tool_name="search", tool_call_id="call_1", input={"q": "hookwire"}, step_number=0)
    frame = pb.HostFrame(before_tool_call=pb.BeforeToolCallRequest(
        context=pb.CallContext(session_id="s", request_id="r"),
        snapshot=pb.ToolCallSnapshot(tool_name="search", tool_call_id="call_1", input_json='{"q":"hookwire"}',
                                     step_number=0),
        want_decision=True,
    ))
    with workdir() as work:
        sock = work / "floor.sock"
        async with ExtensionManager(sandbox=cfg.sandbox) as mgr, line_server(
            python_argv(EXT_DIR / "stream_echo_server.py", str(sock)), "ready|"
        ) as ready:
            info = await mgr.load(bench_manifest("hookfloor", ["beforeToolCall"], decisions=True))
            servers = [p for p in process_tree(os.getpid())
                       if b"stream_echo_server" in Path(f"/proc/{p}/cmdline").read_bytes()]
            floor_cpu = _Cpu(lambda: sum(proc_cpu_s(p) for p in servers))
            hook_cpu = _Cpu(lambda: ext_cpu_s([info]))
            async with grpc.aio.insecure_channel(ready.split("|", 1)[1]) as channel:
                stream = channel.stream_stream(
                    "/bench.Floor/Stream",
                    request_serializer=pb.HostFrame.SerializeToString,
                    response_deserializer=pb.ExtensionFrame.FromString,
                )()
                ids = iter(range(1, 1 << 62))

                async def floor_call() -> None:
                    frame.id = next(ids)
                    await stream.write(frame)
                    reply = await stream.read()
                    if reply.id != frame.id:
                        raise RuntimeError(f"floor server answered frame {reply.id}, expected {frame.id}")

                async def hook_call() -> None:
                    await mgr.before_tool_call(snap)

                await time_calls(warmup, floor_call)
                await time_calls(warmup, hook_call)

                async def a() -> list[float]:
                    return await floor_cpu.timed(calls, floor_call)

                async def b() -> list[float]:
                    return await hook_cpu.timed(calls, hook_call)

                floor_rounds, hook_rounds = await abab(rounds, a, b)
                await stream.done_writing()
            # the same hook on an extension granted a bridge call: the host offers the HostBridge on its Connect
            # stream, and the SDK's frame loop must also resolve bridge responses (extension_sdk/_stream_bridge.py)
            async with ExtensionManager(sandbox=cfg.sandbox) as bridged:
                await bridged.load(bench_manifest("hookbridged", ["beforeToolCall"], decisions=True,
                                                  permissions={"messages": "read"}))

                async def bridged_call() -> None:
                    await bridged.before_tool_call(snap)

                await time_calls(warmup, bridged_call)
                plain_rounds, bridged_rounds = await abab(max(rounds // 2, 2), lambda: time_calls(calls, hook_call),
                                                          lambda: time_calls(calls, bridged_call))
    hook_p50s = [pct(r, 0.5) for r in hook_rounds]
    floor_p50s = [pct(r, 0.5) for r in floor_rounds]
    ratios = [h / f for h, f in zip(hook_p50s, floor_p50s)]
    hook_p50, floor_p50 = median(hook_p50s), median(floor_p50s)
    out.values = {
        "stream_floor_rtt_p50_us": rnd(floor_p50, 1),
        "hook_vs_stream_floor_ratio": rnd(median(ratios), 3),
    }
    out.extra = {
        "floor_hook_rtt_p50_us": rnd(hook_p50, 1),
        "floor_hook_rtt_p50_spread_us": [rnd(min(hook_p50s), 1), rnd(max(hook_p50s), 1)],
        "stream_floor_rtt_p50_spread_us": [rnd(min(floor_p50s), 1), rnd(max(floor_p50s), 1)],
        "hook_vs_stream_floor_ratio_spread": [rnd(min(ratios), 3), rnd(max(ratios), 3)],
        "stream_floor_rtt_p99_us": rnd(median([pct(r, 0.99) for r in floor_rounds]), 1),
        # CPU per call over all rounds: (host process, answering process), µs
        "floor_cpu_us_per_call_host_server": [rnd(v, 1) for v in floor_cpu.per_call_us()],
        "hook_cpu_us_per_call_host_extension": [rnd(v, 1) for v in hook_cpu.per_call_us()],
        # both processes' CPU per call, hook over floor: steadier than the wall ratio on a shared machine
        "hook_vs_stream_floor_cpu_ratio": rnd(sum(hook_cpu.per_call_us()) / sum(floor_cpu.per_call_us()), 3),
        # awaited hook p50 with the HostBridge offered on the stream / without (adjacent blocks, median over rounds)
        "hook_bridge_on_stream_ratio": rnd(median([pct(g, 0.5) / pct(p, 0.5)
                                                   for p, g in zip(plain_rounds, bridged_rounds)]), 3),
        "hook_floor_load_avg_1m": rnd(os.getloadavg()[0], 2),
        "hook_floor_rounds": rounds,
    }
    return out


if __name__ == "__main__":
    from .__main__ import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
