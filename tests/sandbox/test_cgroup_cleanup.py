"""No sandbox cgroup outlives its extension process: after unload, after close (even when the host has to SIGKILL
the tree, so the launcher's own clean-up never runs) and after the process is killed (a crash)."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fixtures.processes import wait_until

from host import ExtensionManager, parse_manifest, sandbox_capabilities
from host.extensions._manifest import sanitize_name

FIXTURE = """
    import asyncio, os, signal, sys, time
    from extension_sdk import Extension

    ext = Extension("cg", "0.1.0")

    @ext.tool(description="Answers ok")
    def ok(args):
        return "ok"

    code = asyncio.run(ext.serve_async(socket_path=os.environ["HOOKWIRE_SOCKET"], token=os.environ["HOOKWIRE_TOKEN"]))
    if "--stubborn" in sys.argv:  # past Shutdown, the lifeline and SIGTERM: only SIGKILL of the whole tree stops it
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(60)
    os._exit(code)
"""


def _cgroup_dirs() -> list[Path]:
    """`<base>/hookwire` of each cgroup controller the sandbox uses here (skips the test when there is none)."""
    layers = sandbox_capabilities()["layers"]
    dirs = []
    if layers["process_limit"].get("mechanism") == "pids_cgroup" and layers["process_limit"].get("base"):
        dirs.append(Path(layers["process_limit"]["base"]) / "hookwire")
    if layers["memory_cgroup"]["available"]:
        dirs.append(Path(layers["memory_cgroup"]["base"]) / "hookwire")
    if not dirs:
        pytest.skip("no pids or memory cgroup can be created here")
    return dirs


def _manifest(tmp_path: Path, name: str, *args: str, **fields: object):  # type: ignore[no-untyped-def]
    script = tmp_path / "cg_ext.py"
    script.write_text(textwrap.dedent(FIXTURE))
    return parse_manifest({"name": name, "command": [sys.executable, str(script), *args], "cwd": str(tmp_path),
                           "timeouts": {"startMs": 20000, "shutdownMs": 600}, **fields})


def _owned(dirs: list[Path], name: str) -> list[str]:
    """This extension's cgroups, whatever pid they carry (other tests and processes share the directories)."""
    prefix = sanitize_name(name) + "-"
    return sorted(str(d / e) for d in dirs if d.is_dir() for e in os.listdir(d) if e.startswith(prefix))


async def test_no_cgroup_is_left_after_unload(tmp_path: Path) -> None:
    dirs = _cgroup_dirs()
    name = f"cg-unload-{os.getpid()}"
    async with ExtensionManager(sandbox="auto") as mgr:
        info = await mgr.load(_manifest(tmp_path, name))
        assert _owned(dirs, name) == sorted(str(d / f"{sanitize_name(name)}-{info.pid}") for d in dirs)
        await mgr.unload(name)
        assert _owned(dirs, name) == []


async def test_no_cgroup_is_left_after_close_that_had_to_sigkill_the_tree(tmp_path: Path) -> None:
    dirs = _cgroup_dirs()
    name = f"cg-close-{os.getpid()}"
    async with ExtensionManager(sandbox="auto") as mgr:
        info = await mgr.load(_manifest(tmp_path, name, "--stubborn"))
        assert len(_owned(dirs, name)) == len(dirs)
        started = time.monotonic()
    assert time.monotonic() - started >= 0.6  # it sat out the whole shutdown grace: killed, not exited
    assert info.pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(info.pid, 0)
    assert _owned(dirs, name) == []


async def test_no_cgroup_is_left_after_the_extension_is_killed(tmp_path: Path) -> None:
    dirs = _cgroup_dirs()
    name = f"cg-crash-{os.getpid()}"
    async with ExtensionManager(sandbox="auto") as mgr:
        # No restart during the test: a relaunch would reap the dead process's cgroups by itself.
        info = await mgr.load(_manifest(tmp_path, name, restart={"backoffMs": 600000}))
        assert info.pid is not None and len(_owned(dirs, name)) == len(dirs)
        os.kill(info.pid, signal.SIGKILL)  # the waiter: nothing of the sandbox gets to clean up
        assert await wait_until(lambda: mgr.extensions()[0].state != "running", 10)
        assert await wait_until(lambda: _owned(dirs, name) == [], 5), _owned(dirs, name)
        assert mgr.extensions()[0].pid in (None, info.pid)  # not relaunched meanwhile


def test_cgroups_of_processes_that_are_gone_are_reaped(tmp_path: Path) -> None:
    """What a killed host leaves: empty cgroups named for dead pids; a live one (and anything busy) stays."""
    from host.sandbox._cgroups import reap_stale

    root = _cgroup_dirs()[0]
    root.mkdir(exist_ok=True)
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    gone, live = root / f"cg-reap-{dead}", root / f"cg-reap-{os.getpid()}"
    gone.mkdir()
    live.mkdir()
    try:
        reap_stale(root)
        assert (gone.exists(), live.exists()) == (False, True)
    finally:
        for d in (gone, live):
            if d.exists():
                d.rmdir()
