"""Remove a directory tree an extension may have filled with anything: iteratively, one fd at a time.

`remove_tree` never recurses (a 1,200-level chain left by an extension cannot raise RecursionError), never
builds long paths (each step is relative to one open directory fd, so depth beyond PATH_MAX is fine), never
follows a symlink (they are unlinked, not entered), never crosses into another filesystem (a mount point is
left alone), and holds at most two fds at once. It is blocking: call it through `asyncio.to_thread`.
`remove_tree_logged` is the variant for close paths: it logs a failure and never raises.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("hookwire.extensions")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _unlink(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def _first_subdir(fd: int, dev: int) -> str | None:
    """Unlink every non-directory in `fd`; return the name of one remaining subdirectory (same device)."""
    with os.scandir(fd) as entries:
        names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
    for name, is_dir in names:
        if not is_dir:
            _unlink(name, fd)
            continue
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if st.st_dev != dev:
            raise OSError(f"refusing to cross into another filesystem at {name!r}")
        if not stat.S_IMODE(st.st_mode) & stat.S_IRWXU == stat.S_IRWXU:
            _chmod(name, fd)  # a mode-0 directory: make it listable before entering it
        return name
    return None


def _chmod(name: str, dir_fd: int) -> None:
    # os.chmod(dir_fd=..., follow_symlinks=False) is not supported on Linux; the entry is a directory here.
    fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.chmod(f"/proc/self/fd/{fd}", 0o700)
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """Delete `path` and everything beneath it (see the module docstring). Missing: nothing to do."""
    try:
        top = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        os.unlink(path)
        return
    dev = os.fstat(top).st_dev
    names: list[str] = []  # the chain of directory names from `path` down to fd
    fd = top
    try:
        while True:
            sub = _first_subdir(fd, dev)
            if sub is not None:
                child = os.open(sub, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = child
                names.append(sub)
                continue
            if not names:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(path)


def remove_tree_logged(path: Path, what: str) -> bool:
    """remove_tree, logging (not raising) a failure. True when the tree is gone."""
    try:
        remove_tree(path)
        return True
    except Exception as exc:  # close paths must finish whatever the extension left behind
        log.warning("could not remove %s %s: %s", what, path, exc)
        return False
