"""A host app's first session, in a fresh process: how long its event loop is held while the first Agent starts and
runs its first turn, with and without `host.preload()` at start-up (host/turn/_preload.py), alternated (ABAB).

Each sample is a fresh interpreter running bench/first_session_app.py: a 2 ms timer ticks on the loop (any other task of the app: a
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
from typing import Any

from ._common import BENCH_DIR, REPO_ROOT, Config, Section, abab, median, rnd

NAME = "first_turn"

#: the app, run as a fresh process per sample
APP = str(BENCH_DIR / "first_session_app.py")


async def _sample(mode: str) -> dict[str, Any]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = await asyncio.create_subprocess_exec(sys.executable, APP, mode, cwd=str(REPO_ROOT), env=env,
                                                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"first-turn app ({mode}) exited {proc.returncode}: {err.decode(errors='replace')[-500:]}")
    sample: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    if sample["status"] != "completed":
        raise RuntimeError(f"first-turn app ({mode}): the turn ended {sample['status']}: {sample['error']}")
    return sample


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
