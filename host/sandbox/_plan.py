"""Sandbox planning: which confinement layers an extension process gets, and the argv that applies them.

`plan_launch` turns a manifest plus the sandbox mode into a `LaunchPlan`: the argv runs `host/sandbox/_launcher.py`
(a standalone stdlib script) which applies the layers in the child and then execs the extension's command.
Every layer is named; `enforced` lists what the launcher will apply (it exits 125 with a message on stderr
rather than run with less), `missing` lists what was wanted but this machine (or hookwire) cannot enforce.

Layers:
  rlimits          RLIMIT_CPU = limits.cpuSeconds, RLIMIT_NOFILE = limits.openFiles, and RLIMIT_DATA = limits.memoryMb
                   only where no memory cgroup can be made (never RLIMIT_AS: V8 and the JVM reserve far more address
                   space than they use, and Node aborts under a 512 MB RLIMIT_AS)
  process_limit    limits.processes (tasks: threads count too) via a pids cgroup, or, for a non-root uid,
                   RLIMIT_NPROC inside the user namespace. Root is exempt from RLIMIT_NPROC even inside a user
                   namespace (the kernel checks the global uid), so as root only a pids cgroup holds.
  user_namespace   a fresh user namespace mapping the uid onto itself: no capabilities in the host namespaces
  net_namespace    permissions.network == []: a fresh network namespace (no interfaces up; Unix sockets on
                   the filesystem, like the runtime dir's, still work)
  egress_proxy     permissions.network lists hosts: the extension gets a network namespace (net_namespace)
                   whose only way out is a relay on 127.0.0.1:EGRESS_PORT (host/sandbox/_egress_relay.py, started by
                   the launcher) to the host's per-extension proxy (host/sandbox/_egress_proxy.py) on a Unix socket;
                   HTTP(S)_PROXY/ALL_PROXY point there. A host list is never given the whole network: when
                   this layer can't be enforced, modes auto and required both refuse the extension (off runs it
                   unconfined).
  no_new_privs     PR_SET_NO_NEW_PRIVS
  landlock_fs      writes denied everywhere except beneath scratch_dir (everything) and runtime_dir (creating
                   sockets only: the extension binds its socket there, but cannot write or delete other
                   extensions' files) and /dev/null; reads and exec are allowed everywhere (Python needs its
                   stdlib, venv and the extension's code). /tmp is NOT writable: TMPDIR is set to scratch_dir.
  landlock_scope   Landlock ABI >= 6: no signals to processes outside the sandbox, no abstract Unix sockets
  pid_namespace    a fresh pid namespace whose pid 1 is the launcher's tiny init: the extension sees only its
                   own processes (fresh /proc); when it exits, or the host (or zygote) dies -- PR_SET_PDEATHSIG,
                   no cooperation needed -- the kernel kills everything left in it, setsid() children too
  fs_read_confinement  a private mount namespace whose root shows only system dirs, a minimal /etc, the
                   interpreter, the extension's cwd/dir, its scratch and its own runtime subdir (+ granted
                   sockets); the store, workspace, sibling extensions and other host sockets are not there
                   or are covered (host/sandbox/_fs.py). Also what makes `network: []` cover Unix sockets.
  memory_cgroup    limits.memoryMb for the extension's whole process tree (memory cgroup, swap included): resident
                   memory, what an extension really uses; no per-process memory rlimit on top of it
  scratch_quota    scratch is a tmpfs of limits.scratchMb inside the mount namespace (charged to the memory
                   cgroup); it is private to the extension's generation (the host does not see it)
"""

from __future__ import annotations

import functools
import json
import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from .._errors import SandboxUnavailable
from ..extensions._manifest import Manifest, sanitize_name
from ._cgroups import CgroupLease
from ._fs import fs_view
from ._realpath import real_path

SandboxMode = Literal["off", "auto", "required"]

LAUNCHER_PATH: Path = Path(__file__).resolve().with_name("_launcher.py")

_EGRESS = "egress_proxy"
EGRESS_PORT = 3128  # the relay's port inside the extension's (otherwise empty) network namespace
RELAY_PATH: Path = Path(__file__).resolve().with_name("_egress_relay.py")
_PROXY_VARS = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")
_PROBED = ("landlock_fs", "landlock_scope", "pids_cgroup", "no_new_privs", "user_namespace", "net_namespace",
           "pid_namespace", "fs_read_confinement", "memory_cgroup", "scratch_quota")


class LaunchPlan(BaseModel):
    """How to start one extension process: argv/env for the spawn, and what the sandbox enforces."""

    argv: list[str]
    env: dict[str, str]
    enforced: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    reasons: dict[str, str] = Field(default_factory=dict, description="missing layer -> why it is missing")
    cgroups: CgroupLease | None = Field(
        default=None, description="the cgroups the launcher creates (the host removes them after the process exits)"
    )


class _ProcessLimitSpec(BaseModel):
    mechanism: Literal["pids_cgroup", "rlimit_nproc"]
    max: int
    base: str | None = None


class _LandlockSpec(BaseModel):
    writable_dirs: list[str]
    socket_dirs: list[str]
    writable_files: list[str]
    scope: bool


class _MemorySpec(BaseModel):
    base: str
    bytes: int


class EgressSpec(BaseModel):
    """In-namespace egress: 127.0.0.1:port (and [::1]) relayed to the host's proxy Unix socket."""

    port: int = Field(ge=1, le=65535)
    socket: str


class _LauncherSpec(BaseModel):
    """The JSON the launcher reads (`--spec`)."""

    extension: str
    extension_id: str
    rlimits: dict[str, int]
    no_new_privs: bool
    user_namespace: bool
    net_namespace: bool
    process_limit: _ProcessLimitSpec | None
    landlock: _LandlockSpec | None
    host_pid: int | None = None
    pid_namespace: bool = False
    memory_cgroup: _MemorySpec | None = None
    fs: dict[str, Any] | None = None
    egress: EgressSpec | None = None


def _unavailable(reason: str) -> dict[str, Any]:
    return {"available": False, "detail": reason}


@functools.lru_cache(maxsize=1)
def _probe() -> dict[str, Any]:
    """Run the launcher's probe once per process (a throwaway child tries each layer)."""
    base: dict[str, Any] = {"kernel": platform.release(), "machine": platform.machine(), "euid": os.geteuid()}
    if sys.platform != "linux":
        why = f"sandbox layers need Linux (this is {sys.platform})"
        base["layers"] = {
            name: _unavailable(why)
            for name in _PROBED
        }
        return base
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(LAUNCHER_PATH), "--probe"], capture_output=True, text=True, timeout=20
        )
        probed = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        why = f"the sandbox probe failed: {exc}"
        base["layers"] = {
            name: _unavailable(why)
            for name in _PROBED
        }
        return base
    return probed


def sandbox_capabilities() -> dict[str, Any]:
    """Which layers this machine can enforce (for `hookwire doctor`); probed once per process, cached.

    Returns {"kernel", "machine", "euid", "launcher", "layers": {layer: {"available": bool, "detail": str}}}
    with the plan-level layers (rlimits, process_limit, user_namespace, net_namespace, egress_proxy,
    no_new_privs, landlock_fs, landlock_scope, pid_namespace, fs_read_confinement, memory_cgroup,
    scratch_quota); process_limit's detail names its mechanism.
    """
    caps = _capabilities()
    return {**caps, "layers": {name: dict(layer) for name, layer in caps["layers"].items()}}


@functools.lru_cache(maxsize=1)
def _capabilities() -> dict[str, Any]:
    """sandbox_capabilities, computed once (every plan reads it: five starts at once read it five times)."""
    probed = _probe()
    raw: dict[str, dict[str, Any]] = probed["layers"]
    layers: dict[str, dict[str, Any]] = {}
    linux = sys.platform == "linux"
    layers["rlimits"] = (
        {"available": True, "detail": "setrlimit CPU, NOFILE; DATA (memoryMb) where no memory cgroup"} if linux else _unavailable("not Linux")
    )
    pids = raw.get("pids_cgroup", _unavailable("not probed"))
    userns = raw.get("user_namespace", _unavailable("not probed"))
    if pids["available"]:
        layers["process_limit"] = {"available": True, "detail": f"pids cgroup ({pids['detail']})",
                                   "mechanism": "pids_cgroup", "base": pids.get("base")}
    elif probed.get("euid") != 0 and userns["available"]:
        layers["process_limit"] = {"available": True, "detail": "RLIMIT_NPROC inside the user namespace",
                                   "mechanism": "rlimit_nproc"}
    else:
        why = pids["detail"]
        if probed.get("euid") == 0:
            why = f"running as root, which the kernel exempts from RLIMIT_NPROC even in a user namespace; {why}"
        else:
            why = f"no user namespace ({userns['detail']}) and {why}"
        layers["process_limit"] = _unavailable(why)
    for name in ("user_namespace", "net_namespace", "no_new_privs", "landlock_fs", "landlock_scope",
                 "pid_namespace", "fs_read_confinement", "memory_cgroup", "scratch_quota"):
        layers[name] = dict(raw.get(name, _unavailable("not probed")))
    layers[_EGRESS] = _egress_layer(layers["net_namespace"])
    return {
        "kernel": probed.get("kernel", platform.release()),
        "machine": probed.get("machine", platform.machine()),
        "euid": probed.get("euid", os.geteuid()),
        "launcher": str(LAUNCHER_PATH),
        "layers": layers,
    }


def _egress_layer(net: dict[str, Any]) -> dict[str, Any]:
    """The egress_proxy layer: a network namespace plus the in-namespace relay to the host's proxy."""
    if not net.get("available"):
        return _unavailable(f"needs a network namespace ({net.get('detail', 'not probed')}); a network host list "
                            "is refused rather than given the whole network")
    if not RELAY_PATH.exists():
        return _unavailable(f"the in-namespace relay {RELAY_PATH.name} is missing; a network host list is refused "
                            "rather than given the whole network")
    return {"available": True, "detail": f"per-extension proxy on a Unix socket, reached through a relay on "
                                         f"127.0.0.1:{EGRESS_PORT} in the extension's network namespace"}


def _rlimits(manifest: Manifest, *, memory_cgroup: bool) -> dict[str, int]:
    """The launcher's rlimits: CPU and open files always; memory per process only without a memory cgroup.

    RLIMIT_DATA (private writable memory: heap, anonymous mappings) rather than RLIMIT_AS: V8 reserves ~1 GB of
    address space it never touches (its CodeRange) and the JVM reserves its whole heap and metaspace up front,
    so an address-space limit stops them at start while their resident use is small.
    """
    limits = manifest.limits
    out = {"CPU": limits.cpu_seconds, "NOFILE": limits.open_files}
    if not memory_cgroup:
        out["DATA"] = limits.memory_mb * 1024 * 1024
    return out


def egress_env(port: int = EGRESS_PORT) -> dict[str, str]:
    """The proxy variables an extension behind the egress proxy gets (they override any passed-through value)."""
    url = f"http://127.0.0.1:{port}"
    # NO_PROXY empty: nothing is reachable directly from the namespace, so every client should use the proxy.
    return {**{name: url for name in _PROXY_VARS}, "NO_PROXY": "", "no_proxy": ""}


def plan_launch(
    manifest: Manifest,
    *,
    command: list[str],
    env: dict[str, str],
    scratch_dir: Path,
    runtime_dir: Path,
    mode: SandboxMode,
    socket_dir: Path | None = None,
    cwd: Path | None = None,
    private_paths: Sequence[Path] = (),
    sockets: Sequence[Path] = (),
    egress: EgressSpec | None = None,
) -> LaunchPlan:
    """Plan the spawn of one extension: argv (through the launcher unless mode is "off") and the layers.

    mode "off": argv = command, nothing enforced. "auto": every layer this machine can enforce; `missing`
    names the rest. "required": raises SandboxUnavailable naming the extension and the first missing layer.
    `socket_dir`: the extension's private runtime subdir (default runtime_dir), the only place it may bind a
    socket; `cwd`: where it runs (default: this process's cwd); `private_paths`: host-private paths hidden
    from it even inside its cwd tree (store, workspace, siblings); `sockets`: host sockets it may reach
    (HostBridge); `egress`: the in-namespace relay to the host's egress proxy (its port and the Unix socket of
    the extension's running proxy, host/sandbox/_egress_proxy.py). A `permissions.network` host list needs `egress`
    and the egress_proxy layer; without them even auto refuses (SandboxUnavailable): never the whole network.
    """
    if mode == "off":
        return LaunchPlan(argv=list(command), env=dict(env), enforced=[], missing=[])
    if mode not in ("auto", "required"):
        raise ValueError(f"sandbox mode must be 'off', 'auto' or 'required', not {mode!r}")
    if not command:
        raise ValueError(f"extension {manifest.name!r}: empty command")

    layers = sandbox_capabilities()["layers"]
    hosts = bool(manifest.permissions.network)
    wanted = ["rlimits", "process_limit", "user_namespace", "net_namespace",
              *([_EGRESS] if hosts or egress is not None else []),
              "no_new_privs", "landlock_fs", "landlock_scope",
              "pid_namespace", "fs_read_confinement", "memory_cgroup", "scratch_quota"]
    enforced = [name for name in wanted if layers.get(name, {}).get("available")]
    if hosts and egress is None and _EGRESS in enforced:
        enforced.remove(_EGRESS)
        layers = {**layers, _EGRESS: _unavailable("no egress proxy socket was given for this extension")}
    missing = [name for name in wanted if name not in enforced]
    reasons = {name: str(layers.get(name, {}).get("detail", "unknown layer")) for name in missing}
    if "pid_namespace" not in enforced:  # the private root is built by the namespace's init
        for name in ("fs_read_confinement", "scratch_quota"):
            if name in enforced:
                enforced.remove(name)
                missing.append(name)
                reasons[name] = "needs pid_namespace"
    if mode == "required" and missing:
        raise SandboxUnavailable(manifest.name, missing[0], reasons[missing[0]])
    if hosts and _EGRESS in missing:  # never the whole network for a host list, even in auto
        raise SandboxUnavailable(manifest.name, _EGRESS, reasons[_EGRESS], mode=mode)
    if _EGRESS not in enforced:
        egress = None
    own_sockets = Path(real_path(socket_dir if socket_dir is not None else runtime_dir))

    limits = manifest.limits
    process_limit: _ProcessLimitSpec | None = None
    if "process_limit" in enforced:
        info = layers["process_limit"]
        process_limit = _ProcessLimitSpec(mechanism=info["mechanism"], max=limits.processes, base=info.get("base"))
    landlock: _LandlockSpec | None = None
    if "landlock_fs" in enforced:
        landlock = _LandlockSpec(
            writable_dirs=[real_path(scratch_dir)],
            socket_dirs=[str(own_sockets)],
            writable_files=["/dev/null"],
            scope="landlock_scope" in enforced,
        )
    spec = _LauncherSpec(
        extension=manifest.name,
        extension_id=sanitize_name(manifest.name)[:64],
        rlimits=_rlimits(manifest, memory_cgroup="memory_cgroup" in enforced) if "rlimits" in enforced else {},
        no_new_privs="no_new_privs" in enforced,
        user_namespace="user_namespace" in enforced,
        net_namespace="net_namespace" in enforced,
        process_limit=process_limit,
        landlock=landlock,
        host_pid=os.getpid(),
        pid_namespace="pid_namespace" in enforced,
        memory_cgroup=(
            _MemorySpec(base=layers["memory_cgroup"]["base"], bytes=limits.memory_mb * 1024 * 1024)
            if "memory_cgroup" in enforced else None
        ),
        fs=(
            fs_view(command=command, cwd=Path(cwd) if cwd is not None else Path.cwd(),
                    extension_dir=Path(manifest.source).parent if manifest.source else None,
                    runtime_subdir=own_sockets, scratch_dir=Path(scratch_dir), scratch_mb=limits.scratch_mb,
                    sockets=[Path(s) for s in sockets] + ([Path(egress.socket)] if egress is not None else []),
                    private=list(private_paths), shared_dir=Path(runtime_dir))
            | {"writes_landlocked": landlock is not None}
            if "fs_read_confinement" in enforced else None
        ),
        egress=egress,
    )
    plan_env = dict(env)
    if spec.egress is not None:
        plan_env.update(egress_env(spec.egress.port))
    if landlock is not None:
        plan_env["TMPDIR"] = real_path(scratch_dir)  # /tmp is not writable in the sandbox
    if "rlimits" in enforced:
        # glibc keeps up to 8 x cores thread arenas; two keep a small extension's resident memory small.
        plan_env.setdefault("MALLOC_ARENA_MAX", "2")
    # -S: the launcher needs only the stdlib; skipping site (and its .pth files) saves ~90 ms per start.
    argv = [sys.executable, "-I", "-S", str(LAUNCHER_PATH), "--spec", spec.model_dump_json(), "--", *command]
    cgroup_bases = ([process_limit.base] if process_limit is not None and process_limit.mechanism == "pids_cgroup"
                    and process_limit.base else []) + ([spec.memory_cgroup.base] if spec.memory_cgroup else [])
    cgroups = (CgroupLease(dirs=[os.path.join(b, "hookwire") for b in cgroup_bases], name=spec.extension_id)
               if cgroup_bases else None)
    return LaunchPlan(argv=argv, env=plan_env, enforced=enforced, missing=missing, reasons=reasons, cgroups=cgroups)
