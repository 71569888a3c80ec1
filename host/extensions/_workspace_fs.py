"""Open paths beneath a directory without a check-then-use race (the HostBridge's workspace file access).

Invariant: `open_beneath(root_fd, relative, ...)` returns a descriptor of a file that lies beneath `root_fd` at
the moment it is opened, or raises. A symlink that stays beneath the root is followed; one that leads out (an
absolute target, or `..` past the root) raises `PathEscapes`, and so does a `..` past the root in the path.
Nothing is resolved first and used later, so swapping a symlink between a check and the use gains nothing.

How: `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` (Linux >= 5.6; syscall 437 on x86_64 and aarch64, via
ctypes) — the kernel resolves the whole path and refuses anything that leaves the root. Where openat2 is
missing (older kernel, other architecture, a seccomp filter answering ENOSYS/EPERM), an fd-relative walk in
Python: each component is opened relative to the descriptor of its parent with O_NOFOLLOW, symlinks are read
and their (relative) target resolved the same way, `..` pops a held descriptor. What remains open in the walk: a
directory already walked through that another process renames to outside the root meanwhile (that process needs
write access outside the root); openat2 refuses that case too (EAGAIN, retried, then an error).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
from functools import cache

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = {"x86_64": 437, "amd64": 437, "aarch64": 437, "arm64": 437}.get(platform.machine().lower())
_MAX_LINKS = 40  # like the kernel's MAXSYMLINKS
_EAGAIN_RETRIES = 8


class PathEscapes(PermissionError):
    """The path (or a symlink on it) leads out of the root directory."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _openat2(dir_fd: int, path: str, flags: int, mode: int, resolve: int) -> int:
    tmpfile = getattr(os, "O_TMPFILE", 0)  # includes the O_DIRECTORY bit: test all of it
    creates = bool(flags & os.O_CREAT) or (tmpfile != 0 and flags & tmpfile == tmpfile)
    how = _OpenHow(flags, mode if creates else 0, resolve)  # a mode without O_CREAT is EINVAL for openat2
    fd = _libc().syscall(_SYS_OPENAT2, dir_fd, os.fsencode(path), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


@cache
def openat2_available() -> bool:
    """True when this kernel (and any seccomp filter) lets us call openat2."""
    if _SYS_OPENAT2 is None:
        return False
    try:
        os.close(_openat2(-100, "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, 0, RESOLVE_NO_MAGICLINKS))
    except OSError:
        return False
    return True


def open_beneath(root_fd: int, relative: str, flags: int, mode: int = 0o644, *, use_openat2: bool | None = None) -> int:
    """A new descriptor (O_CLOEXEC) of `relative` beneath `root_fd`. Raises PathEscapes or OSError (ENOENT...).

    `use_openat2`: None picks openat2 where available; False forces the fd-relative walk (tests use both).
    """
    if os.path.isabs(relative):
        raise PathEscapes(errno.EXDEV, "absolute path", relative)
    flags |= os.O_CLOEXEC
    if use_openat2 is None:
        use_openat2 = openat2_available()
    if not use_openat2:
        return _walk(root_fd, relative, flags, mode)
    for _ in range(_EAGAIN_RETRIES):
        try:
            return _openat2(root_fd, relative or ".", flags, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
        except OSError as exc:
            if exc.errno == errno.EXDEV:
                raise PathEscapes(errno.EXDEV, "leads out of the root", relative) from None
            if exc.errno != errno.EAGAIN:  # EAGAIN: a rename raced the lookup; the kernel asks us to retry
                raise
    raise OSError(errno.EAGAIN, "the path kept changing while it was opened", relative)


def _walk(root_fd: int, relative: str, flags: int, mode: int) -> int:
    """open_beneath without openat2: one component at a time, relative to held directory descriptors."""
    stack = [os.dup(root_fd)]
    parts = relative.split("/")
    links = 0
    try:
        while parts:
            comp = parts.pop(0)
            if comp in ("", "."):
                continue
            if comp == "..":
                if len(stack) == 1:
                    raise PathEscapes(errno.EXDEV, "`..` leads out of the root", relative)
                os.close(stack.pop())
                continue
            if not any(p not in ("", ".") for p in parts):  # the last component: open it as asked
                as_dir = os.O_DIRECTORY if parts else 0  # a trailing "/" names a directory
                try:
                    return os.open(comp, flags | as_dir | os.O_NOFOLLOW, mode, dir_fd=stack[-1])
                except OSError as exc:  # a symlink: ELOOP, or ENOTDIR with O_DIRECTORY
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                    if not stat.S_ISLNK(os.stat(comp, dir_fd=stack[-1], follow_symlinks=False).st_mode):
                        raise
            else:
                fd = os.open(comp, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=stack[-1])
                kind = os.fstat(fd).st_mode
                if stat.S_ISDIR(kind):
                    stack.append(fd)
                    continue
                os.close(fd)
                if not stat.S_ISLNK(kind):
                    raise NotADirectoryError(errno.ENOTDIR, "not a directory", comp)
            links += 1
            if links > _MAX_LINKS:
                raise OSError(errno.ELOOP, "too many levels of symbolic links", relative)
            target = os.readlink(comp, dir_fd=stack[-1])
            if target.startswith("/"):
                raise PathEscapes(errno.EXDEV, "a symlink to an absolute path leads out of the root", relative)
            parts = target.split("/") + parts
        return os.open(".", flags, mode, dir_fd=stack[-1])  # the path named a directory on the stack
    finally:
        for fd in stack:
            os.close(fd)
