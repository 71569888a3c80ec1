"""Host cost of hostile tool replies (issue 10 items 10 and 19), measured in a fresh process per case.

  python -m bench.reply_bounds big      # three parallel 15 MiB tool replies in one turn: host RSS before/after
  python -m bench.reply_bounds stream   # one tool streaming 200k preliminary results: host CPU seconds

Prints one JSON line. Each case runs through a real host.Agent turn on a SQLite store with the fixture extension
tests/fault/fixtures/bounds_ext.py (sandbox off: the figures are the host's own cost).
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from host import Agent  # noqa: E402
from host.turn import _scripted_model  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fault" / "fixtures" / "bounds_ext.py"


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _manifest(tmp: Path, **limits: int) -> Path:
    data = {"name": "bounds", "command": [sys.executable, str(FIXTURE)], "cwd": str(FIXTURE.parent),
            "timeouts": {"startMs": 20000, "toolMs": 120000}, "limits": limits}
    path = tmp / "bounds.json"
    path.write_text(json.dumps(data))
    return path


async def _big(tmp: Path) -> dict[str, object]:
    call = '/tool bounds_big {"mib": 15}'
    async with Agent(session_id="b", store=tmp / "store.db", extensions=[_manifest(tmp)], sandbox="off") as agent:
        await agent.chat("warm up")
        _scripted_model.last_requests.clear()
        before = _rss_mb()
        result = await agent.chat(f"{call}\n{call}\n{call}\n/next\ndone")
        after = _rss_mb()
        _scripted_model.last_requests.clear()
        stored = sum(len(json.dumps(m)) for m in await agent.store.messages())
    db = sum(p.stat().st_size for p in tmp.glob("store.db*"))
    return {"case": "3x15MiB", "status": result.status, "rss_before_mb": round(before, 1),
            "rss_after_mb": round(after, 1), "rss_growth_mb": round(after - before, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "stored_transcript_bytes": stored, "store_files_bytes": db}


async def _stream(tmp: Path) -> dict[str, object]:
    seen = 0

    class Counting(Agent):
        def on_chunk(self, ctx):  # type: ignore[no-untyped-def]
            nonlocal seen
            if ctx.chunk.preliminary:
                seen += 1

    async with Counting(session_id="s", store=tmp / "store.db", extensions=[_manifest(tmp)], sandbox="off") as agent:
        await agent.chat("warm up")
        cpu0, t0 = time.process_time(), time.perf_counter()
        result = await agent.chat('/tool bounds_stream {"n": 200000}\n/next\ndone')
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    part = next(p for p in result.message["parts"] if p.get("toolName") == "bounds_stream")
    return {"case": "200k preliminaries", "status": result.status, "host_cpu_s": round(cpu, 2),
            "wall_s": round(wall, 2), "preliminaries_seen_by_on_chunk": seen, "final": part.get("output")}


def main() -> None:
    case = sys.argv[1] if len(sys.argv) > 1 else "big"
    with tempfile.TemporaryDirectory() as tmp:
        out = asyncio.run(_big(Path(tmp)) if case == "big" else _stream(Path(tmp)))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
