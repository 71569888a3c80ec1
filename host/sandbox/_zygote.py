"""The host side of the Python zygote: a pre-imported process that forks Python extensions.

Starting a Python SDK extension costs an interpreter, `site`, and ~120 ms of imports (grpc, protobuf, the SDK),
plus the sandbox launcher's own interpreter. The zygote (host/sandbox/_zygote_main.py) pays the imports once; each
extension is a fork of it that applies the same sandbox layers as the launcher (its `apply_spec`) and runs
the extension's module or script with runpy.

Only `[sys.executable, -m, module, ...]` and `[sys.executable, script, ...]` commands (directly, or wrapped in the
launcher argv `plan_launch` builds) whose environment sets no PYTHON* variable and has the host's locale
variables (the zygote's interpreter decided its encodings from them) are eligible (`zygote_launch`);
everything else is spawned as before. `Zygote.spawn` returns a `ZygoteProcess`, a drop-in for the
`asyncio.subprocess.Process` the extension process code uses (pid, returncode, wait, stdin/stdout/stderr
streams, send_signal, kill). Any zygote failure raises `ZygoteUnavailable`: the caller falls back to a
normal spawn, so the zygote can never make a load fail.

Safety: the zygote gets a minimal environment (PATH, LANG, LC_ALL, TZ) and never sees an extension's
environment (its token): the forked child reads its config from a socket the host writes to directly. The
zygote starts no threads (checked: it refuses to fork otherwise), its stdin is the control socket (host
death = EOF = zygote exit), and it reaps its children and reports their exit codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import select
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

log = logging.getLogger("hookwire.extensions")

ZYGOTE_MAIN: Path = Path(__file__).resolve().with_name("_zygote_main.py")
LAUNCHER: Path = Path(__file__).resolve().with_name("_launcher.py")
_ENV_PASSTHROUGH = ("PATH", "LANG", "LC_ALL", "TZ")  # what the manager passes to every extension, too
_ZYGOTE_SWITCHES = ("HOOKWIRE_ZYGOTE_PID1",)  # the zygote's own switches (host/sandbox/_zygote_main.py)
_LOCALE_ENV = ("LANG", "LC_ALL", "LC_CTYPE")  # decide the interpreter's encodings at start-up
_TITLE_ROOM = 2048  # bytes of argv the forked children can overwrite to show their own command line
START_TIMEOUT_S = 20.0
SPAWN_TIMEOUT_S = 10.0
CLOSE_GRACE_S = 1.0  # for the zygote to remove its spares and exit before it is killed
DEFAULT_SPARES = 8  # per kind of start (clone flags and cgroup bases): as many as the largest burst of starts
MAX_SPARES = 32
UNKNOWN_EXIT = 255  # exit status reported for a child whose zygote died before it (nobody can know it)
_BUSY = b'{"op": "busy"}'  # host/sandbox/_zygote_main.py compares these bytes
_IDLE = b'{"op": "idle"}'


class ZygoteUnavailable(RuntimeError):
    """The zygote cannot start this process (not running, died, refused): spawn it the normal way."""


class ZygoteLaunch(BaseModel):
    """What a zygote child runs: `runpy` of a module or a script, with sys.argv and the sandbox spec."""

    kind: Literal["module", "path"]
    target: str
    argv: list[str]
    title: list[str]
    spec: dict[str, Any] | None = None


def zygote_enabled() -> bool:
    """False when the environment says HOOKWIRE_ZYGOTE=0 (or off/false/no)."""
    return os.environ.get("HOOKWIRE_ZYGOTE", "1").strip().lower() not in ("0", "off", "false", "no")


def zygote_launch(argv: list[str], env: dict[str, str]) -> ZygoteLaunch | None:
    """The zygote form of a spawn argv (a plain command or the launcher's), or None when it is not eligible."""
    spec: dict[str, Any] | None = None
    command = list(argv)
    if command[:4] == [sys.executable, "-I", "-S", str(LAUNCHER)]:
        if len(command) < 8 or command[4] != "--spec" or command[6] != "--":
            return None
        try:
            spec = json.loads(command[5])
        except ValueError:
            return None
        command = command[7:]
    if len(command) < 2 or command[0] != sys.executable:
        return None
    if any(key.startswith("PYTHON") for key in env):  # read by the interpreter at start-up: needs a real one
        return None
    zygote_env = _zygote_env()
    if any(env.get(key) != zygote_env.get(key) for key in _LOCALE_ENV):  # the zygote has the host's locale
        return None
    rest = command[1:]
    if rest[0] == "-m":
        if len(rest) < 2 or not rest[1] or rest[1].startswith("-"):
            return None
        return ZygoteLaunch(kind="module", target=rest[1], argv=["-m", *rest[2:]], title=command, spec=spec)
    if rest[0].startswith("-"):
        return None
    return ZygoteLaunch(kind="path", target=rest[0], argv=rest, title=command, spec=spec)


def _clone_flags(spec: dict[str, Any] | None) -> int:
    """The namespaces the zygote clones this child straight into (the launcher's `clone_flags`; 0: a plain fork).
    Imported here, not at module level: the launcher's ctypes bindings exist on Linux only."""
    if not spec or sys.platform != "linux":
        return 0
    from ._launcher import clone_flags

    return clone_flags(spec)


def zygote_spares() -> int:
    """How many spares the zygote may keep per kind of sandboxed start (HOOKWIRE_ZYGOTE_SPARES, default
    DEFAULT_SPARES; 0: none). See host/sandbox/_zygote_spares.py."""
    text = os.environ.get("HOOKWIRE_ZYGOTE_SPARES", "").strip()
    try:
        return max(0, min(MAX_SPARES, int(text))) if text else DEFAULT_SPARES
    except ValueError:
        log.warning("HOOKWIRE_ZYGOTE_SPARES=%r is not a number; using %d", text, DEFAULT_SPARES)
        return DEFAULT_SPARES


def _spare_fields(spec: dict[str, Any] | None) -> dict[str, Any]:
    """What a spawn request tells the zygote so it can hand it a spare: the cgroup bases the child joins (pids,
    then memory; nothing secret) and how many spares it may keep."""
    if not spec:
        return {}
    proc = spec.get("process_limit") or {}
    bases = [proc["base"]] if proc.get("mechanism") == "pids_cgroup" and proc.get("base") else []
    if spec.get("memory_cgroup"):
        bases.append(spec["memory_cgroup"]["base"])
    return {"cgroups": bases, "spares": zygote_spares()}


def _zygote_env() -> dict[str, str]:
    """The zygote's whole environment: nothing secret."""
    return {k: os.environ[k] for k in (*_ENV_PASSTHROUGH, *_ZYGOTE_SWITCHES) if k in os.environ}


class ZygoteProcess:
    """A zygote-forked extension process, shaped like `asyncio.subprocess.Process`.

    It is a session leader (pid == its process group id). Its exit code comes from the zygote, which
    reaps it; if the zygote dies first, a pidfd tells when it exits (code UNKNOWN_EXIT).
    """

    def __init__(self, pid: int, loop: asyncio.AbstractEventLoop) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._loop = loop
        self._exited: asyncio.Future[int] = loop.create_future()
        self._pidfd: int | None = None

    def __repr__(self) -> str:
        return f"<ZygoteProcess {self.pid} returncode={self.returncode}>"

    async def _connect(self, stdin_w: int, stdout_r: int, stderr_r: int) -> None:
        loop = self._loop
        self.stdout = asyncio.StreamReader(loop=loop)
        self.stderr = asyncio.StreamReader(loop=loop)
        for reader, fd in ((self.stdout, stdout_r), (self.stderr, stderr_r)):
            await loop.connect_read_pipe(
                lambda r=reader: asyncio.StreamReaderProtocol(r, loop=loop), os.fdopen(fd, "rb", buffering=0)
            )
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop), os.fdopen(stdin_w, "wb", buffering=0)
        )
        self.stdin = asyncio.StreamWriter(transport, protocol, None, loop)

    def _set_exit(self, code: int) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if self.returncode is None:
            self.returncode = code
        if not self._exited.done():
            self._exited.set_result(self.returncode)

    def _orphaned(self) -> None:
        """The zygote is gone: nobody will report this process's exit; watch it with a pidfd."""
        if self.returncode is not None:
            return
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except (OSError, AttributeError):
            self._set_exit(UNKNOWN_EXIT)
            return
        readable, _, _ = select.select([self._pidfd], [], [], 0)
        if readable:
            self._set_exit(UNKNOWN_EXIT)
        else:
            self._loop.add_reader(self._pidfd, self._set_exit, UNKNOWN_EXIT)

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the process group (the process and anything it started)."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)


class _Pending:
    def __init__(self, future: asyncio.Future[ZygoteProcess]) -> None:
        self.future = future


class Zygote:
    """One zygote process, started lazily by the first `spawn`; `close` stops it. Not thread-safe."""

    def __init__(self) -> None:
        self._proc: asyncio.subprocess.Process | None = None
        self._ctrl: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._ready: asyncio.Future[dict[str, Any]] | None = None
        self._pending: dict[int, asyncio.Future[ZygoteProcess]] = {}
        self._children: dict[int, ZygoteProcess] = {}
        self._next_id = 0
        self.broken: str | None = None  # why the zygote is unusable (then every spawn raises ZygoteUnavailable)
        self.info: dict[str, Any] = {}
        self._closing = False
        self._busy = 0  # starts in flight (`busy`)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    async def start(self) -> None:
        """Start the zygote and wait until its imports are done (idempotent). Raises ZygoteUnavailable."""
        async with self._lock:
            if self.broken is not None:
                raise ZygoteUnavailable(self.broken)
            if self._proc is not None:
                return
            try:
                await self._start()
            except ZygoteUnavailable as exc:
                self._lost(str(exc))
                raise
            except (OSError, TimeoutError, ValueError) as exc:
                self._lost(f"cannot start the zygote: {exc}")
                raise ZygoteUnavailable(self.broken or str(exc)) from None

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = _zygote_env()
        try:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, str(ZYGOTE_MAIN), " " * _TITLE_ROOM,
                stdin=theirs.fileno(), stdout=asyncio.subprocess.DEVNULL, env=env, start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self._ctrl = ours
        self._ready = loop.create_future()
        loop.add_reader(ours.fileno(), self._readable)
        info = await asyncio.wait_for(asyncio.shield(self._ready), START_TIMEOUT_S)
        self.info = info
        if info.get("threads") != 1:
            raise ZygoteUnavailable(f"the zygote has {info.get('threads')} threads after its imports; forking it is unsafe")
        log.debug("python zygote %s ready (pre-imported %s)", self._proc.pid, ", ".join(info.get("imported", [])))
        if self._busy:  # the first starts began before the zygote was up
            self._tell(_BUSY)

    def _readable(self) -> None:
        ctrl = self._ctrl
        while ctrl is not None and self._ctrl is ctrl:
            try:
                data = ctrl.recv(65536)
            except BlockingIOError:
                return
            except OSError as exc:
                self._lost(f"the zygote's control socket failed: {exc}")
                return
            if not data:
                self._lost("the zygote exited")
                return
            try:
                self._dispatch(json.loads(data))
            except (ValueError, KeyError, TypeError) as exc:
                self._lost(f"the zygote sent a bad message: {exc}")
                return

    def _dispatch(self, msg: dict[str, Any]) -> None:
        op = msg["op"]
        if op == "ready":
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(msg)
        elif op == "spawned":
            future = self._pending.pop(int(msg["id"]), None)
            assert self._loop is not None
            proc = ZygoteProcess(int(msg["pid"]), self._loop)
            self._children[proc.pid] = proc  # registered now: its exit report may be the very next message
            if future is not None and not future.done():
                future.set_result(proc)
        elif op == "failed":
            future = self._pending.pop(int(msg["id"]), None) if msg.get("id") is not None else None
            if future is not None and not future.done():
                future.set_exception(ZygoteUnavailable(f"the zygote could not fork: {msg.get('error')}"))
        elif op == "exit":
            child = self._children.pop(int(msg["pid"]), None)
            if child is not None:
                child._set_exit(int(msg["code"]))

    def _lost(self, why: str) -> None:
        """The zygote is unusable from now on: fail what waits on it, watch its children with pidfds."""
        if self.broken is None:
            self.broken = why
            if not self._closing:
                log.warning("the Python zygote is unavailable (%s); Python extensions start through the launcher "
                            "from now on", why)
        if self._ctrl is not None:
            if self._loop is not None:
                with contextlib.suppress(Exception):
                    self._loop.remove_reader(self._ctrl.fileno())
            self._ctrl.close()
            self._ctrl = None
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(ZygoteUnavailable(why))
            self._ready.exception()  # retrieved: nobody may be waiting any more
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ZygoteUnavailable(why))
        self._pending.clear()
        for child in self._children.values():
            child._orphaned()
        self._children.clear()
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Around one extension's start, spawn to ready: while any is in flight the zygote refills no spares (their
        cloning would take CPU from the starts; host/sandbox/_zygote_spares.py). Tells the zygote when the first
        start begins and when the last one ends; without it the zygote refills once it has had no request for
        10 ms."""
        self._busy += 1
        if self._busy == 1:
            self._tell(_BUSY)
        try:
            yield
        finally:
            self._busy -= 1
            if self._busy == 0:
                self._tell(_IDLE)

    def _tell(self, message: bytes) -> None:
        """A message that needs no answer; dropped when the zygote is not running or its queue is full (then it
        refills on its own timer)."""
        if self._ctrl is None or self.broken is not None:
            return
        with contextlib.suppress(OSError):  # a socket that failed is reported by `_readable`
            self._ctrl.send(message)

    async def spawn(self, launch: ZygoteLaunch, *, name: str, env: dict[str, str], cwd: Path | str) -> ZygoteProcess:
        """Fork a child running `launch` with exactly `env`, in `cwd`. Raises ZygoteUnavailable."""
        await self.start()
        loop = asyncio.get_running_loop()
        config = json.dumps({
            "name": name, "kind": launch.kind, "target": launch.target, "argv": launch.argv, "title": launch.title,
            "cwd": str(cwd), "env": env, "spec": launch.spec,
        }).encode()
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        cfg_ours, cfg_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ours = [stdin_w, stdout_r, stderr_r]
        self._next_id += 1
        rid = self._next_id
        future: asyncio.Future[ZygoteProcess] = loop.create_future()
        self._pending[rid] = future
        try:
            ctrl = self._ctrl
            if ctrl is None:
                raise ZygoteUnavailable(self.broken or "the zygote is not running")
            try:
                request = {"op": "spawn", "id": rid, "clone": _clone_flags(launch.spec), **_spare_fields(launch.spec)}
                socket.send_fds(ctrl, [json.dumps(request).encode()],
                                [stdin_r, stdout_w, stderr_w, cfg_theirs.fileno()])
            except OSError as exc:
                self._lost(f"cannot send a spawn request to the zygote: {exc}")
                raise ZygoteUnavailable(self.broken or str(exc)) from None
        except BaseException:
            self._pending.pop(rid, None)
            for fd in ours:
                os.close(fd)
            cfg_ours.close()
            raise
        finally:
            for fd in (stdin_r, stdout_w, stderr_w):
                os.close(fd)
            cfg_theirs.close()
        try:
            cfg_ours.setblocking(False)
            try:
                await asyncio.wait_for(loop.sock_sendall(cfg_ours, config), SPAWN_TIMEOUT_S)
            except (OSError, TimeoutError):
                pass  # the child died before reading its config; its exit is reported like any other
            finally:
                cfg_ours.close()
            try:
                proc = await asyncio.wait_for(asyncio.shield(future), SPAWN_TIMEOUT_S)
            except TimeoutError:
                self._lost(f"the zygote did not answer a spawn request within {SPAWN_TIMEOUT_S:.0f} s")
                raise ZygoteUnavailable(self.broken or "timeout") from None
        except BaseException:
            self._pending.pop(rid, None)
            for fd in ours:
                os.close(fd)
            if future.done() and not future.cancelled() and future.exception() is None:
                future.result().kill()
            raise
        try:
            await proc._connect(stdin_w, stdout_r, stderr_r)
        except BaseException:
            proc.kill()
            raise
        return proc

    async def close(self) -> None:
        """Stop the zygote (its children are not touched: their owners stop them through their lifelines)."""
        self._closing = True
        proc = self._proc
        if self._ctrl is not None and proc is not None and proc.returncode is None:
            # EOF on its control socket: the zygote removes its spares (and their cgroups) and exits by itself
            if self._loop is not None:
                with contextlib.suppress(Exception):
                    self._loop.remove_reader(self._ctrl.fileno())
            self._ctrl.close()
            self._ctrl = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), CLOSE_GRACE_S)
        self._lost("the zygote was closed")
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 5.0)
