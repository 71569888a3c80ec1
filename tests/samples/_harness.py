"""Start an extension process exactly as a host would (env contract, handshake, lifeline) and talk raw gRPC to it."""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from extension_sdk.proto import (
    HANDSHAKE_MAGIC,
    PROTOCOL_VERSION,
    TOKEN_METADATA_KEY,
    extension_pb2 as pb,
    extension_pb2_grpc as pb_grpc,
)

REPO = Path(__file__).resolve().parents[2]
NODE_DIR = REPO / "sample_extensions" / "node_echo"
HANDSHAKE_TIMEOUT_S = 20.0
RPC_TIMEOUT_S = 10.0


HAS_BRIDGE = importlib.util.find_spec("host.extensions._bridge_server") is not None
needs_bridge = pytest.mark.skipif(not HAS_BRIDGE, reason="host/extensions/_bridge_server.py (the HostBridge server) has not landed yet")


def python_command(name: str) -> list[str]:
    return [sys.executable, "-m", f"sample_extensions.{name}"]


def node_command() -> list[str]:
    return ["node", str(NODE_DIR / "index.js")]


def node_missing_reason() -> str | None:
    """Why the Node.js sample cannot run here, or None when it can."""
    if shutil.which("node") is None:
        return "`node` is not on PATH"
    if not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").is_dir():
        return "sample_extensions/node_echo/node_modules is missing: run `make node-deps`"
    return None


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    target: str
    token: str
    stub: pb_grpc.ExtensionStub
    channel: grpc.Channel
    scratch: Path

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return ((TOKEN_METADATA_KEY, self.token),)

    def describe(self) -> pb.DescribeResponse:
        return self.stub.Describe(
            pb.DescribeRequest(protocol_version=PROTOCOL_VERSION), metadata=self.metadata, timeout=RPC_TIMEOUT_S
        )

    def execute(self, name: str, value: Any, session_id: str = "s1") -> list[pb.ToolEvent]:
        request = pb.ExecuteToolRequest(
            context=pb.CallContext(session_id=session_id, request_id="r1"),
            name=name,
            input_json=json.dumps(value),
            tool_call_id="call-1",
        )
        return list(self.stub.ExecuteTool(request, metadata=self.metadata, timeout=RPC_TIMEOUT_S))

    def final_output(self, name: str, value: Any) -> Any:
        events = self.execute(name, value)
        last = events[-1]
        assert last.WhichOneof("event") == "output_json", f"{name} ended with {last}"
        return json.loads(last.output_json)

    def before_turn(self, session_id: str = "s1", body: dict[str, Any] | None = None, **fields: Any) -> pb.BeforeTurnResponse:
        snapshot = pb.TurnSnapshot(**fields)
        if body is not None:
            snapshot.body_json = json.dumps(body)
        request = pb.BeforeTurnRequest(context=pb.CallContext(session_id=session_id, request_id="r1"), snapshot=snapshot)
        return self.stub.BeforeTurn(request, metadata=self.metadata, timeout=RPC_TIMEOUT_S)

    def before_tool_call(self, tool_name: str, value: Any = None, session_id: str = "s1", want_decision: bool = True) -> pb.BeforeToolCallResponse:
        request = pb.BeforeToolCallRequest(
            context=pb.CallContext(session_id=session_id, request_id="r1"),
            snapshot=pb.ToolCallSnapshot(tool_name=tool_name, tool_call_id="call-1", input_json=json.dumps(value)),
            want_decision=want_decision,
        )
        return self.stub.BeforeToolCall(request, metadata=self.metadata, timeout=RPC_TIMEOUT_S)


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    fd = proc.stdout.fileno()
    while not buf.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no handshake within {timeout}s (got {buf!r})")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 1)
            if not chunk:
                raise RuntimeError(f"extension exited before its handshake (rc={proc.wait()}, got {buf!r})")
            buf += chunk
    return buf.decode().strip()


@contextmanager
def spawn(
    command: list[str], *, cwd: Path = REPO, extra_env: dict[str, str] | None = None, name: str = "ext"
) -> Iterator[Running]:
    """Start `command` with the host's env contract, wait for the handshake, yield a connected stub.

    On exit: close stdin (the lifeline) and require the process to exit by itself.
    """
    runtime = Path(tempfile.mkdtemp(prefix="hw-sample-"))
    os.chmod(runtime, 0o700)
    scratch = runtime / "scratch"
    scratch.mkdir()
    socket = runtime / "ext.sock"
    token = secrets.token_hex(16)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOOKWIRE_SOCKET": str(socket),
        "HOOKWIRE_TOKEN": token,
        "HOOKWIRE_MAGIC_COOKIE": "hookwire-extension-v1",
        "HOOKWIRE_EXTENSION_NAME": name,
        "HOOKWIRE_SCRATCH_DIR": str(scratch),
        "PYTHONPATH": str(REPO),
        **(extra_env or {}),
    }
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None)
    channel: grpc.Channel | None = None
    try:
        line = _read_line(proc, HANDSHAKE_TIMEOUT_S)
        magic, version, target = line.split("|", 2)
        assert (magic, version, target) == (HANDSHAKE_MAGIC, PROTOCOL_VERSION, f"unix:{socket}"), line
        channel = grpc.insecure_channel(target)
        yield Running(proc, target, token, pb_grpc.ExtensionStub(channel), channel, scratch)
    finally:
        if channel is not None:
            channel.close()
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"{command} did not exit after its stdin lifeline closed") from None
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
            shutil.rmtree(runtime, ignore_errors=True)
