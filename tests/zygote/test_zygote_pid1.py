"""A zygote-cloned Python extension is pid 1 of its own pid namespace (no init process): it reaps orphaned
grandchildren without stealing its own children's exit statuses, and the signals the kernel drops for a pid 1
with default dispositions still end it the way they would end any process (host/sandbox/_pid1.py)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest
from zy_helpers import Dirs, collect, require, run_script, spawn

from host.sandbox._zygote import Zygote, ZygoteProcess

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the zygote is Linux-only (pidfd, namespaces)")


async def _started(zygote: Zygote, dirs: Dirs, script: str) -> ZygoteProcess:
    """Spawn `script` sandboxed; wait for its first line."""
    (dirs.base / "ext.py").write_text(script)
    proc = await spawn(zygote, dirs, [sys.executable, str(dirs.base / "ext.py")])
    assert proc.stdout is not None
    assert (await asyncio.wait_for(proc.stdout.readline(), 30)).strip() == b"ready"
    return proc


async def test_an_orphaned_grandchild_that_exits_is_reaped_not_left_a_zombie(zygote: Zygote, dirs: Dirs) -> None:
    require("pid_namespace")
    code, out, err = await run_script(zygote, dirs, """
        import os, subprocess, sys, time
        # a child that starts a setsid() grandchild and exits at once: the grandchild is re-parented to pid 1
        out = subprocess.run([sys.executable, "-c", "import subprocess; "
                              "print(subprocess.Popen(['sleep', '0.2'], start_new_session=True).pid)"],
                             capture_output=True, text=True, check=True).stdout
        orphan = int(out)
        state = "?"
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{orphan}/stat") as fh:
                    state = fh.read().rsplit(")", 1)[1].split()[0]
            except FileNotFoundError:
                state = "gone"
                break
            time.sleep(0.05)
        print(state)
    """)
    assert (code, out.strip()) == (0, "gone"), err  # reaped: no zombie ("Z") left holding a pid


async def test_the_extensions_own_children_keep_their_exit_statuses(zygote: Zygote, dirs: Dirs) -> None:
    """The reaper takes only orphans: a child the extension waits for late still reports its own status."""
    require("pid_namespace")
    code, out, err = await run_script(zygote, dirs, """
        import asyncio, os, subprocess, sys, time
        # orphans exiting meanwhile, so SIGCHLD keeps coming while the children below wait to be collected
        subprocess.run([sys.executable, "-c", "import subprocess\\nfor _ in range(5): "
                        "subprocess.Popen(['sleep', '0.1'], start_new_session=True)"], check=True)
        late = subprocess.Popen(["sh", "-c", "exit 3"])
        pid = os.fork()
        if pid == 0:
            os._exit(5)
        time.sleep(0.5)  # both exited long ago; the orphans too (their SIGCHLD ran the reaper)
        forked = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

        async def main():
            proc = await asyncio.create_subprocess_exec("sh", "-c", "sleep 0.1; exit 4")
            return await proc.wait()

        print(late.wait(), forked, asyncio.run(main()), subprocess.run(["sh", "-c", "exit 6"]).returncode)
    """)
    assert (code, out.strip()) == (0, "3 5 4 6"), err


async def test_sigterm_without_a_handler_ends_pid_1_as_killed_by_sigterm(zygote: Zygote, dirs: Dirs) -> None:
    """The kernel drops SIGTERM for a pid 1 with the default disposition: the extension still ends (-15)."""
    require("pid_namespace")
    proc = await _started(zygote, dirs, "import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 10) == -signal.SIGTERM


async def test_sigint_ends_pid_1_as_killed_by_sigint(zygote: Zygote, dirs: Dirs) -> None:
    require("pid_namespace")
    proc = await _started(zygote, dirs, "import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    proc.send_signal(signal.SIGINT)
    code, _, err = await collect(proc, timeout=10)
    assert code == -signal.SIGINT, err
    assert "KeyboardInterrupt" in err


async def test_a_child_the_extension_forks_dies_by_sigterm_as_usual(zygote: Zygote, dirs: Dirs) -> None:
    """pid 1's stand-in handlers are not inherited by the processes it forks: the default disposition is back."""
    require("pid_namespace")
    code, out, err = await run_script(zygote, dirs, """
        import os, signal, time
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, b"1" if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL else b"0")
            time.sleep(60)
            os._exit(0)
        default = os.read(r, 1) == b"1"
        os.kill(pid, signal.SIGTERM)
        print(default, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    """)
    assert (code, out.strip()) == (0, f"True {-signal.SIGTERM}"), err


async def test_hookwire_zygote_pid1_0_keeps_an_init_above_the_extension(
        dirs: Dirs, monkeypatch: pytest.MonkeyPatch) -> None:
    require("pid_namespace")
    monkeypatch.setenv("HOOKWIRE_ZYGOTE_PID1", "0")
    zygote = Zygote()
    try:
        await zygote.start()
        proc = await _started(zygote, dirs, "import os, sys\nprint('ready', flush=True)\nsys.stdin.read()\n")
        kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(kids) == 1  # init, then the extension it forked
        assert (await collect(proc))[0] == 0
    finally:
        await zygote.close()


async def test_glibcs_cached_thread_id_is_the_extensions_own(zygote: Zygote, dirs: Dirs) -> None:
    """A raw clone skips glibc's fork, which has the kernel write the child's tid into the thread descriptor: the
    zygote's clone does it too (CLONE_CHILD_SETTID), else pthread calls on the main thread act on a stale tid."""
    require("pid_namespace")
    code, out, err = await run_script(zygote, dirs, """
        import ctypes, os
        libc = ctypes.CDLL(None)
        libc.pthread_self.restype = ctypes.c_void_p
        # glibc passes the cached tid to sched_setparam: ESRCH (3) for a stale one
        print(os.getpid(), libc.pthread_setschedprio(ctypes.c_void_p(libc.pthread_self()), 0))
    """)
    assert (code, out.split()) == (0, ["1", "0"]), err
