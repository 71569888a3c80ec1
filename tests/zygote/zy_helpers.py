"""Helpers for the zygote tests: spawn a script through the zygote with a real sandbox plan, collect its output."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from fixtures.sandbox_dirs import Dirs, require  # noqa: F401 - re-exported for the tests

from host import parse_manifest, plan_launch
from host.sandbox._zygote import Zygote, ZygoteProcess, zygote_launch

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "extensions" / "fixtures"


def base_env() -> dict[str, str]:
    """What the manager passes through from the host to every extension."""
    return {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TZ") if k in os.environ}


async def spawn(
    zygote: Zygote, dirs: Dirs, command: list[str], *, mode: str = "auto", env: dict[str, str] | None = None,
    cwd: Path | None = None, **fields: Any,
) -> ZygoteProcess:
    """Plan `command` like the manager does (sandbox `mode`) and fork it from the zygote."""
    manifest = parse_manifest({"name": "zygote-test", "command": ["python", "x.py"], **fields})
    plan = plan_launch(
        manifest, command=command, env={**base_env(), **(env or {})},
        scratch_dir=dirs.scratch, runtime_dir=dirs.runtime, mode=mode,  # type: ignore[arg-type]
    )
    launch = zygote_launch(plan.argv, plan.env)
    assert launch is not None, plan.argv
    return await zygote.spawn(launch, name="zygote-test", env=plan.env, cwd=cwd or dirs.base)


async def run_script(zygote: Zygote, dirs: Dirs, script: str, *args: str, **kwargs: Any) -> tuple[int, str, str]:
    """Write `script`, run it through the zygote, return (exit code, stdout, stderr)."""
    path = dirs.base / "script.py"
    path.write_text(textwrap.dedent(script))
    proc = await spawn(zygote, dirs, [sys.executable, str(path), *args], **kwargs)
    return await collect(proc)


async def collect(proc: ZygoteProcess, timeout: float = 30) -> tuple[int, str, str]:
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.close()
    out, err, code = await asyncio.wait_for(
        asyncio.gather(proc.stdout.read(), proc.stderr.read(), proc.wait()), timeout
    )
    return code, out.decode(), err.decode()
