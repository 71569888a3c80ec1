"""The zygote's sandboxed children: cloned straight into their namespaces, so the pid the host sees is the sandbox's
init (pid 1 of its pid namespace) and there is no waiter process; exit statuses, signals and Python's after-fork
state are still the extension's own."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest
from zy_helpers import Dirs, collect, require, run_script, spawn

from host.sandbox._zygote import Zygote

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the zygote is Linux-only (pidfd, namespaces)")


def _nspid(pid: int) -> list[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError(f"no NSpid line for {pid}")


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


async def _started(zygote: Zygote, dirs: Dirs, script: str) -> tuple[object, int]:
    """Spawn `script` sandboxed; wait for its first line (its pid as it sees it)."""
    (dirs.base / "ext.py").write_text(script)
    proc = await spawn(zygote, dirs, [sys.executable, str(dirs.base / "ext.py")])
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    return proc, int(line)


async def test_the_spawned_pid_is_the_extension_itself_pid_1_with_no_init(zygote: Zygote, dirs: Dirs) -> None:
    require("pid_namespace")
    proc, inner = await _started(zygote, dirs, "import os, sys\nprint(os.getpid(), flush=True)\nsys.stdin.read()\n")
    assert _nspid(proc.pid)[-1] == inner == 1  # the extension is pid 1 of its own pid namespace
    assert _children(proc.pid) == []  # no init above it, nothing below it
    proc.stdin.close()  # type: ignore[attr-defined]
    assert await asyncio.wait_for(proc.wait(), 10) == 0


async def test_the_extensions_exit_code_is_reported_not_inits(zygote: Zygote, dirs: Dirs) -> None:
    require("pid_namespace")
    code, _, err = await run_script(zygote, dirs, "import sys; sys.exit(7)")
    assert code == 7, err


async def test_an_extension_killed_by_sigkill_reports_minus_the_signal(zygote: Zygote, dirs: Dirs) -> None:
    require("pid_namespace")
    proc, _ = await _started(zygote, dirs, "import os, sys\nprint(os.getpid(), flush=True)\nsys.stdin.read()\n")
    import os

    os.kill(proc.pid, signal.SIGKILL)  # type: ignore[attr-defined]
    assert await asyncio.wait_for(proc.wait(), 10) == -signal.SIGKILL


async def test_sigterm_to_the_spawned_pid_reaches_the_extension(zygote: Zygote, dirs: Dirs) -> None:
    require("pid_namespace")
    proc, _ = await _started(zygote, dirs, (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: os._exit(3))\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(60)\n"
    ))
    proc.send_signal(signal.SIGTERM)  # type: ignore[attr-defined]
    assert await asyncio.wait_for(proc.wait(), 10) == 3


async def test_sandboxed_children_get_their_own_random_state(zygote: Zygote, dirs: Dirs) -> None:
    require("pid_namespace")
    script = "import random; print(random.getrandbits(64))"
    first = await run_script(zygote, dirs, script)
    second = await run_script(zygote, dirs, script)
    assert first[0] == second[0] == 0, (first, second)
    assert first[1] != second[1]  # os.fork()'s after-fork hooks ran: the module was reseeded


async def test_a_sandboxed_child_keeps_none_of_the_zygotes_pipes(zygote: Zygote, dirs: Dirs) -> None:
    require("pid_namespace")
    other, _ = await _started(zygote, dirs, "import os, sys\nprint(os.getpid(), flush=True)\nsys.stdin.read()\n")
    code, out, err = await run_script(zygote, dirs, (
        "import os\n"
        "fds = sorted(os.listdir('/proc/self/fd'), key=int)\n"
        "extra = [f for f in fds if int(f) > 3]\n"  # fd 3: listdir's own
        "flags = [int(open(f'/proc/self/fdinfo/{f}').read().split()[3], 8) for f in extra]\n"
        "print(fds[:4], [(os.readlink(f'/proc/self/fd/{f}')[:5], fl & 0o3, bool(fl & 0o2000000)) "
        "for f, fl in zip(extra, flags)])\n"
    ))
    # only its own status pipe's write end (pid 1 reports a death by signal there), close-on-exec
    assert (code, out.strip()) == (0, "['0', '1', '2', '3'] [('pipe:', 1, True)]"), err
    other.stdin.close()  # type: ignore[attr-defined]
    await collect(other)  # type: ignore[arg-type]
