"""hookwire sandbox launcher: confine this process, then exec the extension's command.

STANDALONE: the host runs it as

    python -I -S host/sandbox/_launcher.py --spec '<json>' -- <command...>
    python -I -S host/sandbox/_launcher.py --probe          # print what this machine can enforce, as JSON

It imports only the standard library (no `host` package, no pydantic): it runs on every extension start.
`apply_spec(spec)` is importable by path (the zygote's forked child applies the same layers with it).
The spec (built by host/sandbox/_plan.py) says which layers to apply; each one is applied in this order, and if
any of them fails the launcher prints one line `hookwire-sandbox: extension 'NAME': cannot apply LAYER:
REASON` on stderr and exits 125 — it never runs the command with less confinement than the plan promised.

  1. process_limit   pids cgroup (v1 `pids` hierarchy, or v2 with `pids` delegated): pids.max = processes;
                     or RLIMIT_NPROC set inside the fresh user namespace (counts only the sandbox's tasks)
  2. user_namespace  unshare(CLONE_NEWUSER) mapping the current uid/gid onto themselves: the extension keeps
     net_namespace   its uid but loses every capability in the host's namespaces; with CLONE_NEWNET it gets
                     a network namespace with only a down loopback (Unix sockets on the filesystem still work)
     memory_cgroup   a memory cgroup (v1 limit + memsw, or v2 memory.max + swap.max 0) for the whole tree
     pid_namespace   with pid_namespace (or egress): `contain` -- unshare(user | pid | mount [| net]), fork
     fs_read_...     a waiter (the pid the host sees) and an init (pid 1: private root via pivot_root, fresh
     egress          /proc, loopback + egress relay), which forks the extension; it drops every capability.
                     PR_SET_PDEATHSIG ties the tree to the host (or zygote). See the section comment below.
  3. rlimits         RLIMIT_CPU (soft; hard = soft + 1 s -> SIGXCPU, then SIGKILL), RLIMIT_NOFILE, and
                     RLIMIT_DATA when the plan has no memory cgroup (whatever the spec lists)
  4. no_new_privs    prctl(PR_SET_NO_NEW_PRIVS): setuid binaries and file capabilities grant nothing
  5. landlock_fs     Landlock: every write-type access is denied except beneath the listed writable
     landlock_scope  directories and files, and creating sockets beneath the listed socket directories
                     (reads and exec stay allowed everywhere); with ABI >= 6 also
                     scoped: no signals to processes outside the sandbox, no abstract Unix sockets out of it
Then os.execvp(command[0], command) with the inherited environment.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import resource
import sys
from typing import Any

EXIT_SANDBOX_FAILED = 125

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39

# Landlock syscalls share numbers on x86_64 and aarch64 (generic table).
_SYSCALLS = {
    "x86_64": (444, 445, 446),
    "aarch64": (444, 445, 446),
    "arm64": (444, 445, 446),
}
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class SandboxError(Exception):
    def __init__(self, layer: str, reason: str) -> None:
        super().__init__(f"cannot apply {layer}: {reason}")
        self.layer = layer


def _errno_text() -> str:
    err = ctypes.get_errno()
    return f"{os.strerror(err)} (errno {err})"


# ---------------------------------------------------------------- landlock


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _landlock_numbers() -> tuple[int, int, int] | None:
    return _SYSCALLS.get(platform.machine())


def landlock_abi() -> tuple[int, str]:
    """(ABI version, "") or (0, why not)."""
    numbers = _landlock_numbers()
    if numbers is None:
        return 0, f"no Landlock syscall numbers for machine {platform.machine()!r}"
    abi = _libc.syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    if abi < 0:
        return 0, f"landlock_create_ruleset: {_errno_text()} (kernel {platform.release()})"
    return int(abi), ""


def _write_rights(abi: int) -> int:
    rights = (
        FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG
        | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM
    )
    if abi >= 2:
        rights |= FS_REFER
    if abi >= 3:
        rights |= FS_TRUNCATE
    return rights


def apply_landlock(writable_dirs: list[str], socket_dirs: list[str], writable_files: list[str], scope: bool) -> None:
    abi, why = landlock_abi()
    if abi < 1:
        raise SandboxError("landlock_fs", why)
    create, add_rule, restrict = _landlock_numbers()  # type: ignore[misc]
    handled = _write_rights(abi)
    attr = _RulesetAttr(handled_access_fs=handled, handled_access_net=0, scoped=0)
    size = 8
    if scope:
        if abi < 6:
            raise SandboxError("landlock_scope", f"needs Landlock ABI 6, kernel has {abi}")
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = 24
    ruleset_fd = _libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset_fd < 0:
        raise SandboxError("landlock_fs", f"landlock_create_ruleset: {_errno_text()}")
    file_rights = FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)
    try:
        rules = (
            [(p, handled) for p in writable_dirs]
            + [(p, FS_MAKE_SOCK) for p in socket_dirs]
            + [(p, file_rights) for p in writable_files]
        )
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError as exc:
                raise SandboxError("landlock_fs", f"writable path {path}: {exc.strerror}") from None
            try:
                rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
                rc = _libc.syscall(add_rule, ctypes.c_int(ruleset_fd), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                                   ctypes.byref(rule), ctypes.c_uint32(0))
                if rc < 0:
                    raise SandboxError("landlock_fs", f"landlock_add_rule {path}: {_errno_text()}")
            finally:
                os.close(fd)
        if _libc.syscall(restrict, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)) < 0:
            raise SandboxError("landlock_fs", f"landlock_restrict_self: {_errno_text()}")
    finally:
        os.close(ruleset_fd)


# ---------------------------------------------------------------- namespaces, prctl, rlimits


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def apply_namespaces(net: bool) -> None:
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWUSER | (CLONE_NEWNET if net else 0)
    if _libc.unshare(ctypes.c_int(flags)) != 0:
        raise SandboxError("net_namespace" if net else "user_namespace", f"unshare: {_errno_text()}")
    try:
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write_file("/proc/self/gid_map", f"{gid} {gid} 1\n")
    except OSError as exc:
        raise SandboxError("user_namespace", f"writing uid/gid map: {exc}") from None


def set_no_new_privs() -> None:
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SandboxError("no_new_privs", f"prctl(PR_SET_NO_NEW_PRIVS): {_errno_text()}")


def apply_rlimits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        if name == "CPU":
            pair = (value, value + 1)
        else:
            pair = (value, value)
        try:
            resource.setrlimit(getattr(resource, f"RLIMIT_{name}"), pair)
        except (OSError, ValueError, AttributeError) as exc:
            raise SandboxError("rlimits", f"RLIMIT_{name}={value}: {exc}") from None


# ---------------------------------------------------------------- pids cgroup


def pids_cgroup_base() -> tuple[str | None, str]:
    """The directory under which this process may create a child pids cgroup, or (None, why not)."""
    return cgroup_base("pids")


def cgroup_base(controller: str) -> tuple[str | None, str]:
    """The directory under which this process may create a child cgroup of `controller`, or (None, why not)."""
    try:
        with open("/proc/self/cgroup") as fh:
            own = [line.rstrip("\n").split(":", 2) for line in fh]
        with open("/proc/self/mountinfo") as fh:
            mounts = [line.split() for line in fh]
    except OSError as exc:
        return None, f"cannot read cgroup information: {exc}"
    for fields in mounts:
        sep = fields.index("-")
        fstype, options, mountpoint = fields[sep + 1], fields[sep + 3].split(","), fields[4]
        if fstype == "cgroup" and controller in options:
            rel = next((p for _, ctrl, p in own if controller in ctrl.split(",")), None)
            if rel is None:
                continue
            base = os.path.join(mountpoint, rel.lstrip("/"))
            if os.access(base, os.W_OK):
                return base, f"cgroup v1 {controller}"
            return None, f"{base} is not writable"
        if fstype == "cgroup2":
            rel = next((p for hid, _, p in own if hid == "0"), None)
            if rel is None:
                continue
            base = os.path.join(mountpoint, rel.lstrip("/"))
            try:
                with open(os.path.join(base, "cgroup.subtree_control")) as fh:
                    delegated = fh.read().split()
            except OSError:
                continue
            if controller in delegated and os.access(base, os.W_OK):
                return base, f"cgroup v2 {controller}"
    return None, f"no writable {controller} cgroup (v1 {controller} hierarchy or v2 with {controller} delegated)"


def _fresh_cgroup(base: str, name: str) -> str:
    """Create this process's cgroup `<base>/hookwire/<name>-<pid>`; raises OSError.

    Nothing here removes it: the host does, once this process has exited (host/sandbox/_cgroups.py), and reaps
    those of processes that are gone when it starts its first extension (left by a host that was killed).
    Reaping here, on every start, contended with the other starts' joins for the kernel's cgroup lock.
    """
    return _cgroup_dir(base, name, os.getpid())


def _cgroup_dir(base: str, name: str, pid: int) -> str:
    root = os.path.join(base, "hookwire")
    os.makedirs(root, exist_ok=True)
    group = os.path.join(root, f"{name}-{pid}")
    os.makedirs(group, exist_ok=True)
    return group


def apply_pids_cgroup(base: str, name: str, maximum: int) -> None:
    try:
        group = _fresh_cgroup(base, name)
        _write_file(os.path.join(group, "pids.max"), str(maximum))
        _write_file(os.path.join(group, "cgroup.procs"), str(os.getpid()))
    except OSError as exc:
        raise SandboxError("process_limit", f"pids cgroup under {base}: {exc}") from None


def apply_memory_cgroup(base: str, name: str, limit: int) -> None:
    """Move this process into a fresh memory cgroup capped at `limit` bytes (v1 also caps memory+swap)."""
    try:
        group = _fresh_cgroup(base, name)
        _set_memory_limit(group, limit)
        _write_file(os.path.join(group, "cgroup.procs"), str(os.getpid()))
    except OSError as exc:
        raise SandboxError("memory_cgroup", f"memory cgroup under {base}: {exc}") from None


def _set_memory_limit(group: str, limit: int) -> None:
    if os.path.exists(os.path.join(group, "memory.max")):  # v2
        _write_file(os.path.join(group, "memory.max"), str(limit))
        if os.path.exists(os.path.join(group, "memory.swap.max")):
            _write_file(os.path.join(group, "memory.swap.max"), "0")
    else:
        _write_file(os.path.join(group, "memory.limit_in_bytes"), str(limit))
        memsw = os.path.join(group, "memory.memsw.limit_in_bytes")
        if os.path.exists(memsw):
            _write_file(memsw, str(limit))


# ---------------------------------------------------------------- containment: pid + mount namespaces
#
# contain(): unshare(user | pid | mount [| net]) and fork twice.
#
#   waiter  (the pid the host/zygote spawned; outside the pid namespace): forwards SIGTERM/SIGINT/SIGHUP/
#           SIGQUIT/SIGUSR1/SIGUSR2 to init, waits for it, then exits exactly as the extension did (same code,
#           or killed by the same signal). PR_SET_PDEATHSIG(SIGKILL): dies with its parent (host or zygote).
#   init    (pid 1 of the namespace): PR_SET_PDEATHSIG(SIGKILL) (a lifeline pipe closes the race with the
#           waiter's death), builds the private root (mount_root) and a fresh /proc, brings loopback up and
#           runs the egress relay when asked, forks the extension, reaps every orphan, forwards signals,
#           and exits when the extension exits -- the kernel then kills everything left in the namespace
#           (a setsid() grandchild too).
#   ext     (pid 2): drops every capability of the user namespace (bounding set, ambient, effective), so
#           it can neither unmount the denials nor mount anything; returns into apply_spec's remaining layers.

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41}
_FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
_DEV_NODES = ("null", "zero", "full", "random", "urandom")
_relay_module: Any = None

_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def load_relay() -> Any:
    """host/sandbox/_egress_relay.py, loaded by path once (the zygote calls this before it forks anything)."""
    global _relay_module
    if _relay_module is None:
        import importlib.util

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_egress_relay.py")
        spec = importlib.util.spec_from_file_location("_hookwire_egress_relay", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _relay_module = module
    return _relay_module


def _prctl(option: int, arg: int) -> int:
    return int(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0),
                           ctypes.c_ulong(0)))


def _die_with_parent(expected_parent: int | None) -> None:
    """SIGKILL when the parent dies; exit now if it already died (between our fork and this call)."""
    import signal

    if _prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise SandboxError("pid_namespace", f"prctl(PR_SET_PDEATHSIG): {_errno_text()}")
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(EXIT_SANDBOX_FAILED)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    rc = _libc.mount(source.encode() if source is not None else None, target.encode(),
                     fstype.encode() if fstype is not None else None, ctypes.c_ulong(flags),
                     data.encode() if data is not None else None)
    if rc != 0:
        raise SandboxError("fs_read_confinement", f"mount {source or fstype} on {target}: {_errno_text()}")


def _locked_flags(path: str) -> int:
    """The mount flags of `path`'s mount a user namespace may not clear on remount (else EPERM)."""
    flag = os.statvfs(path).f_flag
    out = 0
    for st, ms in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
                   (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME)):
        if flag & st:
            out |= ms
    return out


def _make_target(root: str, path: str, is_dir: bool) -> str:
    target = root + path
    if os.path.lexists(target):
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if is_dir:
        os.mkdir(target)
    else:
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
    return target


def _copy_in(root: str, path: str) -> None:
    """A small file copied into the root (mode 0644; read-only with the root's final remount)."""
    try:
        with open(path, "rb") as src:
            data = src.read()
        target = root + path
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fd = os.open(target, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError:
        pass  # a missing /etc file is the extension's problem, not a sandbox failure


def _bind(root: str, path: str, *, writable: bool, remount_ro: bool = True) -> None:
    try:
        is_dir = os.path.isdir(path)
        if not is_dir and not os.path.exists(path):
            return  # nothing to show
        target = _make_target(root, path, is_dir)
    except OSError as exc:
        raise SandboxError("fs_read_confinement", f"mount point for {path}: {exc.strerror}") from None
    _mount(path, target, None, MS_BIND | (0 if writable else MS_REC))
    if not writable and remount_ro:
        _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | _locked_flags(target))


def mount_root(fs: dict[str, Any], cwd: str) -> None:
    """Build the private root and pivot into it (init only: it also mounts the pid namespace's /proc).

    fs = {"stage": dir to mount the new root's tmpfs on (hidden by it), "etc": the host's /etc view to bind at
          /etc (host/sandbox/_etc.py) | None, "copy": [small files copied in],
          "ro": [paths], "rw": [paths], "deny": [paths], "symlinks": {path: target},
          "scratch": {"path", "size_mb"} | None, "writes_landlocked": bool (skip the per-bind ro remount)}
    Paths appear at the same place. Denied paths (inside a visible tree) are covered by an empty,
    mode-0 file or directory: with no capability left, opening them fails with EACCES.
    """
    stage = fs["stage"]
    # The umask is inherited from whoever spawned us (the host may hold a tight one for a moment): the root's
    # directories must be traversable whatever it was.
    saved_umask = os.umask(0o022)
    try:
        _build_root(fs, stage, cwd)
    finally:
        os.umask(saved_umask)


def _build_root(fs: dict[str, Any], stage: str, cwd: str) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    root = stage
    try:
        os.mkdir(root + "/.hw", 0o755)
        os.mkdir(root + "/.hw/void", 0)
        os.close(os.open(root + "/.hw/nothing", os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0))
        for link, target in fs.get("symlinks", {}).items():
            os.makedirs(os.path.dirname(root + link), exist_ok=True)
            os.symlink(target, root + link)
        for sub in ("tmp", "proc", "dev"):
            os.makedirs(root + "/" + sub, exist_ok=True)
    except OSError as exc:
        raise SandboxError("fs_read_confinement", f"building the root: {exc}") from None
    # With Landlock denying writes the per-bind read-only remount is redundant (and as costly as the bind).
    remount_ro = not fs.get("writes_landlocked", False)
    etc = fs.get("etc")
    if etc:  # the host's shared /etc view (copies, symlinks, mount points): one bind instead of a copy each
        target = root + "/etc"
        try:
            os.makedirs(target, exist_ok=True)
        except OSError as exc:
            raise SandboxError("fs_read_confinement", f"mount point for /etc: {exc.strerror}") from None
        _mount(etc, target, None, MS_BIND)
        if remount_ro:
            _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | _locked_flags(target))
    for path in fs.get("copy", []):
        _copy_in(root, path)
    for path in fs.get("ro", []):
        _bind(root, path, writable=False, remount_ro=remount_ro)
    for node in _DEV_NODES:
        _bind(root, "/dev/" + node, writable=True)
    for path in fs.get("rw", []):
        _bind(root, path, writable=True)
    for path in fs.get("deny", []):
        target = root + path
        if not os.path.lexists(target) or os.path.islink(target):
            continue
        _mount(root + ("/.hw/void" if os.path.isdir(target) else "/.hw/nothing"), target, None, MS_BIND)
    scratch = fs.get("scratch")
    if scratch:
        try:
            target = _make_target(root, scratch["path"], True)
        except OSError as exc:
            raise SandboxError("scratch_quota", f"mount point for scratch: {exc.strerror}") from None
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={int(scratch['size_mb'])}m,mode=0700")
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    number = _PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise SandboxError("fs_read_confinement", f"no pivot_root syscall number for {platform.machine()!r}")
    os.chdir(root)
    if _libc.syscall(number, b".", b".") != 0:
        raise SandboxError("fs_read_confinement", f"pivot_root: {_errno_text()}")
    if _libc.umount2(b".", MNT_DETACH) != 0:  # the old root, stacked under the new one
        raise SandboxError("fs_read_confinement", f"detaching the old root: {_errno_text()}")
    os.chdir("/")
    _mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    try:
        os.chdir(cwd)
    except OSError:
        os.chdir("/")


class _CapHeader(ctypes.Structure):  # module level: defining a ctypes class costs more than the syscalls
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_bounding_set() -> None:
    """Empty the capability bounding set (what an execve could ever gain). The effective capabilities stay: init
    still builds the root after this. ~40 credential copies (~1 ms): a spare does it before any request."""
    for cap in range(64):
        if _prctl(PR_CAPBSET_DROP, cap) != 0 and ctypes.get_errno() == errno.EINVAL:
            break


def _bounding_set_empty() -> bool:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("CapBnd:"):
                    return int(line.split()[1], 16) == 0
    except (OSError, ValueError):
        pass
    return False


def drop_capabilities() -> None:
    """No capability left in the user namespace: no mount/umount, no raw sockets, no DAC override."""
    if not _bounding_set_empty():  # a zygote child's init emptied it already (inherited through the fork)
        drop_bounding_set()
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
        raise SandboxError("pid_namespace", f"capset: {_errno_text()}")


def _exit_like(status: int) -> None:
    """Exit with a waitpid status: the same code, or killed by the same signal."""
    import signal

    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two can't be caught (signal() raises EINVAL)
            signal.signal(sig, signal.SIG_DFL)
        _prctl(4, 0)  # PR_SET_DUMPABLE 0: no core file for a relayed SIGSEGV/SIGQUIT
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 255)


def _waiter(init_pid: int, status_r: int) -> None:
    """Outside the namespace: forward signals to init, then exit as the extension did. Never returns."""
    import signal

    for name in _FORWARDED:
        signal.signal(getattr(signal, name), lambda sig, _frame: _kill_quiet(init_pid, sig))
    while True:
        try:
            _, status = os.waitpid(init_pid, 0)
            break
        except ChildProcessError:
            status = 255 << 8
            break
    reported = b""
    try:
        while True:
            chunk = os.read(status_r, 64)
            if not chunk:
                break
            reported += chunk
    except OSError:
        pass
    if reported.strip().isdigit():
        status = int(reported.strip())
    _exit_like(status)


def _kill_quiet(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _init(ext_pid: int, status_w: int, relay: Any) -> None:
    """pid 1: reap every child, forward signals to the extension, exit when it does. Never returns."""
    import signal

    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    pending: list[int] = []

    def forward(sig: int, _frame: Any) -> None:
        _kill_quiet(ext_pid, sig)

    for name in _FORWARDED:
        signal.signal(getattr(signal, name), forward)
    signal.signal(signal.SIGCHLD, lambda *_: None)

    def reap() -> bool:
        try:
            while os.read(wake_r, 4096):
                pass
        except OSError:
            pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return True
            if pid == 0:
                return False
            if pid == ext_pid:
                pending.append(status)
                return True

    if relay is not None:
        relay.serve(wake_r, reap)
    else:
        import select

        while not reap():
            select.select([wake_r], [], [])
    status = pending[0] if pending else 255 << 8
    try:
        os.write(status_w, str(status).encode())
    except OSError:
        pass
    os._exit(0)


def _fork() -> int:
    """fork(2) without Python's at-fork hooks: they cost ~5 ms with grpc imported (the zygote's children),
    twice per start. Safe here because the process is single-threaded (unshare(CLONE_NEWUSER) already
    required it) and the hooks had already run in this process's own os.fork() from the zygote (or it is the
    fresh launcher): no lock can be held by another thread, and nothing they reset has changed since."""
    pid = int(_libc.fork())
    if pid < 0:
        raise SandboxError("pid_namespace", f"fork: {_errno_text()}")
    return pid


def contain(spec: dict[str, Any], parent_pid: int | None) -> None:
    """Fork into the pid/mount namespaces (see the section comment); returns in the extension process only."""
    _die_with_parent(parent_pid)
    egress = spec.get("egress")
    net = bool(spec.get("net_namespace") or egress)
    pidns = bool(spec.get("pid_namespace"))
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWUSER | (CLONE_NEWNET if net else 0) | (CLONE_NEWPID | CLONE_NEWNS if pidns else 0)
    if _libc.unshare(ctypes.c_int(flags)) != 0:
        raise SandboxError("pid_namespace" if pidns else "net_namespace", f"unshare: {_errno_text()}")
    try:
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write_file("/proc/self/gid_map", f"{gid} {gid} 1\n")
    except OSError as exc:
        raise SandboxError("user_namespace", f"writing uid/gid map: {exc}") from None
    relay_mod = load_relay() if egress else None
    status_r, status_w = os.pipe2(os.O_CLOEXEC)
    life_r, life_w = os.pipe2(os.O_CLOEXEC)
    waiter_pid = os.getpid()
    init_pid = _fork()
    if init_pid:
        os.close(status_w)
        os.close(life_r)
        _waiter(init_pid, status_r)
    # init
    os.close(status_r)
    os.close(life_w)
    del waiter_pid
    _init_and_fork(spec, status_w, life_r, relay_mod)  # returns in the extension only


def _init_and_fork(spec: dict[str, Any], status_w: int, life_r: int, relay_mod: Any) -> None:
    """pid 1: the private root (or a fresh /proc), the egress relay, then fork the extension and serve as its init.
    `life_r` reads EOF once the parent that must outlive this process (the waiter or the zygote) is gone.
    Returns in the extension process only (capabilities dropped)."""
    import select

    egress = spec.get("egress")
    net = bool(spec.get("net_namespace") or egress)
    pidns = bool(spec.get("pid_namespace"))
    fs = spec.get("fs")
    try:
        _die_with_parent(None)
        if select.select([life_r], [], [], 0)[0]:  # the parent died before our prctl: nobody to serve
            os._exit(EXIT_SANDBOX_FAILED)
        if fs is not None:
            mount_root(fs, os.getcwd())
        elif pidns:
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        relay = None
        if egress:
            try:
                relay_mod.loopback_up()
                relay = relay_mod.Relay(relay_mod.open_listeners(int(egress["port"])), str(egress["socket"]))
            except OSError as exc:
                raise SandboxError("egress", f"relay on 127.0.0.1:{egress['port']}: {exc}") from None
        elif net:
            pass  # a network namespace with loopback down: nothing at all
        ext_pid = _fork()
    except SandboxError as exc:
        os.write(2, f"hookwire-sandbox: extension {spec.get('extension')!r}: {exc}\n".encode())
        os._exit(EXIT_SANDBOX_FAILED)
    except BaseException as exc:
        os.write(2, f"hookwire-sandbox: extension {spec.get('extension')!r}: containment failed: {exc}\n".encode())
        os._exit(EXIT_SANDBOX_FAILED)
    if ext_pid:
        _init(ext_pid, status_w, relay)
    # the extension
    os.close(status_w)
    os.close(life_r)
    if relay is not None:
        for lst in relay.listeners:
            lst.close()
    _die_with_parent(None)
    drop_capabilities()


# ---------------------------------------------------------------- the zygote's path: cloned into the namespaces
#
# The zygote (host/sandbox/_zygote_main.py) clone(2)s a child straight into fresh user, pid, mount (and net)
# namespaces: that child is init (pid 1) and the pid the host sees, so there is no waiter process and no
# unshare. It does what the waiter did (uid/gid maps, cgroups, no_new_privs) itself, then what init does.
# Its exit status is the extension's: init writes the extension's wait status to a pipe the zygote reads when it
# reaps init (pid 1 cannot die by a signal it sends itself). PR_SET_PDEATHSIG ties it to the zygote, whose
# lifeline pipe closes the race between the clone and the prctl.

_CLONE = {"x86_64": 56, "aarch64": 220, "arm64": 220}
_SIGCHLD = 17
#: This process's uid and gid, read at import (before any clone): in a fresh user namespace they read as the
#: overflow ids until the maps are written.
HOST_IDS = (os.geteuid(), os.getegid())


def clone_flags(spec: dict[str, Any]) -> int:
    """The namespaces a zygote child is cloned into for `spec`: 0 without a pid namespace (fork as usual)."""
    if not spec.get("pid_namespace"):
        return 0
    net = bool(spec.get("net_namespace") or spec.get("egress"))
    return CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | (CLONE_NEWNET if net else 0)


def clone_into_namespaces(flags: int) -> int:
    """clone(2) with `flags` and no new stack (fork-like): the child's pid in the parent, 0 in the child.

    A raw clone skips glibc's and Python's fork bookkeeping. That is safe for this child because the caller is
    single-threaded (no lock can be held by another thread). glibc caches each thread's id in its thread
    descriptor; its fork has the kernel write the child's (CLONE_CHILD_SETTID), and so does this clone once
    `find_tid_field` has found where it lives -- then the child may become the extension itself (pid 1, PID1),
    start threads and take pthread mutexes. Without it the child only runs init's code, and the extension is
    forked from it by glibc's fork. Python's own after-fork work is `after_fork_child`."""
    number = _CLONE.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, f"no clone syscall number for {platform.machine()!r}")
    ctid = None
    if _TID_ADDR is not None:
        flags |= CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID
        ctid = ctypes.c_void_p(_TID_ADDR)
    # x86_64: clone(flags, stack, parent_tid, child_tid, tls); aarch64: clone(flags, stack, parent_tid, tls, child_tid)
    args = (None, ctid, None) if platform.machine() == "x86_64" else (None, None, ctid)
    pid = int(_libc.syscall(ctypes.c_long(number), ctypes.c_ulong(flags | _SIGCHLD), None, *args, None))
    if pid < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"clone: {os.strerror(err)}")
    return pid


CLONE_CHILD_SETTID = 0x01000000
CLONE_CHILD_CLEARTID = 0x00200000
_TID_ADDR: int | None = None  # &THREAD_SELF->tid of this (single-threaded) process, once found
_TID_SCAN = 1024  # bytes of the thread descriptor searched (glibc's tid field sits at ~0x2d0 on x86_64)


def find_tid_field() -> int | None:
    """Where glibc keeps this thread's cached id: the offset in the thread descriptor (`pthread_self()`) that
    glibc's own fork rewrites with the child's pid. Found once, with a throwaway fork: the one offset holding this
    process's tid before the fork and the child's pid in the child. Sets the address `clone_into_namespaces`
    passes as CLONE_CHILD_SETTID; None (and nothing set) when there is not exactly one such offset."""
    global _TID_ADDR
    _libc.pthread_self.restype = ctypes.c_void_p
    base = _libc.pthread_self()
    if not base:
        return None
    words = len(ctypes.string_at(base, _TID_SCAN)) // 4
    ours = (ctypes.c_int32 * words).from_address(base)
    tid = threading_native_id()
    before = [i for i in range(words) if ours[i] == tid]
    r, w = os.pipe()
    pid = _fork_for_scan()
    if pid == 0:
        try:
            child = os.getpid()
            found = [i for i in before if ours[i] == child]
            os.write(w, json.dumps(found).encode())
        finally:
            os._exit(0)
    os.close(w)
    found = _child_json(r, pid)
    if not isinstance(found, list) or len(found) != 1:
        return None
    _TID_ADDR = base + 4 * int(found[0])
    return 4 * int(found[0])


def _child_json(r: int, pid: int) -> Any:
    """What a forked probe child wrote to the pipe `r` (its write end already closed here), decoded; None if it wrote
    no JSON. Closes `r` and reaps the child."""
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    try:
        return json.loads(data)
    except ValueError:
        return None


def threading_native_id() -> int:
    import threading

    return threading.get_native_id()


def _fork_for_scan() -> int:
    pid = int(_libc.fork())
    if pid < 0:
        raise OSError(ctypes.get_errno(), "fork")
    return pid


def enable_pid1() -> bool:
    """Make cloned Python extensions pid 1 of their namespace (no init process) when the cached thread id can be
    kept right (`find_tid_field`). The zygote calls this once, single-threaded, before it clones anything."""
    global PID1
    PID1 = _TID_ADDR is not None or find_tid_field() is not None
    return PID1


def after_fork_child() -> None:
    """What os.fork() does in its child and a raw clone plus glibc's fork skip: Python's runtime reinit and the
    at-fork hooks (threading's state, the random module's reseed, logging's locks)."""
    ctypes.pythonapi.PyOS_AfterFork_Child()


def _write_id_maps() -> None:
    """Map this process's host uid/gid onto themselves in the fresh user namespace it was cloned into."""
    uid, gid = HOST_IDS
    try:
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write_file("/proc/self/gid_map", f"{gid} {gid} 1\n")
    except OSError as exc:
        raise SandboxError("user_namespace", f"writing uid/gid map: {exc}") from None


#: A spare's cgroups are `<base>/hookwire/spare-<pid>` until a request renames them after its extension.
SPARE_NAME = "spare"


def prepare_spare(bases: list[str], outer_pid: int) -> dict[str, str]:
    """In a spare child of the zygote (host/sandbox/_zygote_spares.py), before any request: the uid/gid maps, and
    membership of a fresh `spare-<outer_pid>` cgroup under each base. Moving a task into a cgroup waits for an
    RCU grace period (5-20 ms here); a spare pays it while idle, so a start that takes the spare does not. It
    also empties its bounding set (the extension it forks inherits it). No limit is set yet (the spare runs only
    this code). Returns {base: group}; raises SandboxError."""
    _write_id_maps()
    drop_bounding_set()
    joined: dict[str, str] = {}
    for base in bases:
        try:
            group = _cgroup_dir(base, SPARE_NAME, outer_pid)
            _write_file(os.path.join(group, "cgroup.procs"), "0")
        except OSError as exc:
            raise SandboxError("process_limit", f"spare cgroup under {base}: {exc}") from None
        joined[base] = group
    return joined


def _own_cgroup(base: str, name: str, pid: int, joined: dict[str, str]) -> tuple[str, bool]:
    """This process's cgroup `<base>/hookwire/<name>-<pid>`, and whether it is a member already: a spare's group
    under `base` is renamed to it (cgroup v1 renames within a parent; else it is joined the usual way)."""
    spare = joined.pop(base, None)
    target = os.path.join(base, "hookwire", f"{name}-{pid}")
    if spare is not None:
        try:
            if spare != target:
                os.rename(spare, target)
            return target, True
        except OSError:
            pass  # v2 (no rename) or a stale group of that name: join it below, then drop the spare's
    group = _cgroup_dir(base, name, pid)
    if spare is not None:
        joined[base] = spare  # left once this process has joined `group` (removed then, by contain_cloned)
    return group, False


def contain_cloned(spec: dict[str, Any], outer_pid: int, status_w: int, life_r: int,
                   joined: dict[str, str] | None = None) -> None:
    """In the child the zygote cloned with `clone_flags(spec)`: become init and fork the extension.

    `outer_pid`: this process's pid as the host sees it (its cgroups are named after it, as the host expects);
    `status_w`: where the extension's wait status goes; `life_r`: the zygote's lifeline; `joined`: set for a
    spare (`prepare_spare` ran: maps written, {base: group} joined), whose groups are renamed and limited here.
    Returns in the extension process only."""
    spare = joined is not None
    joined = dict(joined or {})
    if not spare:
        _write_id_maps()
        drop_bounding_set()  # the extension forked from init inherits it empty
    proc = spec.get("process_limit")
    pids_base = proc["base"] if proc and proc["mechanism"] == "pids_cgroup" else None
    memory = spec.get("memory_cgroup")
    if spare and set(joined) != {b for b in (pids_base, memory["base"] if memory else None) if b}:
        raise SandboxError("process_limit", f"a spare in cgroups {sorted(joined)} taken for another cgroup set")
    if pids_base:
        try:
            group, member = _own_cgroup(pids_base, spec["extension_id"], outer_pid, joined)
            _write_file(os.path.join(group, "pids.max"), str(int(proc["max"])))
            if not member:
                _write_file(os.path.join(group, "cgroup.procs"), "0")  # "0": the writer, whatever its pid namespace
        except OSError as exc:
            raise SandboxError("process_limit", f"pids cgroup under {pids_base}: {exc}") from None
    if memory:
        try:
            group, member = _own_cgroup(memory["base"], spec["extension_id"], outer_pid, joined)
            _set_memory_limit(group, int(memory["bytes"]))
            if not member:
                _write_file(os.path.join(group, "cgroup.procs"), "0")
        except OSError as exc:
            raise SandboxError("memory_cgroup", f"memory cgroup under {memory['base']}: {exc}") from None
    for left in joined.values():  # a spare's group this process has moved out of
        try:
            os.rmdir(left)
        except OSError:
            pass  # the host's reaper removes it once its pid is gone
    if spec.get("no_new_privs"):
        set_no_new_privs()  # init too: nothing in the tree may gain privileges
    if PID1 and not spec.get("egress"):
        _become_pid1(spec, status_w, life_r)  # the extension is pid 1 itself: no init process
        return
    _init_and_fork(spec, status_w, life_r, load_relay() if spec.get("egress") else None)


# ---------------------------------------------------------------- the extension as pid 1 of its namespace
#
# With PID1 set (the zygote found glibc's cached thread id, so a raw clone can keep it right: `find_tid_field`),
# a cloned child does not fork an extension from an init: it IS the extension, pid 1 of its pid namespace. It
# builds its private root, drops every capability and goes on into the remaining layers and the extension's
# code. Its pid-1 duties (reaping orphaned grandchildren, the signals the kernel would otherwise drop) are
# host/sandbox/_pid1.py's, installed by the zygote child before the extension's code runs. When it exits the
# kernel kills everything left in the namespace, as it did when init exited. An egress relay needs an init to
# run it: those specs keep the init.

PID1 = False  # set by the zygote (`enable_pid1`)
#: In the extension that is pid 1: where it reports "killed by signal N" (a pid 1 can't die by a signal it sends
#: itself; host/sandbox/_pid1.py writes the wait status here, the zygote reads it when it reaps the process).
PID1_STATUS_FD: int | None = None


def _become_pid1(spec: dict[str, Any], status_w: int, life_r: int) -> None:
    """In the cloned child: the private root (or a fresh /proc), every capability dropped; returns as the
    extension (pid 1). Raises SandboxError."""
    import select

    global PID1_STATUS_FD
    _die_with_parent(None)
    if select.select([life_r], [], [], 0)[0]:  # the zygote died before our prctl: nobody to serve
        os._exit(EXIT_SANDBOX_FAILED)
    fs = spec.get("fs")
    if fs is not None:
        mount_root(fs, os.getcwd())
    elif spec.get("pid_namespace"):
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.close(life_r)
    drop_capabilities()
    PID1_STATUS_FD = status_w


# ---------------------------------------------------------------- probe and main


def _probe_containment() -> dict[str, dict[str, Any]]:
    """Try, in a throwaway child, what contain() needs: pid + mount namespaces, /proc, tmpfs, pivot_root."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        result: dict[str, Any] = {}
        try:
            uid, gid = os.geteuid(), os.getegid()
            if _libc.unshare(ctypes.c_int(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS)) != 0:
                raise SandboxError("pid_namespace", f"unshare: {_errno_text()}")
            _write_file("/proc/self/setgroups", "deny")
            _write_file("/proc/self/uid_map", f"{uid} {uid} 1\n")
            _write_file("/proc/self/gid_map", f"{gid} {gid} 1\n")
            inner = os.fork()
            if inner == 0:
                code = 0
                try:
                    _mount(None, "/", None, MS_REC | MS_PRIVATE)
                    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
                    stage = "/proc/self/fd"  # any existing directory: the tmpfs is private to this namespace
                    _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
                    os.mkdir(stage + "/old")
                    os.chdir(stage)
                    number = _PIVOT_ROOT.get(platform.machine())
                    if number is None or _libc.syscall(number, b".", b"old") != 0:
                        raise SandboxError("fs_read_confinement", f"pivot_root: {_errno_text()}")
                except SandboxError as exc:
                    os.write(2, str(exc).encode())
                    code = 3
                except OSError as exc:
                    os.write(2, f"cannot apply fs_read_confinement: {exc}".encode())
                    code = 3
                os._exit(code)
            _, status = os.waitpid(inner, 0)
            result["pid"] = {"available": True, "detail": "unshare(CLONE_NEWPID) + a fresh /proc"}
            ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            result["fs"] = {"available": ok, "detail": "mount namespace, tmpfs root, pivot_root" if ok
                            else "mounting a private root failed in the probe"}
        except (SandboxError, OSError) as exc:
            result["pid"] = {"available": False, "detail": str(exc)}
            result["fs"] = {"available": False, "detail": str(exc)}
        os.write(w, json.dumps(result).encode())
        os._exit(0)
    os.close(w)
    result = _child_json(r, pid)
    if not isinstance(result, dict):
        result = {"pid": {"available": False, "detail": "probe child failed"},
                  "fs": {"available": False, "detail": "probe child failed"}}
    return {
        "pid_namespace": result["pid"],
        "fs_read_confinement": result["fs"],
        "scratch_quota": {"available": result["fs"]["available"],
                          "detail": "a size-limited tmpfs in the mount namespace" if result["fs"]["available"]
                          else result["fs"]["detail"]},
    }


def probe() -> dict[str, Any]:
    """What this machine lets an unprivileged-by-namespace process enforce (run in a throwaway process)."""
    layers: dict[str, dict[str, Any]] = {}
    abi, why = landlock_abi()
    layers["landlock_fs"] = {"available": abi >= 1, "detail": f"Landlock ABI {abi}" if abi else why}
    layers["landlock_scope"] = {
        "available": abi >= 6,
        "detail": f"Landlock ABI {abi}" + ("" if abi >= 6 else " (scoping needs ABI 6)"),
    }
    base, detail = pids_cgroup_base()
    pids_ok = False
    if base is not None:
        test = os.path.join(base, "hookwire", f"probe-{os.getpid()}")
        try:
            os.makedirs(test)
            pids_ok = os.path.exists(os.path.join(test, "pids.max"))
            os.rmdir(test)
        except OSError as exc:
            detail = f"cannot create a cgroup under {base}: {exc.strerror}"
    layers["pids_cgroup"] = {"available": pids_ok, "detail": detail, "base": base if pids_ok else None}
    try:
        set_no_new_privs()
        layers["no_new_privs"] = {"available": True, "detail": "prctl(PR_SET_NO_NEW_PRIVS)"}
    except SandboxError as exc:
        layers["no_new_privs"] = {"available": False, "detail": str(exc)}
    layers.update(_probe_containment())
    memory_base, memory_detail = cgroup_base("memory")
    memory_ok = False
    if memory_base is not None:
        test = os.path.join(memory_base, "hookwire", f"probe-{os.getpid()}")
        try:
            os.makedirs(test)
            memory_ok = any(os.path.exists(os.path.join(test, f)) for f in ("memory.limit_in_bytes", "memory.max"))
            os.rmdir(test)
        except OSError as exc:
            memory_detail = f"cannot create a cgroup under {memory_base}: {exc.strerror}"
    layers["memory_cgroup"] = {"available": memory_ok, "detail": memory_detail,
                               "base": memory_base if memory_ok else None}
    try:
        apply_namespaces(net=True)
        layers["user_namespace"] = {"available": True, "detail": "unshare(CLONE_NEWUSER)"}
        layers["net_namespace"] = {"available": True, "detail": "unshare(CLONE_NEWNET) in the user namespace"}
    except SandboxError as exc:
        layers["user_namespace"] = {"available": False, "detail": str(exc)}
        layers["net_namespace"] = {"available": False, "detail": str(exc)}
    return {"kernel": platform.release(), "machine": platform.machine(), "euid": os.geteuid(), "layers": layers}


def apply_spec(spec: dict[str, Any], parent_pid: int | None = None,
               cloned: tuple[Any, ...] | None = None) -> None:
    """Apply every layer the spec names to the calling process, in order; raises SandboxError.

    Also used by the zygote's forked child (host/sandbox/_zygote_main.py loads this file by path): the calling
    process must be single-threaded (unshare(CLONE_NEWUSER) requires it). With `pid_namespace` (or
    `egress`) the caller FORKS twice (see host/_contain... `contain`): this function then returns only in
    the process that becomes the extension; the others never return. `parent_pid` is the caller's parent
    (the host or the zygote), whose death must take the sandbox down. `cloned` = (outer pid, status fd, lifeline
    fd[, a spare's joined cgroups]): the caller is a zygote child already cloned into `clone_flags(spec)` (see
    `contain_cloned`).
    """
    proc = spec.get("process_limit")
    memory = spec.get("memory_cgroup")
    if cloned is not None:
        contain_cloned(spec, *cloned)  # returns in the extension process only
    else:
        if proc and proc["mechanism"] == "pids_cgroup":
            apply_pids_cgroup(proc["base"], spec["extension_id"], int(proc["max"]))
        if memory:
            apply_memory_cgroup(memory["base"], spec["extension_id"], int(memory["bytes"]))
        if spec.get("pid_namespace") or spec.get("egress"):
            if spec.get("no_new_privs"):
                set_no_new_privs()  # the waiter and init too: nothing in the tree may gain privileges
            contain(spec, parent_pid)  # returns in the extension process only
        elif spec.get("user_namespace") or spec.get("net_namespace"):
            apply_namespaces(net=bool(spec.get("net_namespace")))
    rlimits = dict(spec.get("rlimits") or {})
    if proc and proc["mechanism"] == "rlimit_nproc":
        rlimits["NPROC"] = int(proc["max"])
    apply_rlimits(rlimits)
    if spec.get("no_new_privs"):
        set_no_new_privs()
    landlock = spec.get("landlock")
    if landlock:
        apply_landlock(landlock["writable_dirs"], landlock.get("socket_dirs", []), landlock["writable_files"],
                       bool(landlock.get("scope")))


def run(spec: dict[str, Any], command: list[str]) -> None:
    apply_spec(spec, spec.get("host_pid"))
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"hookwire-sandbox: extension {spec.get('extension')!r}: cannot execute {command[0]}: {exc.strerror}",
              file=sys.stderr, flush=True)
        sys.exit(127)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--probe"]:
        print(json.dumps(probe()), flush=True)
        return
    if len(argv) < 4 or argv[0] != "--spec" or argv[2] != "--":
        print("usage: _launcher.py --spec JSON -- COMMAND... | --probe", file=sys.stderr)
        sys.exit(2)
    spec = json.loads(argv[1])
    command = argv[3:]
    try:
        run(spec, command)
    except SandboxError as exc:
        print(f"hookwire-sandbox: extension {spec.get('extension')!r}: {exc}", file=sys.stderr, flush=True)
        sys.exit(EXIT_SANDBOX_FAILED)


if __name__ == "__main__":
    main(sys.argv[1:])
