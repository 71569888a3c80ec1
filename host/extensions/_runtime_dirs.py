"""A host's runtime dir that says whether its host still lives, and the reaping of the ones whose host died.

Every `Launcher` makes one private dir (`hw-XXXXXXXX`, 0700) for its extensions' sockets and scratch dirs and
removes it on `close()`. A host that is SIGKILLed (or OOM-killed, or loses its machine's power mid-turn) never
closes: its dir stays behind, with every scratch file its extensions wrote. So each runtime dir holds a lock file,
`.hookwire-host.lock`, flock()ed exclusively by the living host for its whole life (O_CLOEXEC: no extension
process inherits it). The kernel drops the lock when the process dies, however it dies. A later host, when it
first starts an extension, removes the dirs beside its own whose lock it can take:

- only `hw-*` entries that are real directories (never a symlink) owned by this user;
- only with a lock file present (a dir without one belongs to an older hookwire or to something else: kept);
- only when the dir is older than `min_age_s` (a host between `mkdtemp` and its lock is never caught);
- removal through `remove_tree` (no symlink followed, no other filesystem entered), the lock held while it runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
import tempfile
import time
from pathlib import Path

from ..sandbox._fs_cleanup import remove_tree

log = logging.getLogger("hookwire.extensions")

LOCK_NAME = ".hookwire-host.lock"
PREFIX = "hw-"
_LOCK_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC


class RuntimeDir:
    """A fresh private runtime dir and the lock that marks its host alive until `release()` (or death)."""

    def __init__(self, path: Path, lock_fd: int) -> None:
        self.path = path
        self._lock_fd: int | None = lock_fd

    @classmethod
    def create(cls, parent: str | None) -> RuntimeDir:
        path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
        os.chmod(path, 0o700)
        fd = os.open(path / LOCK_NAME, _LOCK_FLAGS | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return cls(path, fd)

    def release(self) -> None:
        """Drop the lock (the dir itself is removed by its owner, after this or before)."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)


def _abandoned(entry: os.DirEntry[str], min_age_s: float, now: float) -> int | None:
    """The locked fd of `entry` when it is a runtime dir whose host is gone; None when it must be kept."""
    if not entry.name.startswith(PREFIX) or not entry.is_dir(follow_symlinks=False):
        return None
    st = entry.stat(follow_symlinks=False)
    if st.st_uid != os.getuid() or not stat.S_ISDIR(st.st_mode) or now - st.st_mtime < min_age_s:
        return None
    try:
        fd = os.open(os.path.join(entry.path, LOCK_NAME), _LOCK_FLAGS)
    except OSError:
        return None  # no lock file (not ours, or older than the lock), a symlink, or unreadable: keep it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)  # a living host holds it
        return None
    return fd


def reap_abandoned(parent: Path, keep: Path, *, min_age_s: float = 60.0) -> list[Path]:
    """Remove the runtime dirs in `parent` (but `keep`) whose host died; return what was removed. Blocking: run it
    off the event loop. Never raises: a dir it cannot remove is logged and left."""
    removed: list[Path] = []
    now = time.time()
    try:
        entries = list(os.scandir(parent))
    except OSError as e:
        log.debug("runtime dirs in %s not listed: %s", parent, e)
        return removed
    for entry in entries:
        path = Path(entry.path)
        if path == keep:
            continue
        try:
            fd = _abandoned(entry, min_age_s, now)
        except OSError:
            continue
        if fd is None:
            continue
        try:
            remove_tree(path)
            removed.append(path)
            log.info("removed %s, the runtime dir of a host that died without closing it", path)
        except OSError as e:
            log.warning("the runtime dir %s of a dead host was not removed: %s", path, e)
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
    return removed
