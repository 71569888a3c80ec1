"""Run N awaited beforeToolCall hooks through ExtensionManager against a real extension (bench/extensions/bench_ext.py).

For profiling the host's side of one hook call:
    .venv/bin/python scripts/hook_profile.py [N] [--cprofile]
For instructions per call, run it under callgrind twice with different N and take the difference over the difference
in N (start-up and warm-up cancel out):
    valgrind --tool=callgrind --dump-instr=no .venv/bin/python scripts/hook_profile.py 300
    valgrind --tool=callgrind --dump-instr=no .venv/bin/python scripts/hook_profile.py 1300
The extension's side: scripts/callgrind_hook_ext.py; loop iterations, syscalls and CPU by thread: scripts/loop_hops.py.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))  # the checkout to profile: run from its root (main, or a branch)

from bench._common import bench_manifest  # noqa: E402
from host import ExtensionManager, ToolCallSnapshot  # noqa: E402


async def main(n: int, profile: bool) -> None:
    snap = ToolCallSnapshot(tool_name="search", tool_call_id="call_1", input={"q": "hookwire"}, step_number=0)
    async with ExtensionManager() as mgr:
        await mgr.load(bench_manifest("hookfloor", ["beforeToolCall"], decisions=True))
        for _ in range(300):
            await mgr.before_tool_call(snap)
        t0 = time.process_time()
        if profile:
            import cProfile
            import pstats
            pr = cProfile.Profile()
            pr.enable()
        for _ in range(n):
            await mgr.before_tool_call(snap)
        if profile:
            pr.disable()
            pstats.Stats(pr).sort_stats("tottime").print_stats(45)
        print(f"host cpu/call {(time.process_time() - t0) / n * 1e6:.1f} us", file=sys.stderr)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    asyncio.run(main(int(args[0]) if args else 2000, "--cprofile" in sys.argv))
