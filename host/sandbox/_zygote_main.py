"""hookwire zygote: a pre-imported Python process that forks Python extensions (the child side of host/sandbox/_zygote.py).

STANDALONE: the host runs it as

    python host/sandbox/_zygote_main.py <title room>

with a minimal environment (PATH, LANG, LC_ALL, TZ: nothing secret) and a SOCK_SEQPACKET control socket as its
stdin. It imports grpc, grpc.aio, grpc_health, extension_sdk and the generated protos BEFORE any gRPC object
exists (so it has no threads), reports `{"op": "ready"}`, then serves spawn requests until its stdin closes
(the host's lifeline: when the host dies, the zygote exits).

Protocol (one JSON object per datagram):
  host -> zygote  {"op": "spawn", "id": N, "clone": FLAGS} with 4 fds (SCM_RIGHTS): child stdin, stdout, stderr,
                  config socket; FLAGS (the launcher's `clone_flags` of the spec, 0: fork) are the namespaces the
                  child is cloned straight into: it is then pid 1 of its pid namespace, the extension's init;
                  optional "cgroups" (the cgroup bases the child joins) and "spares" (how many spares it may keep):
                  a request may take a spare, cloned and prepared ahead of it (host/sandbox/_zygote_spares.py)
                  {"op": "busy"} | {"op": "idle"} (no fds, no reply): the host has starts in flight / has none;
                  no spare is refilled while it is busy (for at most the spares' REFILL_BUSY_S)
  zygote -> host  {"op": "ready", "pid", "threads", "imported"}   once, after the pre-imports
                  {"op": "spawned", "id", "pid"} | {"op": "failed", "id", "error"}
                  {"op": "exit", "pid", "code"}   code as asyncio reports it (negative: killed by that signal)

The zygote never sees an extension's environment (it carries the extension's token): the forked child reads
its config from the config socket, which the host writes to directly. Config: {"name", "kind": "module"|"path",
"target", "argv" (sys.argv), "title" (the command line to show in /proc/PID/cmdline), "cwd", "env", "spec" (the
launcher's sandbox spec or null)}.

The child: setsid, stdio onto 0/1/2, os.environ replaced wholesale, chdir, the launcher's sandbox layers (the
same `apply_spec` as host/sandbox/_launcher.py; failure: its message on stderr, exit 125), then runpy, exiting like
a real interpreter would (SystemExit code, traceback and 1 on an exception), always through os._exit.
"""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

PRELOAD = (
    "asyncio", "concurrent.futures", "concurrent.futures.thread", "argparse", "logging", "runpy", "queue",
    "hashlib", "hmac",
    "grpc", "grpc.aio", "grpc_health.v1.health", "grpc_health.v1.health_pb2", "grpc_health.v1.health_pb2_grpc",
    "extension_sdk", "extension_sdk._schema_check", "extension_sdk.proto.extension_pb2",
    "extension_sdk.proto.extension_pb2_grpc",
    "extension_sdk.proto.host_bridge_pb2", "extension_sdk.proto.host_bridge_pb2_grpc",
    # what Extension.serve() imports lazily: every child paid these imports itself (~10 ms of CPU each)
    "extension_sdk._process", "extension_sdk._extension_server", "extension_sdk._listen",
    "extension_sdk._stream_bridge", "extension_sdk._reply_limit",
)
EXIT_SANDBOX_FAILED = 125
EXIT_SETUP_FAILED = 127
M_ARENA_MAX = -8
_SPARES: Any = None  # host/sandbox/_zygote_spares.py, loaded by path in main()
_PID1: Any = None  # host/sandbox/_pid1.py, loaded by path in main()
_MAX_CONFIG = 16 * 1024 * 1024
_BUSY = b'{"op": "busy"}'  # host/sandbox/_zygote.py sends exactly these bytes
_IDLE = b'{"op": "idle"}'


def _load_launcher() -> ModuleType:
    """host/sandbox/_launcher.py, loaded by path (the `host` package must not be imported here)."""
    return _load("_launcher.py", "_hookwire_launcher")


def _load(filename: str, name: str) -> ModuleType:
    """A standalone module of host/sandbox, loaded by path."""
    path = Path(__file__).resolve().with_name(filename)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _preload() -> list[str]:
    done = []
    for name in PRELOAD:
        try:
            __import__(name)
            done.append(name)
        except Exception as exc:  # a missing module only makes children slower
            print(f"hookwire-zygote: cannot pre-import {name}: {exc}", file=sys.stderr, flush=True)
    return done


def _warm() -> None:
    """Fill the caches every child would fill on its own: the JSON Schema meta-schema a tool's parameters are
    checked against (`Extension.tool`), and the `re` cache with the patterns argparse compiles for every parser
    (the SDK's `serve()` parses its command line; so do most extension scripts): five compiles per child."""
    try:
        import argparse

        parser = argparse.ArgumentParser(prog="zygote")
        parser.add_argument("--value")
        parser.add_argument("--flag", action="store_true")
        parser.add_argument("rest", nargs="*")
        parser.parse_args(["--value", "1", "--flag", "a"])
    except Exception:  # only makes children slower
        pass
    try:
        from extension_sdk._schema_check import check_tool_schema

        # `pattern`: a keyword the SDK's fast answer leaves to jsonschema, whose meta-schema caches this fills
        check_tool_schema("zygote", "warm", {"type": "object", "properties": {"a": {"type": "string",
                                                                                   "pattern": "^a"}}})
    except Exception:  # only makes children slower
        pass


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def _send(ctrl: socket.socket, message: dict[str, Any]) -> None:
    ctrl.send(json.dumps(message).encode())


# ---------------------------------------------------------------- the child


def _set_cmdline(args: list[str]) -> None:
    """Show the extension's command in /proc/self/cmdline by overwriting the original argv area in place."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read()
        fields = stat[stat.rindex(b")") + 2:].split()
        start, end = int(fields[45]), int(fields[46])  # fields 48, 49: arg_start, arg_end
        size = end - start
        if size <= 1:
            return
        blob = b"\0".join(a.encode("utf-8", "surrogateescape") for a in args)[: size - 1]
        ctypes.memmove(start, blob + b"\0" * (size - len(blob)), size)
    except (OSError, ValueError, IndexError):
        pass


def _exit_code(code: object) -> int:
    """The exit status a real interpreter gives `raise SystemExit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _finish(code: int) -> None:
    """What interpreter shutdown does that matters to an extension, then _exit (nothing of the zygote runs)."""
    try:
        import threading

        threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads, like Py_Finalize
    except BaseException:
        pass
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        pass
    try:
        sys.stdout.flush()
    except BaseException:
        code = code or 120
    try:
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(code)


def _read_config(fd: int) -> dict[str, Any]:
    with socket.socket(fileno=fd) as sock:
        sock.settimeout(30)
        chunks = []
        total = 0
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            total += len(chunk)
            if total > _MAX_CONFIG:
                raise ValueError("config too large")
            chunks.append(chunk)
    return json.loads(b"".join(chunks))


def _child(ctrl: socket.socket | None, fds: list[int], wake: tuple[int, ...], launcher: ModuleType, parent: int,
           inherited: list[int], cloned: tuple[int, int, int, int] | None,
           spare: tuple[int, dict[str, str]] | None = None) -> None:
    """In the forked (or cloned) child: become the extension. Never returns.

    `inherited`: the zygote's own fds to close (its lifeline's write end, other children's status pipes).
    `cloned` = (clone flags, go fd, status fd, lifeline fd) when the zygote cloned this child straight into the
    sandbox's namespaces: it is pid 1 of its pid namespace, the extension's init (`launcher.contain_cloned`).
    `spare` = (outer pid, joined cgroups) for a spare taken by a request: `_spare_child` did the cloned
    child's first steps (and the launcher's `prepare_spare`) already; `ctrl` is then None."""
    name = "?"
    outer_pid = spare[0] if spare is not None else 0
    try:
        if cloned is not None and spare is None:
            launcher._die_with_parent(None)  # first: SIGKILL when the zygote dies
        for fd in inherited:
            os.close(fd)
        if cloned is not None and spare is None:
            _flags, go_r, _status_w, life_r = cloned
            if select.select([life_r], [], [], 0)[0]:  # the zygote died before our prctl
                os._exit(EXIT_SANDBOX_FAILED)
            outer_pid = int(os.read(go_r, 32) or b"0")  # the zygote writes our pid (as the host sees it)
            os.close(go_r)
            if outer_pid <= 0:
                os._exit(EXIT_SANDBOX_FAILED)
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in wake:
            os.close(fd)
        if ctrl is not None:
            ctrl.detach()  # fd 0: replaced by the child's stdin just below
        stdin_fd, stdout_fd, stderr_fd, config_fd = fds
        os.dup2(stdin_fd, 0)
        os.dup2(stdout_fd, 1)
        os.dup2(stderr_fd, 2)
        for fd in (stdin_fd, stdout_fd, stderr_fd):
            os.close(fd)
        config = _read_config(config_fd)
        name = str(config.get("name", "?"))
        env = {str(k): str(v) for k, v in config["env"].items()}
        os.environ.clear()
        os.environ.update(env)
        time.tzset()
        if "MALLOC_ARENA_MAX" in env:  # glibc read the variable at start-up; apply it now
            ctypes.CDLL(None).mallopt(M_ARENA_MAX, int(env["MALLOC_ARENA_MAX"]))
        os.chdir(config["cwd"])
    except BaseException as exc:
        try:
            os.write(2, f"hookwire-zygote: extension {name!r}: cannot start: {exc}\n".encode())
        finally:
            os._exit(EXIT_SETUP_FAILED)
    _set_cmdline([str(a) for a in config.get("title") or []])  # before the sandbox forks: every process shows it
    spec = config.get("spec")
    if cloned is not None and (not spec or launcher.clone_flags(spec) != cloned[0]):
        os.write(2, f"hookwire-sandbox: extension {name!r}: cloned into namespaces its spec does not ask for\n".encode())
        os._exit(EXIT_SANDBOX_FAILED)
    if spec:
        try:
            launcher.apply_spec(spec, parent, None if cloned is None else (outer_pid, cloned[2], cloned[3])
                                if spare is None else (outer_pid, cloned[2], cloned[3], spare[1]))
        except launcher.SandboxError as exc:
            os.write(2, f"hookwire-sandbox: extension {spec.get('extension')!r}: {exc}\n".encode())
            os._exit(EXIT_SANDBOX_FAILED)
        except BaseException as exc:
            os.write(2, f"hookwire-sandbox: extension {name!r}: {exc}\n".encode())
            os._exit(EXIT_SANDBOX_FAILED)
        if cloned is not None:
            launcher.after_fork_child()  # no os.fork() made this process: Python's after-fork work, here
        if launcher.PID1_STATUS_FD is not None:  # this process is pid 1 of its namespace (no init)
            _PID1.install(launcher.PID1_STATUS_FD)
    kind, target = config["kind"], config["target"]
    sys.argv = [str(a) for a in config["argv"]]
    sys.path.insert(0, os.getcwd() if kind == "module" else os.path.dirname(os.path.realpath(target)))
    code = 0
    try:
        import runpy

        if kind == "module":
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        _finish_signal(signal.SIGINT)
    except BaseException:
        traceback.print_exc()
        code = 1
    _finish(code)


def _spare_child(ctrl: socket.socket, sock: int, launcher: ModuleType, parent: int, inherited: list[int],
                 cloned: tuple[int, int, int, int], bases: tuple[str, ...]) -> None:
    """In a spare (host/sandbox/_zygote_spares.py): the cloned child's first steps and the launcher's
    `prepare_spare` (uid/gid maps, spare cgroups joined), then wait on `sock` for a request's four fds and go on
    as `_child`. Never returns; exits 0 when the zygote closes `sock` (or dies: PDEATHSIG)."""
    flags, go_r, status_w, life_r = cloned
    try:
        launcher._die_with_parent(None)  # first: SIGKILL when the zygote dies
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in inherited:
            os.close(fd)
        if select.select([life_r], [], [], 0)[0]:  # the zygote died before our prctl
            os._exit(EXIT_SANDBOX_FAILED)
        outer_pid = int(os.read(go_r, 32) or b"0")
        os.close(go_r)
        if outer_pid <= 0:
            os._exit(EXIT_SANDBOX_FAILED)
        ctrl.detach()
        null = os.open(os.devnull, os.O_RDWR)  # fd 0 was the zygote's control socket: never keep it
        os.dup2(null, 0)
        os.close(null)
        joined = launcher.prepare_spare(list(bases), outer_pid)
    except BaseException:
        os._exit(EXIT_SANDBOX_FAILED)
    try:
        with socket.socket(fileno=sock) as channel:
            _data, fds, _flags, _addr = socket.recv_fds(channel, 16, 8)
    except BaseException:
        os._exit(0)
    if len(fds) != 4:
        os._exit(0)  # the zygote let this spare go
    _child(None, fds, (), launcher, parent, [], cloned, (outer_pid, joined))


def _make_spare(key: Any, ctrl: socket.socket, launcher: ModuleType, spares: Any, parent: int,
                inherited: list[int], life_r: int) -> None:
    """Clone one spare for `key` (its flags and cgroup bases) and add it to `spares` (a SparePool)."""
    flags, bases = key
    go_r, go_w = os.pipe()
    status_r, status_w = os.pipe()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    mine = ours.detach()
    try:
        pid = launcher.clone_into_namespaces(flags)
    except OSError as exc:
        for fd in (go_r, go_w, status_r, status_w, mine):
            os.close(fd)
        theirs.close()
        spares.failed(key)
        print(f"hookwire-zygote: cannot clone a spare: {exc}", file=sys.stderr, flush=True)
        return
    if pid == 0:
        _spare_child(ctrl, theirs.detach(), launcher, parent, [*inherited, mine, go_w, status_r],
                     (flags, go_r, status_w, life_r), bases)
    theirs.close()
    os.close(go_r)
    os.close(status_w)
    try:
        os.write(go_w, str(pid).encode())
    except OSError:
        pass  # it died already: reaped and dropped like any lost spare
    finally:
        os.close(go_w)
    spares.add(_SPARES.Spare(pid, mine, status_r, key))


def _finish_signal(sig: int) -> None:
    """Die by `sig`, like an interpreter whose KeyboardInterrupt went unhandled."""
    try:
        sys.stderr.flush()
    finally:
        if _PID1 is not None and _PID1.active():
            _PID1.exit_by_signal(sig)  # pid 1 can't die by a signal it sends itself
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)


# ---------------------------------------------------------------- the zygote


def _reap(ctrl: socket.socket, children: set[int], statuses: dict[int, int], spares: Any) -> None:
    while children or len(spares):
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        if pid in spares:  # a spare that died idle: no extension, nothing to report
            spares.lost(pid)
            continue
        spares.exited(pid)
        children.discard(pid)
        code = os.waitstatus_to_exitcode(status)
        status_r = statuses.pop(pid, None)
        if status_r is not None:  # a cloned init: it reported the extension's own wait status before exiting
            code = _reported_code(status_r, code)
        _send(ctrl, {"op": "exit", "pid": pid, "code": code})


def _reported_code(status_r: int, code: int) -> int:
    """The extension's exit code as its init reported it, or `code` (init's own) when it reported none (killed)."""
    try:
        reported = os.read(status_r, 64)
    except OSError:
        reported = b""
    finally:
        os.close(status_r)
    text = reported.strip()
    return os.waitstatus_to_exitcode(int(text)) if text.isdigit() else code


def main() -> None:
    # Not `python -P` (children would inherit sys.flags.safe_path): drop this script's dir from sys.path instead.
    if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]
    ctrl = socket.socket(fileno=0)  # the control socket: also the lifeline
    ctrl.setblocking(True)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    launcher = _load_launcher()
    global _SPARES, _PID1
    _SPARES = _load("_zygote_spares.py", "_hookwire_zygote_spares")
    _PID1 = _load("_pid1.py", "_hookwire_pid1")
    if os.environ.get("HOOKWIRE_ZYGOTE_PID1", "1").strip().lower() not in ("0", "off", "false", "no"):
        launcher.enable_pid1()  # before any preload: a throwaway fork of a small process finds glibc's tid field
    launcher.load_relay()  # forked children use it without loading it again
    zygote_pid = os.getpid()
    gc.disable()  # no collection while importing: fewer freed holes in the pages the children share
    imported = _preload()
    _warm()
    # Every object so far is moved out of the collector's reach: a child's collections then never write to the
    # zygote's objects (their GC headers), which would copy nearly every shared page into each child.
    gc.collect()
    gc.freeze()
    gc.enable()
    threads = _thread_count()
    _send(ctrl, {"op": "ready", "pid": os.getpid(), "threads": threads, "imported": imported})
    if threads != 1:
        return  # forking a multi-threaded process is unsafe (and unshare(CLONE_NEWUSER) fails): the host falls back
    children: set[int] = set()
    statuses: dict[int, int] = {}  # cloned child (init) -> read end of the pipe its extension's status comes on
    life_r, life_w = os.pipe()  # cloned children's lifeline: EOF once the zygote is gone (only it keeps life_w)
    spares = _SPARES.SparePool()
    poller = select.poll()
    poller.register(0, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    try:
        _serve(ctrl, launcher, zygote_pid, poller, (wake_r, wake_w), (life_r, life_w), children, statuses, spares)
    finally:
        spares.close()


def _serve(ctrl: socket.socket, launcher: ModuleType, zygote_pid: int, poller: Any, wake: tuple[int, int],
           life: tuple[int, int], children: set[int], statuses: dict[int, int], spares: Any) -> None:
    """Serve spawn requests until the host closes the control socket; refill spares while idle."""
    wake_r, wake_w = wake
    life_r, life_w = life
    while True:
        wait_s = spares.refill_wait_s()
        events = dict(poller.poll(None if wait_s is None else int(wait_s * 1000)))
        if not events:
            refill = spares.wanted()
            if refill is not None:  # idle: clone a spare (the child never returns from here)
                _make_spare(refill, ctrl, launcher, spares, zygote_pid,
                            [life_w, *statuses.values(), *spares.fds(), wake_r, wake_w], life_r)
            continue
        if wake_r in events:
            try:
                while os.read(wake_r, 4096):
                    pass
            except BlockingIOError:
                pass
        _reap(ctrl, children, statuses, spares)
        if 0 not in events:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(ctrl, 65536, 8)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return  # the host closed the lifeline
        request: Any = {}
        pipes: list[int] = []
        if not fds and data in (_BUSY, _IDLE):  # the host's starts in flight (`Zygote.busy`): no reply
            spares.host_says(busy=data == _BUSY)
            continue
        try:
            request = json.loads(data)
            if request.get("op") != "spawn" or len(fds) != 4:
                raise ValueError(f"bad request {data[:100]!r} with {len(fds)} fds")
            flags = int(request.get("clone") or 0)
            key = _SPARES.request_key(flags, request.get("cgroups"))
            if key is not None:
                spares.note_request(key, int(request.get("spares") or 0))
                spare = spares.take(key)
                if spare is not None and _SPARES.hand_over(spare, fds):
                    for fd in fds:
                        os.close(fd)
                    os.close(spare.sock)
                    os.set_blocking(spare.status_r, False)
                    statuses[spare.pid] = spare.status_r
                    children.add(spare.pid)
                    _send(ctrl, {"op": "spawned", "id": request["id"], "pid": spare.pid})
                    continue
                if spare is not None:  # it died meanwhile: back in the pool until reaped (`lost`); clone as usual
                    spares.add(spare)
            if flags:  # straight into the sandbox's namespaces: the child is its init (no waiter, no unshare)
                go_r, go_w = os.pipe()
                status_r, status_w = os.pipe()
                pipes = [go_r, go_w, status_r, status_w]
                pid = launcher.clone_into_namespaces(flags)
            else:
                pid = os.fork()
        except Exception as exc:
            for fd in [*fds, *pipes]:
                os.close(fd)
            _send(ctrl, {"op": "failed", "id": request.get("id") if isinstance(request, dict) else None,
                         "error": str(exc)})
            continue
        if pid == 0:
            inherited = [life_w, *statuses.values(), *spares.fds()]
            if flags:
                _child(ctrl, fds, (wake_r, wake_w), launcher, zygote_pid, [*inherited, go_w, status_r],
                       (flags, go_r, status_w, life_r))
            _child(ctrl, fds, (wake_r, wake_w), launcher, zygote_pid, [*inherited, life_r], None)
        for fd in fds:
            os.close(fd)
        if flags:
            os.close(go_r)
            os.close(status_w)
            os.set_blocking(status_r, False)
            statuses[pid] = status_r
            try:
                os.write(go_w, str(pid).encode())
            except OSError:
                pass  # it died already: its exit is reported like any other
            finally:
                os.close(go_w)
        children.add(pid)
        _send(ctrl, {"op": "spawned", "id": request["id"], "pid": pid})


if __name__ == "__main__":
    main()
