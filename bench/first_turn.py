"""A host app's first session, in a fresh process: how long its event loop is held while the first Agent starts and
runs its first turn, with and without `host.preload()` at start-up (host/turn/_preload.py), alternated (ABAB).

Each sample is a fresh interpreter running `_APP`: a 2 ms timer ticks on the loop (any other task of the app: a
server's connections), then an Agent starts and runs one 2-step turn with a host tool on the embedded model. The
figure is how late that timer fired at most, from the Agent start to the turn's end.

- `first_turn_loop_lag_ms`: without preload (the baseline: litellm imported on the loop at the Agent start, its
  first call's lazy imports during the turn);
- `first_turn_loop_lag_ms_preloaded`: with `host.preload()` before `asyncio.run` (goal: <= 50 ms).

Extras: the Agent start and first turn wall times of each, the turn's wall time after preload over the same without
(`first_turn_ratio_preloaded`), and preload's own time (import, warm-up call). Medians over the samples.

    .venv/bin/python -m bench --only first_turn
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from typing import Any

from ._common import REPO_ROOT, Config, Section, abab, median, rnd

NAME = "first_turn"

_APP = textwrap.dedent("""
    import asyncio, json, sys, time
    import host
    from host import Agent, tool

    @tool(description="Upper-cases a key", parameters={"type": "object", "properties": {"key": {"type": "string"}}})
    def lookup(args):
        return args["key"].upper()

    class App(Agent):
        def get_tools(self):
            return {"lookup": lookup}

    async def main(report):
        loop = asyncio.get_running_loop()
        lags = []

        async def ticker():
            while True:
                t0 = loop.time()
                await asyncio.sleep(0.002)
                lags.append(max(0.0, loop.time() - t0 - 0.002))

        tick = asyncio.create_task(ticker())
        await asyncio.sleep(0.05)
        lags.clear()
        t0 = time.perf_counter()
        async with App(session_id="first") as agent:
            t1 = time.perf_counter()
            result = await agent.chat('/tool lookup {"key": "a"}\\n/next\\ndone')
            t2 = time.perf_counter()
        await asyncio.sleep(0.005)  # the ticker's timer that was due during the turn's last step has fired
        tick.cancel()
        if result.status != "completed":
            raise SystemExit(f"first turn ended {result.status}: {result.error}")
        print(json.dumps({"lag_max_ms": max(lags) * 1000, "start_ms": (t1 - t0) * 1000,
                          "turn_ms": (t2 - t1) * 1000, "preload": report}))

    report = host.preload().model_dump() if sys.argv[1] == "preload" else None
    asyncio.run(main(report))
""")


async def _sample(mode: str) -> dict[str, Any]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", _APP, mode, cwd=str(REPO_ROOT), env=env,
                                                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"first-turn app ({mode}) exited {proc.returncode}: {err.decode(errors='replace')[-500:]}")
    return json.loads(out.decode().strip().splitlines()[-1])  # type: ignore[no-any-return]


async def run(cfg: Config) -> Section:
    await _sample("preload")  # untimed: both sides then read the same warm page cache

    async def cold() -> dict[str, Any]:
        return await _sample("none")

    async def preloaded() -> dict[str, Any]:
        return await _sample("preload")

    colds, warms = await abab(1 if cfg.quick else max(cfg.ab_rounds // 2, 2), cold, preloaded)

    def med(samples: list[dict[str, Any]], key: str) -> float:
        return median([s[key] for s in samples])

    return Section(
        values={"first_turn_loop_lag_ms": rnd(med(colds, "lag_max_ms"), 1),
                "first_turn_loop_lag_ms_preloaded": rnd(med(warms, "lag_max_ms"), 1)},
        extra={"first_agent_start_ms": rnd(med(colds, "start_ms"), 1),
               "first_agent_start_ms_preloaded": rnd(med(warms, "start_ms"), 1),
               "first_turn_ms": rnd(med(colds, "turn_ms"), 1),
               "first_turn_ms_preloaded": rnd(med(warms, "turn_ms"), 1),
               "first_turn_ratio_preloaded": rnd(med(warms, "turn_ms") / med(colds, "turn_ms"), 3),
               "preload_import_ms": rnd(median([s["preload"]["import_s"] for s in warms]) * 1000, 0),
               "preload_warm_ms": rnd(median([s["preload"]["warm_s"] for s in warms]) * 1000, 0),
               "first_turn_loop_lag_ms_samples": [rnd(s["lag_max_ms"], 1) for s in colds],
               "first_turn_loop_lag_ms_preloaded_samples": [rnd(s["lag_max_ms"], 1) for s in warms]},
    )


if __name__ == "__main__":
    from .__main__ import main

    raise SystemExit(main(["--only", NAME, *sys.argv[1:]]))
