"""Removes the cgroups the sandbox launcher made for one extension process, once that process has exited.

The launcher (host/sandbox/_launcher.py) puts each sandboxed extension into `<base>/hookwire/<extension id>-<pid>` for
the pids and the memory controller, where `<pid>` is the process the host spawned (the launcher, or the zygote's
child). Its waiter removes them when it exits cleanly, but a waiter that is SIGKILLed (a crash, `kill -9`, the
end of `terminate()`'s grace) cannot: without this module each such exit left one empty cgroup per controller
until a later launch reaped it. The host knows the pid and the names, so it removes them itself after every
exit (unload, close, crash); a cgroup still busy for a moment (the pid namespace's last tasks exiting) is
retried briefly. Only a host that is itself killed leaves them behind: `reap_stale_once` removes those of
processes that are gone, once per directory and host process, before the first start that uses it.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from pathlib import Path

from pydantic import BaseModel

log = logging.getLogger("hookwire.sandbox")

RETRY_S = 0.01
GIVE_UP_S = 1.0  # after the pid namespace is gone its tasks are too; only a tree without one can stay busy


class CgroupLease(BaseModel):
    """Where the launcher creates an extension's cgroups: `<dir>/<name>-<pid>` for each dir."""

    dirs: list[str]
    name: str

    def paths(self, pid: int) -> list[Path]:
        return [Path(d) / f"{self.name}-{pid}" for d in self.dirs]


_reaped: set[str] = set()


def reap_stale_once(lease: CgroupLease) -> None:
    """The first time this process starts an extension in each of `lease.dirs`: `reap_stale` there."""
    for d in lease.dirs:
        if d not in _reaped:
            _reaped.add(d)
            reap_stale(Path(d))


def reap_stale(root: Path) -> int:
    """Remove the cgroups under `root` whose process is gone (rmdir refuses any that still has tasks)."""
    try:
        entries = os.listdir(root)
    except OSError:
        return 0  # not created yet (the first launch makes it), or not ours to read
    removed = 0
    for entry in entries:
        pid_text = entry.rpartition("-")[2]
        if not pid_text.isdigit() or _alive(int(pid_text)):
            continue
        try:
            os.rmdir(root / entry)
            removed += 1
        except OSError:
            pass  # busy, or not ours
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _try_remove(path: Path) -> bool:
    """rmdir `path`: True when it is gone, False while it still has tasks; raises OSError otherwise."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return False
        raise
    return True


async def release_cgroups(lease: CgroupLease, pid: int, *, extension: str, give_up_s: float = GIVE_UP_S) -> None:
    """Remove the exited process `pid`'s cgroups (never raises; a failure is logged with the extension's name)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + give_up_s
    for path in lease.paths(pid):
        while True:
            try:
                if await asyncio.to_thread(_try_remove, path):  # a cgroup's rmdir can block: off the loop
                    break
            except OSError as exc:
                log.warning("extension %r: cannot remove its cgroup %s: %s", extension, path, exc.strerror)
                break
            if loop.time() >= deadline:
                log.warning("extension %r: its cgroup %s still has tasks %.1f s after it exited; left for the next "
                            "launch to reap", extension, path, give_up_s)
                break
            await asyncio.sleep(RETRY_S)
