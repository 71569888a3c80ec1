"""The in-namespace half of the egress path: 127.0.0.1:PORT inside the sandbox relays to a host Unix socket."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.sandbox_dirs import Dirs, require

from host import parse_manifest, plan_launch
from host.sandbox._plan import EgressSpec

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox layers are Linux features")

PORT = 18080


@pytest.fixture
def dirs() -> Iterator[Dirs]:
    with tempfile.TemporaryDirectory(prefix="hweg-") as base:
        yield Dirs(Path(base))


@pytest.fixture
def echo_socket(dirs: Dirs) -> Iterator[Path]:
    """A Unix-socket server on the host that answers each connection with b"echo:" + what it received."""
    path = dirs.base / "egress.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
                conn.sendall(b"echo:" + data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path
    srv.close()


def _run(dirs: Dirs, script: str, egress: EgressSpec) -> subprocess.CompletedProcess[str]:
    path = dirs.base / "script.py"
    path.write_text(textwrap.dedent(script))
    plan = plan_launch(
        parse_manifest({"name": "egress-ext", "command": ["python", "script.py"]}),
        command=[sys.executable, str(path)], env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        scratch_dir=dirs.scratch, runtime_dir=dirs.runtime, cwd=dirs.base, mode="auto", egress=egress,
    )
    return subprocess.run(plan.argv, env=plan.env, capture_output=True, text=True, timeout=30, cwd=dirs.base)


def test_loopback_port_reaches_the_host_unix_socket_byte_for_byte(dirs: Dirs, echo_socket: Path) -> None:
    """A process in the sandbox sends 200 kB to 127.0.0.1:PORT and gets the host socket's exact answer back."""
    require("pid_namespace", "net_namespace")
    done = _run(dirs, f"""
        import hashlib, socket
        payload = bytes(range(256)) * 800
        with socket.create_connection(("127.0.0.1", {PORT}), timeout=10) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        print(answer == b"echo:" + payload, len(answer))
    """, EgressSpec(port=PORT, socket=str(echo_socket)))
    assert done.stdout.split() == ["True", str(5 + 256 * 800)], done.stderr


def test_tcp_to_any_other_address_fails_with_egress(dirs: Dirs, echo_socket: Path) -> None:
    """With egress, only the relay port answers: another loopback port and an outside address both fail."""
    require("pid_namespace", "net_namespace")
    outside = socket.socket()
    outside.bind(("127.0.0.1", 0))
    outside.listen(1)
    try:
        done = _run(dirs, f"""
            import socket
            for addr in [("127.0.0.1", {outside.getsockname()[1]}), ("10.1.2.3", 80), ("1.1.1.1", 443)]:
                try:
                    socket.create_connection(addr, timeout=3).close()
                    print("connected")
                except OSError as exc:
                    print("failed")
        """, EgressSpec(port=PORT, socket=str(echo_socket)))
        assert done.stdout.split() == ["failed", "failed", "failed"], done.stderr
    finally:
        outside.close()


async def test_zygote_forked_extension_reaches_the_host_unix_socket(dirs: Dirs, echo_socket: Path) -> None:
    """The zygote path applies the same relay: a forked Python child gets the host socket's answer on the port."""
    require("pid_namespace", "net_namespace")
    from host.sandbox._zygote import Zygote, zygote_launch

    path = dirs.base / "script.py"
    path.write_text(f"import socket\ns = socket.create_connection(('127.0.0.1', {PORT}), timeout=10)\n"
                    "s.sendall(b'ping'); s.shutdown(socket.SHUT_WR)\nprint(s.recv(100).decode())\n")
    env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TZ") if k in os.environ}
    plan = plan_launch(
        parse_manifest({"name": "egress-ext", "command": ["python", "script.py"]}),
        command=[sys.executable, str(path)], env=env, scratch_dir=dirs.scratch, runtime_dir=dirs.runtime,
        cwd=dirs.base, mode="auto", egress=EgressSpec(port=PORT, socket=str(echo_socket)),
    )
    launch = zygote_launch(plan.argv, plan.env)
    assert launch is not None
    zygote = Zygote()
    try:
        proc = await zygote.spawn(launch, name="egress-ext", env=plan.env, cwd=dirs.base)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        out = await asyncio.wait_for(proc.stdout.read(), 30)
        assert (await asyncio.wait_for(proc.wait(), 30), out) == (0, b"echo:ping\n")
    finally:
        await zygote.close()
