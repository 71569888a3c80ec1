"""Helpers for the extension manager tests: manifests for the fixture extensions and process checks."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fixtures.manifests import fixture_manifest

FIXTURES = Path(__file__).parent / "fixtures"


def write_manifest(tmp_path: Path, name: str, script: str, *args: str, **fields: Any) -> Path:
    """A manifest file for a fixture script (run from the fixtures dir) with extra manifest fields."""
    return fixture_manifest(tmp_path, FIXTURES, name, script, *args, **fields)


def hooks_manifest(tmp_path: Path, mode: str, name: str | None = None, **fields: Any) -> Path:
    name = name or f"hooks-{mode}"
    return write_manifest(tmp_path, name, "hooks_ext.py", "--mode", mode, "--name", name, **fields)


def process_gone(pid: int) -> bool:
    """True when no process (not even a zombie) has this pid."""
    return not Path(f"/proc/{pid}").exists()


async def wait_until(predicate: Any, timeout: float = 10.0) -> bool:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return bool(predicate())


def pids_with_arg(marker: str) -> list[int]:
    """Pids of live processes whose command line contains `marker` (zombies included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
