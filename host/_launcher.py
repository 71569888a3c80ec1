"""hookwire sandbox launcher: confine this process, then exec the extension's command.

STANDALONE: the host runs it as

    python -I -S host/_launcher.py --spec '<json>' -- <command...>
    python -I -S host/_launcher.py --probe          # print what this machine can enforce, as JSON

It imports only the standard library (no `host` package, no pydantic): it runs on every extension start.
`apply_spec(spec)` is importable by path (the zygote's forked child applies the same layers with it).
The spec (built by host/_sandbox.py) says which layers to apply; each one is applied in this order, and if
any of them fails the launcher prints one line `hookwire-sandbox: extension 'NAME': cannot apply LAYER:
REASON` on stderr and exits 125 — it never runs the command with less confinement than the plan promised.

  1. process_limit   pids cgroup (v1 `pids` hierarchy, or v2 with `pids` delegated): pids.max = processes;
                     or RLIMIT_NPROC set inside the fresh user namespace (counts only the sandbox's tasks)
  2. user_namespace  unshare(CLONE_NEWUSER) mapping the current uid/gid onto themselves: the extension keeps
     net_namespace   its uid but loses every capability in the host's namespaces; with CLONE_NEWNET it gets
                     a network namespace with only a down loopback (Unix sockets on the filesystem still work)
  3. rlimits         RLIMIT_AS, RLIMIT_CPU (soft; hard = soft + 1 s -> SIGXCPU, then SIGKILL), RLIMIT_NOFILE
  4. no_new_privs    prctl(PR_SET_NO_NEW_PRIVS): setuid binaries and file capabilities grant nothing
  5. landlock_fs     Landlock: every write-type access is denied except beneath the listed writable
     landlock_scope  directories and files, and creating sockets beneath the listed socket directories
                     (reads and exec stay allowed everywhere); with ABI >= 6 also
                     scoped: no signals to processes outside the sandbox, no abstract Unix sockets out of it
Then os.execvp(command[0], command) with the inherited environment.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import sys
from typing import Any

EXIT_SANDBOX_FAILED = 125

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
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
        if fstype == "cgroup" and "pids" in options:
            rel = next((p for _, ctrl, p in own if "pids" in ctrl.split(",")), None)
            if rel is None:
                continue
            base = os.path.join(mountpoint, rel.lstrip("/"))
            if os.access(base, os.W_OK):
                return base, "cgroup v1 pids"
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
            if "pids" in delegated and os.access(base, os.W_OK):
                return base, "cgroup v2 pids"
    return None, "no writable pids cgroup (v1 pids hierarchy or v2 with pids delegated)"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def apply_pids_cgroup(base: str, name: str, maximum: int) -> None:
    root = os.path.join(base, "hookwire")
    try:
        os.makedirs(root, exist_ok=True)
        # Reap cgroups of launchers whose process is gone (rmdir refuses populated ones).
        for entry in os.listdir(root):
            pid_text = entry.rpartition("-")[2]
            if pid_text.isdigit() and not _pid_alive(int(pid_text)):
                try:
                    os.rmdir(os.path.join(root, entry))
                except OSError:
                    pass
        group = os.path.join(root, f"{name}-{os.getpid()}")
        os.makedirs(group, exist_ok=True)
        _write_file(os.path.join(group, "pids.max"), str(maximum))
        _write_file(os.path.join(group, "cgroup.procs"), str(os.getpid()))
    except OSError as exc:
        raise SandboxError("process_limit", f"pids cgroup under {base}: {exc}") from None


# ---------------------------------------------------------------- probe and main


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
    try:
        apply_namespaces(net=True)
        layers["user_namespace"] = {"available": True, "detail": "unshare(CLONE_NEWUSER)"}
        layers["net_namespace"] = {"available": True, "detail": "unshare(CLONE_NEWNET) in the user namespace"}
    except SandboxError as exc:
        layers["user_namespace"] = {"available": False, "detail": str(exc)}
        layers["net_namespace"] = {"available": False, "detail": str(exc)}
    return {"kernel": platform.release(), "machine": platform.machine(), "euid": os.geteuid(), "layers": layers}


def apply_spec(spec: dict[str, Any]) -> None:
    """Apply every layer the spec names to the calling process, in order; raises SandboxError.

    Also used by the zygote's forked child (host/_zygote_main.py loads this file by path): the calling
    process must be single-threaded (unshare(CLONE_NEWUSER) requires it).
    """
    proc = spec.get("process_limit")
    if proc and proc["mechanism"] == "pids_cgroup":
        apply_pids_cgroup(proc["base"], spec["extension_id"], int(proc["max"]))
    if spec.get("user_namespace") or spec.get("net_namespace"):
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
    apply_spec(spec)
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
