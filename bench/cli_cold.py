"""Cold start of the `hookwire run` command beside a bare `python -c "import litellm"`, in the same run (ABAB).

`cli_run_cold_ms`: wall time of a fresh `hookwire run "hi" -e sample_extensions/tools/manifest.yaml --no-trace`
process, start to exit (interpreter, host import, extension start, litellm import, one turn on the embedded
model, shutdown). `import_litellm_ms`: a fresh interpreter importing litellm, with the same environment
(LITELLM_LOCAL_MODEL_COST_MAP=True: no network). Most of a cold run is the litellm import; the CLI imports it in
a thread while the extension starts (host/_cli_cold.py). Goal: `cli_run_cold_ratio` (median run / median import)
<= 1.3. Extra: the CPU time of each (steadier under load, but blind to the overlap). One untimed warm-up of each first, so both read the same warm page cache.
"""

from __future__ import annotations

import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from ._common import REPO_ROOT, Config, Section, abab, median, rnd

NAME = "cli_cold"
HOOKWIRE = str(Path(sys.executable).parent / "hookwire")


_CPU: dict[str, list[float]] = {}  # argv[0] -> CPU ms (user + sys) of each timed run


def _children_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


async def _timed(*argv: str, cwd: Path) -> float:
    cpu0 = _children_cpu_ms()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOOKWIRE_PLAIN": "1"}
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(*argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _, err = await proc.communicate()
    ms = (time.perf_counter() - t0) * 1000
    _CPU.setdefault(argv[0], []).append(_children_cpu_ms() - cpu0)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}: {err.decode(errors='replace')[-500:]}")
    return ms


async def run(cfg: Config) -> Section:
    with tempfile.TemporaryDirectory(prefix="hw-bench-cli-") as tmp:
        store, ws = str(Path(tmp) / "s.db"), str(Path(tmp) / "ws")
        manifest = str(REPO_ROOT / "sample_extensions/tools/manifest.yaml")

        def bare() -> asyncio.Future[float]:
            return asyncio.ensure_future(_timed(sys.executable, "-c", "import litellm", cwd=REPO_ROOT))

        def cli() -> asyncio.Future[float]:
            return asyncio.ensure_future(_timed(HOOKWIRE, "run", "hi", "-e", manifest, "--no-trace", "--sandbox",
                                                cfg.sandbox, "--store", store, "--workspace", ws, cwd=Path(tmp)))

        await bare()
        await cli()
        _CPU.clear()
        imports, runs = await abab(1 if cfg.quick else cfg.ab_rounds, bare, cli)
    imp, cold = median(imports), median(runs)
    return Section(
        values={"cli_run_cold_ms": rnd(cold, 0), "import_litellm_ms": rnd(imp, 0),
                "cli_run_cold_ratio": rnd(cold / imp, 3)},
        extra={"cli_run_cold_ms_samples": [rnd(v, 0) for v in runs],
               "import_litellm_ms_samples": [rnd(v, 0) for v in imports],
               # CPU (user + sys) per process: steadier than wall time on a loaded machine, blind to the overlap
               "cli_run_cold_cpu_ms": rnd(median(_CPU.get(HOOKWIRE, [])), 0),
               "import_litellm_cpu_ms": rnd(median(_CPU.get(sys.executable, [])), 0)},
    )
