"""What an extension's private root shows: read-only system and interpreter paths, its own tree, its sockets.

`fs_view` computes, on the host, the `fs` part of the launcher spec (host/sandbox/_launcher.py `mount_root` applies it
inside a mount namespace). Invariants:
  - an allowlist: only the listed paths exist in the new root (plus /dev null/zero/full/random/urandom, an
    empty read-only /tmp, a fresh /proc of the extension's own pid namespace, and its scratch tmpfs);
  - every path appears at the same absolute path as on the host (sockets, cwd, sys.path keep working);
  - `private` paths (the store and its sidecars, the workspace, other extensions' trees and manifests,
    sibling runtime subdirs) are covered by an empty mode-0 node when they sit inside a visible tree --
    unless they contain something the extension is shown on purpose (its own cwd, code or runtime subdir);
  - the user's home is never listed as a whole: only the interpreter prefix inside it (pyenv) is.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from ._etc import etc_view
from ._realpath import real_path as _real

# Top-level system directories shown read-only (symlinks such as /bin -> usr/bin are recreated as symlinks).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/node")
# /etc entries a process commonly needs (name resolution, TLS roots, users, time zone, the loader's cache).
ETC_ENTRIES = (
    "ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies", "hosts", "host.conf", "resolv.conf",
    "nsswitch.conf", "gai.conf", "passwd", "group", "localtime", "timezone", "ld.so.cache", "ld.so.conf",
    "ld.so.conf.d", "alternatives", "mime.types", "protocols", "services", "os-release", "locale.alias",
    "locale.conf", "default/locale",
)
SIDECARS = ("-wal", "-shm", "-journal")
_MAX_COPY = 256 * 1024
SYSTEM_VIEW_TTL_S = 30.0  # how long the scan of the system dirs and /etc is reused (it is the same for every start)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _within(path: str, roots: set[str]) -> bool:
    """`_under(path, r)` for some r in `roots` (normalized absolute paths): a walk up path's ancestors."""
    if path in roots:
        return True
    cut = path.rfind("/")
    while cut > 0:
        path = path[:cut]
        if path in roots:
            return True
        cut = path.rfind("/")
    return "/" in roots


def _with_ancestors(paths: list[str]) -> set[str]:
    """Every path in `paths` and all their ancestors: `c in _with_ancestors(keep)` is `any(_under(k, c) ...)`."""
    out: set[str] = set()
    for path in paths:
        while path not in out:
            out.add(path)
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    return out


@functools.lru_cache(maxsize=1)
def _python_paths() -> tuple[str, ...]:
    """The interpreter's prefixes and the SDK's source dir (an editable install lives outside the prefixes).

    Not the host's other sys.path entries: the host app's own directory may hold its .env or its store.
    """
    paths = {_real(sys.base_prefix), _real(sys.prefix), _real(sys.executable)}
    for name in ("extension_sdk",):
        spec = importlib.util.find_spec(name)
        for loc in (spec.submodule_search_locations or []) if spec is not None else []:
            paths.add(_real(loc))
    return tuple(sorted(paths))


class _SystemView:
    """What every extension's root shows of the system: read-only dirs, small /etc files to copy, symlinks.

    Scanning it costs ~40 lstat/realpath calls; starting five extensions at once repeated that five times on
    the host's event loop, so it is kept for SYSTEM_VIEW_TTL_S and then scanned again.
    """

    def __init__(self) -> None:
        self.generation = 0  # bumped by every scan (the shared /etc view re-syncs then)
        self.at = -SYSTEM_VIEW_TTL_S
        self.ro: tuple[str, ...] = ()
        self.copies: tuple[str, ...] = ()
        self.symlinks: dict[str, str] = {}

    def get(self) -> tuple[tuple[str, ...], tuple[str, ...], dict[str, str]]:
        now = time.monotonic()
        if now - self.at >= SYSTEM_VIEW_TTL_S:
            self.ro, self.copies, self.symlinks = _scan_system()
            self.at = now
            self.generation += 1
        return self.ro, self.copies, dict(self.symlinks)


def _scan_system() -> tuple[tuple[str, ...], tuple[str, ...], dict[str, str]]:
    ro: list[str] = []
    symlinks: dict[str, str] = {}
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            symlinks[d] = os.readlink(d)
        elif os.path.isdir(d):
            ro.append(d)
    copies: list[str] = []  # small regular /etc files: copied into the root (cheaper than a bind mount each)
    for entry in ETC_ENTRIES:
        path = "/etc/" + entry
        if not os.path.lexists(path):
            continue
        if os.path.islink(path):
            symlinks[path] = _real(path)
            path = _real(path)
        if os.path.isfile(path) and path.startswith("/etc/") and os.path.getsize(path) <= _MAX_COPY:
            copies.append(path)
        else:
            ro.append(path)
    return tuple(ro), tuple(copies), symlinks


_SYSTEM = _SystemView()


def _command_paths(command: list[str]) -> list[str]:
    """The command's executable (resolved through PATH) and its installation prefix (node's lib dir)."""
    if not command:
        return []
    if os.sep in command[0] and not os.path.isabs(command[0]):
        return list(_executable_paths(command[0]))  # relative to this process's cwd: not kept
    key = (command[0], None if os.path.isabs(command[0]) else os.environ.get("PATH"))
    found = _FOUND.get(key)
    if found is None:
        exe = command[0] if key[1] is None and os.path.isabs(command[0]) else shutil.which(key[0], path=key[1])
        if exe is None:
            return []  # not kept: it may be installed later
        found = _FOUND[key] = _executable_paths(exe)
    return list(found)


_FOUND: dict[tuple[str, str | None], tuple[str, ...]] = {}  # a PATH lookup is ~20 stat calls: once per command


def _executable_paths(exe: str) -> tuple[str, ...]:
    real = _real(exe)
    out = [real]
    bin_dir = os.path.dirname(real)
    if os.path.basename(bin_dir) == "bin":
        prefix = os.path.dirname(bin_dir)
        if prefix not in ("/", "/usr"):
            out.append(prefix)
    return tuple(out)


def _script_dir(command: list[str], cwd: Path) -> str | None:
    """The directory of the script an interpreter runs (`python x.py`, `node x.js`): the extension's code."""
    if len(command) < 2 or command[1].startswith("-"):
        return None
    path = Path(command[1]) if os.path.isabs(command[1]) else Path(cwd) / command[1]
    return _real(path.parent) if path.is_file() else None


def fs_view(
    *,
    command: list[str],
    cwd: Path,
    extension_dir: Path | None,
    runtime_subdir: Path,
    scratch_dir: Path,
    scratch_mb: int,
    sockets: list[Path],
    private: list[Path],
    shared_dir: Path | None = None,
) -> dict[str, Any]:
    """The launcher's `fs` spec for one extension (see the module docstring).

    `shared_dir`: where the host may keep the /etc view all its extensions share (host/sandbox/_etc.py); without
    it (or when it can't be written, or something the extension is shown lies under /etc) the launcher copies the
    /etc files into each root instead.
    """
    ro, copies, symlinks = _SYSTEM.get()
    command_paths = _command_paths(command)
    shown = [_real(cwd)] + ([_real(extension_dir)] if extension_dir is not None else [])
    script = _script_dir(command, cwd)
    if script is not None:
        shown.append(script)
    wanted = [*ro, *_python_paths(), *command_paths, *shown]
    # Parents first; a path inside an already-shown tree is visible through it.
    ordered: list[str] = []
    done: set[str] = set()
    for path in sorted(set(wanted), key=lambda p: (p.count("/"), p)):
        if _within(path, done):
            continue
        ordered.append(path)
        done.add(path)
    own_runtime = _real(runtime_subdir)
    socket_paths = [_real(s) for s in sockets]
    rw = [own_runtime, *socket_paths]
    keep = _with_ancestors([*shown, own_runtime, *socket_paths, *command_paths])
    deny: list[str] = []
    for p in private:
        real = _real(p)
        candidates = [real] + ([real + s for s in SIDECARS] if os.path.isfile(real) else [])
        for c in candidates:
            if c in keep:
                continue  # it contains what the extension must see (e.g. the workspace is its cwd)
            if _within(c, done) and os.path.lexists(c):
                deny.append(c)
    etc_mounts = [p for p in ordered if p.startswith("/etc/")]
    scratch = _real(scratch_dir)
    own = [p for p in [*ordered, *rw, *deny, scratch] if p not in etc_mounts]
    view = None
    if shared_dir is not None and not any(_under(p, "/etc") for p in own):
        view = etc_view(shared_dir, _SYSTEM.generation, copies=copies, symlinks=symlinks, mount_points=etc_mounts)
    if view is not None:
        copies = ()
        symlinks = {link: target for link, target in symlinks.items() if not link.startswith("/etc/")}
    return {
        "stage": scratch,
        "etc": view,
        "copy": list(copies),
        "ro": ordered,
        "rw": rw,
        "deny": sorted(set(deny)),
        "symlinks": symlinks,
        "scratch": {"path": scratch, "size_mb": scratch_mb},
    }
