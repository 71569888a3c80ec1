"""Start an extension the way the host does and watch it raw.

The environment is the host's contract (docs/protocol.md §1): PATH, LANG, LC_ALL, TZ, the manifest's `env`
names and the HOOKWIRE_* variables; the process gets its own process group, the manifest's cwd, a lifeline pipe on
stdin, and the sandbox the mode allows (host.sandbox._plan). Unlike the host's ExtensionProcess, nothing is
interpreted away: the handshake line and when it came, every byte printed on stdout after it, the last stderr lines
and the exit code are kept for the clauses to judge.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Literal

from extension_sdk import MAGIC_COOKIE

from ..extensions._manifest import Manifest

SandboxMode = Literal["off", "auto", "required"]
PASSTHROUGH_ENV = ("PATH", "LANG", "LC_ALL", "TZ")  # as the host's ExtensionManager
LINE_CAP = 4096
STDOUT_KEEP = 4096  # bytes kept of what was printed on stdout after the handshake


class KitStartError(RuntimeError):
    """The extension could not be started at all (no such command, sandbox refused)."""


class WatchedProcess:
    """One started extension process, its output watched (see `start`)."""

    def __init__(self, proc: asyncio.subprocess.Process, token: str, socket_path: Path, t0: float) -> None:
        self.proc = proc
        self.token = token
        self.socket_path = socket_path
        self._t0 = t0
        self.handshake: str | None = None  # the first stdout line (without its newline)
        self.handshake_ms: float | None = None
        self.stdout_before: bytes = b""  # what came on stdout when no complete line did (garbage, EOF)
        self.stdout_after = bytearray()  # bytes printed on stdout after the handshake line
        self.stdout_after_total = 0
        self.stderr_tail: deque[str] = deque(maxlen=12)
        self._line: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tasks = [asyncio.ensure_future(self._read_stdout()), asyncio.ensure_future(self._read_stderr())]
        self._exit = asyncio.ensure_future(proc.wait())
        self.exited_at: float | None = None
        self._exit.add_done_callback(lambda _f: setattr(self, "exited_at", time.monotonic()))

    @classmethod
    async def start(cls, manifest: Manifest, workdir: Path, *, sandbox: SandboxMode = "off", cookie: bool = True,
                    label: str = "main", bridge: Any = None) -> WatchedProcess:
        """Spawn the manifest's command with a fresh token and socket under `workdir` (a private 0700 directory).

        `bridge`: a HostBridgeServer to register the token on and name in HOOKWIRE_HOST_ADDRESS."""
        assert manifest.command is not None
        run_dir = workdir / label
        run_dir.mkdir(mode=0o700)
        scratch = run_dir / "scratch"
        scratch.mkdir(mode=0o700)
        socket_path = run_dir / "ext.sock"
        token = secrets.token_urlsafe(32)
        env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
        env.update({k: os.environ[k] for k in manifest.env if k in os.environ})
        env.update(HOOKWIRE_SOCKET=str(socket_path), HOOKWIRE_TOKEN=token, HOOKWIRE_EXTENSION_NAME=manifest.name,
                   HOOKWIRE_SCRATCH_DIR=str(scratch), TMPDIR=str(scratch))
        if cookie:
            env["HOOKWIRE_MAGIC_COOKIE"] = MAGIC_COOKIE
        if bridge is not None:
            bridge.register_extension(token, manifest)
            env["HOOKWIRE_HOST_ADDRESS"] = bridge.target
        command = [sys.executable if c in ("python", "python3") and i == 0 else c
                   for i, c in enumerate(manifest.command)]
        argv = command
        if sandbox != "off":
            from ..sandbox import _plan as _sandbox

            try:
                plan = _sandbox.plan_launch(manifest, command=command, env=env, scratch_dir=scratch,
                                            runtime_dir=run_dir, mode=sandbox, socket_dir=run_dir,
                                            cwd=manifest.working_dir(),
                                            sockets=[bridge.socket_path] if bridge is not None else [])
            except _sandbox.SandboxUnavailable as exc:
                hint = (" (the kit runs no egress proxy for a `permissions.network` host list: test it with "
                        "--sandbox off)" if manifest.permissions.network else "")
                raise KitStartError(f"{exc}{hint}") from None
            argv, env = list(plan.argv), dict(plan.env)
        t0 = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=str(manifest.working_dir()), env=env, start_new_session=True,
            )
        except OSError as exc:
            raise KitStartError(f"extension {manifest.name!r}: cannot start {argv[0]!r}: {exc}") from None
        return cls(proc, token, socket_path, t0)

    # -- output --------------------------------------------------------------------------------

    async def _read_stdout(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        buf = b""
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            while self.handshake is None:
                chunk = await stream.read(4096)
                if not chunk:
                    self.stdout_before = buf[:LINE_CAP]
                    break
                buf += chunk
                if b"\n" in buf:
                    line, _, rest = buf.partition(b"\n")
                    self.handshake = line.decode("utf-8", "replace").rstrip("\r")
                    self.handshake_ms = (time.monotonic() - self._t0) * 1000
                    self._keep_after(rest)
                elif len(buf) > LINE_CAP:
                    self.stdout_before = buf[:LINE_CAP]
                    break
            if not self._line.done():
                self._line.set_result(None)
            while True:
                chunk = await stream.read(65536)
                if not chunk:
                    break
                if self.handshake is not None:
                    self._keep_after(chunk)
        if not self._line.done():
            self._line.set_result(None)

    def _keep_after(self, data: bytes) -> None:
        self.stdout_after_total += len(data)
        room = STDOUT_KEEP - len(self.stdout_after)
        if room > 0:
            self.stdout_after += data[:room]

    async def _read_stderr(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, ValueError):
            while True:
                line = await stream.readline()
                if not line:
                    break
                self.stderr_tail.append(line[:300].decode("utf-8", "replace").rstrip())

    async def wait_handshake(self, timeout_s: float) -> bool:
        """Wait for the first stdout line (or EOF / garbage); False when nothing decided within `timeout_s`."""
        try:
            await asyncio.wait_for(asyncio.shield(self._line), timeout_s)
        except TimeoutError:
            return False
        return True

    def tail(self) -> str:
        return f" (last stderr: {self.stderr_tail[-1]!r})" if self.stderr_tail else ""

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def wait_exit(self, timeout_s: float) -> int | None:
        """The exit code, or None when it still runs after `timeout_s`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._exit), timeout_s)
        return self.proc.returncode

    def close_stdin(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(Exception):
                stdin.close()

    async def kill(self) -> None:
        """SIGKILL the whole process group and reap it; stop the readers."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.wait_exit(5.0)
        self.close_stdin()
        for task in self._tasks:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), 0.5)
            task.cancel()
