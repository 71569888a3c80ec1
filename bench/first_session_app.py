"""A host app's first session, run as its own fresh process: bench/first_turn.py times it, tests/agent/test_preload.py
checks what it imports and logs.

    python bench/first_session_app.py preload|none

A 2 ms timer ticks on the app's loop (the rest of the app: a server's connections), then an Agent with one host
tool starts and runs one 2-step turn on the embedded model. Prints one JSON line: how late the timer fired at most
from the Agent start to the turn's end, the start's and the turn's wall times, the turn's status and answer, the
modules first imported from the Agent start to the turn's end, and `host.preload()`'s report (argument `preload`:
called before `asyncio.run`; `none`: not called).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repository's `bench` package

import host  # noqa: E402
from bench._common import timer_lateness  # noqa: E402
from host import Agent, tool  # noqa: E402


@tool(description="Upper-cases a key", parameters={"type": "object", "properties": {"key": {"type": "string"}}})
def lookup(args: dict[str, Any]) -> str:
    return args["key"].upper()


class App(Agent):
    def get_tools(self) -> dict[str, Any]:
        return {"lookup": lookup}


async def main(report: dict[str, Any] | None) -> None:
    async with timer_lateness(0.002) as lags:
        await asyncio.sleep(0.05)
        lags.clear()
        before = set(sys.modules)
        t0 = time.perf_counter()
        async with App(session_id="first") as agent:
            t1 = time.perf_counter()
            result = await agent.chat('/tool lookup {"key": "a"}\n/next\ndone')
            t2 = time.perf_counter()
        imported = sorted(set(sys.modules) - before)
        await asyncio.sleep(0.005)  # the timer that was due during the turn's last step has fired
    text = result.message["parts"][-1].get("text") if result.message else None
    print(json.dumps({"lag_max_ms": max(lags) * 1000, "start_ms": (t1 - t0) * 1000, "turn_ms": (t2 - t1) * 1000,
                      "status": result.status, "error": result.error, "text": text, "imported": imported,
                      "preload": report}))


if __name__ == "__main__":
    asyncio.run(main(host.preload().model_dump() if sys.argv[1] == "preload" else None))
