"""Spawn fixture extensions as real processes under the host's env contract and talk raw gRPC.

A module of its own (not conftest.py): test modules import from it, and a `from conftest import` would find another
directory's conftest when pytest is given several test directories at once."""

from __future__ import annotations

import os
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from extension_sdk.proto import MAGIC_COOKIE as COOKIE
from extension_sdk.proto import TOKEN_METADATA_KEY, extension_pb2_grpc

FIXTURES = Path(__file__).parent / "fixtures"
HANDSHAKE_TIMEOUT_S = 15.0


def read_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """One line from the child's stdout, or '' on EOF; fails the test after `timeout`."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    deadline = time.monotonic() + timeout
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no line on stdout within {timeout}s (got {buf!r})")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 1)
            if not chunk:
                break
            buf += chunk
    return buf.decode()


def wait_exit(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int | None:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    handshake: str
    target: str
    token: str
    dir: Path
    channel: grpc.Channel = field(init=False)
    stub: extension_pb2_grpc.ExtensionStub = field(init=False)

    def __post_init__(self) -> None:
        self.channel = grpc.insecure_channel(self.target)
        self.stub = extension_pb2_grpc.ExtensionStub(self.channel)

    @property
    def md(self) -> tuple[tuple[str, str], ...]:
        return ((TOKEN_METADATA_KEY, self.token),)

    def stderr_text(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")

    def stop(self) -> None:
        self.channel.close()
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            if wait_exit(self.proc, 10) is None:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def make_env(sock_dir: Path, name: str, token: str, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOOKWIRE_SOCKET": str(sock_dir / "ext.sock"),
        "HOOKWIRE_TOKEN": token,
        "HOOKWIRE_MAGIC_COOKIE": COOKIE,
        "HOOKWIRE_EXTENSION_NAME": name,
        "HOOKWIRE_SCRATCH_DIR": str(sock_dir),
    }
    env.update(extra)
    return env


def start(fixture: str, env: dict[str, str], args: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(FIXTURES / f"{fixture}.py"), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def spawn(fixture: str, **extra_env: str) -> Running:
    sock_dir = Path(tempfile.mkdtemp(prefix="hw-sdk-"))
    os.chmod(sock_dir, 0o700)
    token = secrets.token_hex(16)
    proc = start(fixture, make_env(sock_dir, fixture, token, **extra_env))
    line = read_line(proc, HANDSHAKE_TIMEOUT_S)
    if not line:
        proc.wait(5)
        raise RuntimeError(f"{fixture} exited before the handshake: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
    target = line.strip().split("|", 2)[-1]
    return Running(proc=proc, handshake=line, target=target, token=token, dir=sock_dir)
