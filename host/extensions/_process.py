"""One extension OS process: spawn, handshake, stderr/stdout capture, lifeline, exit watch, shutdown.

The process runs in its own process group (start_new_session); its stdin is a lifeline pipe held by
the host (EOF tells the extension to exit); stderr and post-handshake stdout are read in bounded chunks
and logged line by line (each line capped), so a runaway writer can neither stall nor balloon the host.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections import deque
from pathlib import Path

from extension_sdk.proto import HANDSHAKE_MAGIC, PROTOCOL_VERSION

from .._errors import ExtensionStartError
from ..sandbox._cgroups import CgroupLease, reap_stale_once, release_cgroups
from ..sandbox._zygote import Zygote, ZygoteProcess, ZygoteUnavailable, zygote_launch
from . import _call_tags as call_tags
from ._rate_limit import LineRateLimiter

LINE_CAP = 4096  # bytes kept per logged line
READ_CHUNK = 65536
TAIL_LINES = 20
LOG_RATE = 200.0  # lines per second logged per extension stream; a flood beyond it is counted, not logged
LOG_BURST = 1000.0


class ExtensionProcess:
    """A started extension process whose handshake succeeded (see `spawn`)."""

    def __init__(self, name: str, manifest_file: str, proc: asyncio.subprocess.Process | ZygoteProcess,
                 cgroups: CgroupLease | None = None) -> None:
        self.name = name
        self.manifest_file = manifest_file
        self._proc = proc
        self.pid: int = proc.pid
        self.target: str = ""
        self.log = logging.getLogger(f"hookwire.ext.{name}")
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._limiter = LineRateLimiter(LOG_RATE, LOG_BURST)
        self._tasks: list[asyncio.Task[None]] = []
        self._exit: asyncio.Task[int] = asyncio.ensure_future(self._exited(proc, cgroups))
        self.crash_handled = False  # the supervisor already handled this process's death (or broken connection)
        self.in_flight = call_tags.InFlight()  # the calls its stderr lines are attributed to

    # -- spawn & handshake ---------------------------------------------------------------------

    @classmethod
    async def spawn(
        cls,
        *,
        name: str,
        manifest_file: str,
        argv: list[str],
        env: dict[str, str],
        cwd: Path,
        start_timeout_s: float,
        zygote: Zygote | None = None,
        cgroups: CgroupLease | None = None,
    ) -> ExtensionProcess:
        """Start the process and wait for its handshake line. Raises ExtensionStartError.

        With a `zygote`, an eligible Python command is forked from it (same sandbox layers); if the zygote
        cannot, the process is spawned normally. `cgroups`: the sandbox's cgroups of this process, removed
        once it has exited (before `wait()` returns).
        """
        where = f"extension {name!r} (manifest {manifest_file})"
        proc: asyncio.subprocess.Process | ZygoteProcess | None = None
        if cgroups is not None:
            reap_stale_once(cgroups)  # what a killed host left behind
        launch = zygote_launch(argv, env) if zygote is not None and cwd.is_dir() else None
        if zygote is not None and launch is not None:
            with contextlib.suppress(ZygoteUnavailable):  # logged once by the zygote; spawn normally
                proc = await zygote.spawn(launch, name=name, env=env, cwd=cwd)
        try:
            proc = proc or await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=str(cwd),
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise ExtensionStartError(
                f"{where}: cannot start {argv[0]!r}: {exc}", extension=name, manifest=manifest_file
            ) from None
        self = cls(name, manifest_file, proc, cgroups)
        assert proc.stderr is not None
        self._tasks.append(asyncio.ensure_future(self._pump(proc.stderr, "stderr")))
        try:
            line = await asyncio.wait_for(self._read_handshake_line(where), start_timeout_s)
            self.target = self._parse_handshake(where, line)
        except TimeoutError:
            await self._abort()
            raise ExtensionStartError(
                f"{where}: no handshake within {start_timeout_s * 1000:.0f} ms (timeouts.startMs); "
                f"it must print '{HANDSHAKE_MAGIC}|{PROTOCOL_VERSION}|unix:<socket>' on stdout once serving"
                + self._tail_text(),
                extension=name,
                manifest=manifest_file,
            ) from None
        except ExtensionStartError as exc:
            await self._abort()
            raise ExtensionStartError(
                str(exc) + self._tail_text(), extension=name, manifest=manifest_file
            ) from None
        except BaseException:
            await self._abort()
            raise
        assert proc.stdout is not None
        self._tasks.append(asyncio.ensure_future(self._pump(proc.stdout, "stdout")))
        return self

    async def _read_handshake_line(self, where: str) -> str:
        stdout = self._proc.stdout
        assert stdout is not None
        buf = b""
        while b"\n" not in buf:
            chunk = await stdout.read(4096)
            if not chunk:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self._exit), 2.0)
                # Let the stderr pump log what is left, for the error message.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self._tasks[0]), 0.5)
                code = self._proc.returncode
                if buf.strip():
                    raise ExtensionStartError(
                        f"{where}: printed {buf[:200]!r} on stdout instead of the handshake, then "
                        f"{'exited with code ' + str(code) if code is not None else 'closed stdout'}"
                    )
                raise ExtensionStartError(
                    f"{where}: exited with code {code} before the handshake"
                    if code is not None
                    else f"{where}: closed stdout before the handshake"
                )
            buf += chunk
            if len(buf) > LINE_CAP and b"\n" not in buf:
                raise ExtensionStartError(
                    f"{where}: printed {buf[:200]!r}... (no newline) on stdout instead of the handshake"
                )
        line, _, rest = buf.partition(b"\n")
        if rest.strip():
            self.log.info("stdout: %s", rest[:LINE_CAP].decode("utf-8", "replace").rstrip())
        return line.decode("utf-8", "replace").strip()

    @staticmethod
    def _parse_handshake(where: str, line: str) -> str:
        parts = line.split("|")
        expected = f"'{HANDSHAKE_MAGIC}|{PROTOCOL_VERSION}|unix:<socket>'"
        if len(parts) != 3 or parts[0] != HANDSHAKE_MAGIC:
            raise ExtensionStartError(
                f"{where}: printed {line[:200]!r} on stdout instead of the handshake {expected} "
                "(logs belong on stderr)"
            )
        if parts[1] != PROTOCOL_VERSION:
            raise ExtensionStartError(
                f"{where}: speaks hookwire protocol version {parts[1]!r}; this host speaks {PROTOCOL_VERSION!r}"
            )
        target = parts[2].strip()
        if not target.startswith("unix:"):
            raise ExtensionStartError(f"{where}: handshake address {target!r} is not a unix: target")
        return target

    def _tail_text(self) -> str:
        if not self._tail:
            return ""
        return "\nlast stderr lines:\n  " + "\n  ".join(self._tail)

    def stderr_tail(self) -> list[str]:
        return list(self._tail)

    # -- output capture ------------------------------------------------------------------------

    async def _pump(self, stream: asyncio.StreamReader, label: str) -> None:
        """Log a stream line by line, each line capped at LINE_CAP bytes, reading bounded chunks.

        Rate-limited (LOG_RATE lines/s, bursts of LOG_BURST): a flood is counted (and its last line kept for
        the crash report) without per-line work, and the pump yields after every chunk, so an extension
        writing as fast as it can never starves the host's event loop.
        """
        buf = bytearray()
        skipping = False  # inside an over-long line whose head was already logged
        try:
            while True:
                chunk = await stream.read(READ_CHUNK)
                if not chunk:
                    break
                if not self._may_log():
                    last_nl = chunk.rfind(b"\n")
                    if last_nl >= 0:
                        self.suppressed_lines += chunk.count(b"\n")
                        if label == "stderr":
                            prev = chunk.rfind(b"\n", 0, last_nl) + 1
                            self._tail.append(chunk[prev:last_nl][:300].decode("utf-8", "replace"))
                        buf.clear()
                        rest = chunk[last_nl + 1:]
                        buf += rest[:LINE_CAP]
                        skipping = len(rest) > LINE_CAP
                    elif not skipping:
                        room = LINE_CAP - len(buf)
                        buf += chunk[:room]
                        skipping = len(chunk) > room
                        if skipping:
                            buf.clear()
                    await asyncio.sleep(0)
                    continue
                start = 0
                while True:
                    nl = chunk.find(b"\n", start)
                    if nl < 0:
                        piece = chunk[start:]
                        if not skipping:
                            room = LINE_CAP - len(buf)
                            buf += piece[:room]
                            if len(piece) > room:
                                self._emit(label, bytes(buf), truncated=True)
                                buf.clear()
                                skipping = True
                        break
                    if not skipping:
                        room = LINE_CAP - len(buf)
                        piece = chunk[start:nl]
                        buf += piece[:room]
                        self._emit(label, bytes(buf), truncated=len(piece) > room)
                    buf.clear()
                    skipping = False
                    start = nl + 1
                await asyncio.sleep(0)  # a writer that never pauses must not monopolise the loop
            if buf and not skipping:
                self._emit(label, bytes(buf), truncated=False)
            self._report_suppressed()
        except (asyncio.CancelledError, ConnectionError):
            pass

    @property
    def suppressed_lines(self) -> int:
        """Output lines not logged (yet reported) because the extension logged too fast."""
        return self._limiter.suppressed

    @suppressed_lines.setter
    def suppressed_lines(self, value: int) -> None:
        self._limiter.suppressed = value

    def _may_log(self) -> bool:
        may = self._limiter.available()
        if may and self._limiter.suppressed:
            self._report_suppressed()
        return may

    def _report_suppressed(self) -> None:
        count = self._limiter.take_suppressed()
        if count:
            self.log.warning(
                "extension %r logged faster than %.0f lines/s: %d line(s) not logged", self.name, LOG_RATE, count,
            )

    def _emit(self, label: str, raw: bytes, *, truncated: bool) -> None:
        self._limiter.take()
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if truncated:
            text += " …[line truncated]"
        if label == "stderr":
            self._tail.append(text[:300])
            self.log.info("%s", text, extra=call_tags.stderr_extra(self.in_flight, self.name))
        else:
            self.log.info("stdout: %s", text)

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def wait(self) -> int:
        return await asyncio.shield(self._exit)

    async def _exited(self, proc: asyncio.subprocess.Process | ZygoteProcess, cgroups: CgroupLease | None) -> int:
        """The exit code, once the process has exited and its sandbox cgroups are removed."""
        code = await proc.wait()
        if cgroups is not None:
            await release_cgroups(cgroups, proc.pid, extension=self.name)
        return code

    def close_lifeline(self) -> None:
        stdin = self._proc.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(Exception):
                stdin.close()

    def signal_group(self, sig: int) -> None:
        """Send `sig` to the whole process group (the extension and anything it started)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    async def terminate(self, grace_s: float) -> None:
        """Close the lifeline, wait up to grace_s/2, SIGTERM the group, wait, SIGKILL the group; reap."""
        try:
            self.close_lifeline()
            if self._proc.returncode is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self._exit), grace_s / 2)
            if self._proc.returncode is None:
                self.signal_group(signal.SIGTERM)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self._exit), max(grace_s / 2, 0.05))
        finally:
            # Always: nothing of the group may outlive us (children that ignored the lifeline, too).
            self.signal_group(signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._exit), 5.0)
            await self._stop_pumps()

    async def _abort(self) -> None:
        self.close_lifeline()
        self.signal_group(signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._exit), 5.0)
        # Give the stderr pump a moment to log the last lines (they go into the error message).
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._tasks[0]), 0.5)
        await self._stop_pumps()

    async def _stop_pumps(self) -> None:
        for task in self._tasks:
            if not task.done():
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(task), 0.2)
            task.cancel()
        self._tasks = [t for t in self._tasks if not t.done()]
