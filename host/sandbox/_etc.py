"""The read-only /etc that every sandboxed extension of one host sees, kept as one directory in the runtime dir.

An extension's private root shows a short allowlist of /etc (name resolution, TLS roots, users, time zone, the
loader's cache). Copying those ~16 small files into each root cost its pid-1 init ~1 ms of CPU per start; now the
host keeps the copies (and the symlinks, and empty mount points for the /etc directories that are bind-mounted)
in `<runtime dir>/etc-view`, and init bind-mounts that one directory at /etc. It is re-synced whenever the scan
of the system (host/sandbox/_fs.py, every SYSTEM_VIEW_TTL_S) runs again, file by file through a rename, so a
running extension sees a changed /etc/hosts as the host does. It is never writable from a sandbox: read-only
bind (or Landlock, which denies every write outside scratch), in a runtime dir no extension can see.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._realpath import real_path

VIEW_NAME = "etc-view"

_synced: dict[str, int] = {}  # view dir -> generation of the system scan it was built from


def etc_view(shared_dir: Path, generation: int, *, copies: tuple[str, ...], symlinks: dict[str, str],
             mount_points: list[str]) -> str | None:
    """The view directory for these entries (built or re-synced when the scan changed), or None if it can't be.

    `copies`: /etc files copied in; `symlinks`: /etc paths recreated as symlinks; `mount_points`: /etc paths
    bind-mounted over the view (an empty dir or file is made for each, so init never writes into the view).
    """
    view = os.path.join(real_path(shared_dir), VIEW_NAME)
    if _synced.get(view) == generation and os.path.isdir(view):
        return view
    try:
        _sync(view, copies, symlinks, mount_points)
    except OSError:
        _synced.pop(view, None)
        return None
    _synced[view] = generation
    return view


def _rel(path: str) -> str:
    return path[len("/etc/"):]


def _sync(view: str, copies: tuple[str, ...], symlinks: dict[str, str], mount_points: list[str]) -> None:
    old_umask = os.umask(0o022)  # the view must be readable in the sandbox whatever the host's umask is
    try:
        os.makedirs(view, mode=0o755, exist_ok=True)
        os.chmod(view, 0o755)
        for path in copies:
            _write_if_changed(os.path.join(view, _rel(path)), path)
        for link, target in symlinks.items():
            if link.startswith("/etc/"):
                _symlink(os.path.join(view, _rel(link)), target)
        for path in mount_points:
            if path.startswith("/etc/"):
                dest = os.path.join(view, _rel(path))
                if os.path.lexists(dest):
                    continue
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                if os.path.isdir(path):
                    os.mkdir(dest, 0o755)
                else:
                    os.close(os.open(dest, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
    finally:
        os.umask(old_umask)


def _write_if_changed(dest: str, source: str) -> None:
    try:
        with open(source, "rb") as fh:
            data = fh.read()
    except OSError:
        return  # unreadable here: the extension would not have got it either
    try:
        with open(dest, "rb") as fh:
            if fh.read() == data:
                return
    except OSError:
        pass
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = f"{dest}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, dest)


def _symlink(dest: str, target: str) -> None:
    try:
        if os.readlink(dest) == target:
            return
    except OSError:
        pass
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = f"{dest}.{os.getpid()}.tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, dest)
